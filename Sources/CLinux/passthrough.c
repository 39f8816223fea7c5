#define _GNU_SOURCE
// FUSE passthrough on libfuse 3.14, which has no API for it (DESIGN.md §6). The one place where rangefs reads and
// amends raw FUSE protocol bytes: libfuse hands every request to `rfs_io_read` and every reply to
// `rfs_io_writev` (fuse_session_custom_io). Only the INIT request and its reply are looked at:
//
//   request:  fuse_in_header (40 bytes: len u32, opcode u32 @4, unique u64 @8, ...), then fuse_init_in:
//             major u32 @0, minor u32 @4, max_readahead u32 @8, flags u32 @12, flags2 u32 @16
//   reply:    fuse_out_header (16 bytes: len u32, error i32 @4, unique u64 @8), then fuse_init_out:
//             major u32 @0, minor u32 @4, flags u32 @12, flags2 u32 @32, max_stack_depth u32 @36
//
// The kernel offers passthrough with FUSE_INIT_EXT in flags and FUSE_PASSTHROUGH (1 << 37, bit 5 of flags2);
// the reply takes it with the same bits and a max_stack_depth of 1. Written for protocol 7.31 (libfuse 3.14
// answers as 7.31, whose fuse_init_out leaves bytes 32..63 unused and zeroed) and valid for every later minor,
// where those offsets hold flags2 and max_stack_depth. Everything else passes through untouched.

#include "CLinux.h"
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>
#include <fcntl.h>
#include <stdlib.h>

#define RFS_FUSE_INIT 26
#define RFS_FUSE_INIT_EXT (1u << 30)
#define RFS_FUSE_PASSTHROUGH_FLAGS2 (1u << 5)

static atomic_int wanted = 0;
static atomic_int offered = 0;
static atomic_int negotiated = 0;
static _Atomic uint64_t init_unique = 0;
static atomic_int init_seen = 0;
static atomic_int init_replied = 0;

void rfs_passthrough_want(int on) { atomic_store(&wanted, on); }
int rfs_passthrough_offered(void) { return atomic_load(&offered); }
int rfs_passthrough_negotiated(void) { return atomic_load(&negotiated); }
int rfs_passthrough_init_replied(void) { return atomic_load(&init_replied); }

static uint32_t load32(const unsigned char *bytes) {
    uint32_t value;
    memcpy(&value, bytes, sizeof value);
    return value;
}

static uint64_t load64(const unsigned char *bytes) {
    uint64_t value;
    memcpy(&value, bytes, sizeof value);
    return value;
}

static void store32(unsigned char *bytes, uint32_t value) { memcpy(bytes, &value, sizeof value); }

ssize_t rfs_io_read(int fd, void *buffer, size_t length, void *userdata) {
    (void)userdata;
    ssize_t got = read(fd, buffer, length);
    if (got >= 40 + 20 && !atomic_load(&init_seen)) {
        const unsigned char *bytes = buffer;
        if (load32(bytes + 4) == RFS_FUSE_INIT) {
            uint32_t flags = load32(bytes + 40 + 12), flags2 = load32(bytes + 40 + 16);
            atomic_store(&init_unique, load64(bytes + 8));
            atomic_store(&offered, (flags & RFS_FUSE_INIT_EXT) && (flags2 & RFS_FUSE_PASSTHROUGH_FLAGS2));
            atomic_store(&init_seen, 1);
        }
    }
    return got;
}

ssize_t rfs_io_writev(int fd, struct iovec *iov, int count, void *userdata) {
    (void)userdata;
    int is_init_reply = 0;
    if (atomic_load(&init_seen) && !atomic_load(&init_replied) && count >= 1 && iov[0].iov_len >= 16) {
        const unsigned char *header = iov[0].iov_base;
        is_init_reply = load64(header + 8) == atomic_load(&init_unique);
    }
    if (is_init_reply && atomic_load(&wanted) && atomic_load(&offered) && count >= 2 && iov[1].iov_len >= 40) {
        const unsigned char *header = iov[0].iov_base;
        unsigned char *init = iov[1].iov_base;
        int32_t error;
        memcpy(&error, header + 4, sizeof error);
        if (error == 0 && load32(init) == 7 && load32(init + 4) >= 31) {
            store32(init + 12, load32(init + 12) | RFS_FUSE_INIT_EXT);
            store32(init + 32, load32(init + 32) | RFS_FUSE_PASSTHROUGH_FLAGS2);
            store32(init + 36, 1);  // max_stack_depth: the backing files are on a plain filesystem
            atomic_store(&negotiated, 1);
        }
    }
    ssize_t written = writev(fd, iov, count);
    if (is_init_reply) atomic_store(&init_replied, 1);
    return written;
}

ssize_t rfs_io_splice(int in, off_t *in_offset, int out, off_t *out_offset, size_t length, unsigned int flags,
                      void *userdata) {
    (void)userdata;
    return splice(in, in_offset, out, out_offset, length, flags);
}

int rfs_backing_open(int session_fd, int fd) {
    struct { uint32_t fd; uint32_t flags; uint64_t padding; } map = { (uint32_t)fd, 0, 0 };
    return ioctl(session_fd, 0x4010e501 /* FUSE_DEV_IOC_BACKING_OPEN */, &map);
}

int rfs_backing_close(int session_fd, int backing_id) {
    uint32_t id = (uint32_t)backing_id;
    return ioctl(session_fd, 0x4004e502 /* FUSE_DEV_IOC_BACKING_CLOSE */, &id);
}

int rfs_has_cap_sys_admin(void) {
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char text[8192];
    ssize_t got = read(fd, text, sizeof text - 1);
    close(fd);
    if (got <= 0) return 0;
    text[got] = 0;
    const char *line = strstr(text, "CapEff:");
    if (!line) return 0;
    unsigned long long caps = strtoull(line + 7, NULL, 16);
    return (caps >> 21) & 1;  // CAP_SYS_ADMIN
}
