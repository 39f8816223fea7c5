#define _GNU_SOURCE
#include "CChecksum.h"
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <pthread.h>

int rfs_crc32c_hardware_available(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    return (ecx & bit_SSE4_2) != 0;
}

/* One crc32 instruction has a latency of three cycles but the CPU can start one per cycle, so one dependent
   chain runs at a third of the possible speed. Long inputs are cut into chunks of three lanes of LANE bytes,
   checksummed side by side, and joined: a CRC register is linear, so crc(s, A||B) = shift(crc(s, A), |B|) ^
   crc(0, B), where shift(v, n) is the register after n zero bytes. shift by LANE is linear in v, so it is four
   256-entry table lookups, built once from the instruction itself. */
#define LANE 4096

static uint32_t shift_table[4][256];
static pthread_once_t shift_once = PTHREAD_ONCE_INIT;

__attribute__((target("sse4.2")))
static uint64_t crc_zeros(uint64_t state, size_t length) {
    for (size_t i = 0; i < length / 8; i++) state = __builtin_ia32_crc32di(state, 0);
    return state;
}

static void build_shift_table(void) {
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++) shift_table[k][b] = (uint32_t)crc_zeros((uint64_t)b << (8 * k), LANE);
}

static inline uint32_t shift_lane(uint32_t v) {
    return shift_table[0][v & 0xff] ^ shift_table[1][(v >> 8) & 0xff] ^ shift_table[2][(v >> 16) & 0xff]
        ^ shift_table[3][v >> 24];
}

__attribute__((target("sse4.2")))
uint32_t rfs_crc32c_hardware(uint32_t crc, const void *bytes, size_t length) {
    const unsigned char *p = bytes;
    uint64_t state = ~crc;
    if (length >= 3 * LANE) {
        pthread_once(&shift_once, build_shift_table);
        while (length >= 3 * LANE) {
            uint64_t a = state, b = 0, c = 0;
            for (size_t i = 0; i < LANE; i += 8) {
                uint64_t wa, wb, wc;
                memcpy(&wa, p + i, 8);
                memcpy(&wb, p + LANE + i, 8);
                memcpy(&wc, p + 2 * LANE + i, 8);
                a = __builtin_ia32_crc32di(a, wa);
                b = __builtin_ia32_crc32di(b, wb);
                c = __builtin_ia32_crc32di(c, wc);
            }
            state = shift_lane(shift_lane((uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)c;
            p += 3 * LANE;
            length -= 3 * LANE;
        }
    }
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
