// CChecksum: CRC32C with the CPU's crc32 instruction. It exists because checksumming every block must keep up with
// the network and the page cache, and Swift has no way to reach SSE4.2's crc32 instruction.
#ifndef RANGEFS_CCHECKSUM_H
#define RANGEFS_CCHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/// Whether `rfs_crc32c_hardware` may be called on this CPU.
int rfs_crc32c_hardware_available(void);

/// CRC32C of `length` bytes, continuing from `crc` (0 to start); same result as the table version.
uint32_t rfs_crc32c_hardware(uint32_t crc, const void *bytes, size_t length);

#endif
