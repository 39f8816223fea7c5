#define _GNU_SOURCE
#include "CChecksum.h"
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>

int rfs_crc32c_hardware_available(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    return (ecx & bit_SSE4_2) != 0;
}

__attribute__((target("sse4.2")))
uint32_t rfs_crc32c_hardware(uint32_t crc, const void *bytes, size_t length) {
    const unsigned char *p = bytes;
    uint64_t state = ~crc;
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        state = __builtin_ia32_crc32di(state, word);
        p += 8;
        length -= 8;
    }
    uint32_t tail = (uint32_t)state;
    while (length--) tail = __builtin_ia32_crc32qi(tail, *p++);
    return ~tail;
}
#else
int rfs_crc32c_hardware_available(void) { return 0; }
uint32_t rfs_crc32c_hardware(uint32_t crc, const void *bytes, size_t length) { (void)bytes; (void)length; return crc; }
#endif

#include <fcntl.h>

int rfs_start_writeback(int fd, off_t offset, off_t length) {
    return sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE);
}

int rfs_punch_hole(int fd, off_t offset, off_t length) {
    return fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length);
}
