// CChecksum: CRC32C with the CPU's crc32 instruction. It exists because checksumming every block must keep up with
// the network and the page cache, and Swift has no way to reach SSE4.2's crc32 instruction. It also carries the
// one Linux call Swift's Glibc module hides (sync_file_range), for the cache's write path.
#ifndef RANGEFS_CCHECKSUM_H
#define RANGEFS_CCHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/// Whether `rfs_crc32c_hardware` may be called on this CPU.
int rfs_crc32c_hardware_available(void);

/// CRC32C of `length` bytes, continuing from `crc` (0 to start); same result as the table version.
uint32_t rfs_crc32c_hardware(uint32_t crc, const void *bytes, size_t length);

#endif

#ifndef RANGEFS_CSYSTEM_EXTRAS
#define RANGEFS_CSYSTEM_EXTRAS
#include <sys/types.h>
/// Starts writeback of [offset, offset+length) of fd without waiting (sync_file_range with SYNC_FILE_RANGE_WRITE,
/// which Swift's Glibc module hides behind _GNU_SOURCE). Returns 0 or -1 with errno set.
int rfs_start_writeback(int fd, off_t offset, off_t length);
#endif

/// Frees the disk space of [offset, offset+length) of fd, keeping its size (fallocate PUNCH_HOLE|KEEP_SIZE; the
/// flags are hidden behind _GNU_SOURCE). Returns 0 or -1 with errno set.
int rfs_punch_hole(int fd, off_t offset, off_t length);

/// O_DIRECT, for open(2): writes go from the caller's (aligned) buffer to the disk, past the page cache (the
/// flag is hidden behind _GNU_SOURCE).
int rfs_o_direct(void);
