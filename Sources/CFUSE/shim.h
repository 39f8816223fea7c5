// CFUSE: libfuse3's low-level API for Swift. It exists because FUSE_USE_VERSION must be set before the
// include, and because fuse_file_info's flags are C bitfields, which this shim sets through typed helpers.
#ifndef RANGEFS_CFUSE_SHIM_H
#define RANGEFS_CFUSE_SHIM_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <sys/xattr.h>
#include <sys/stat.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

static inline void rfs_fi_set_keep_cache(struct fuse_file_info *fi, int on) { fi->keep_cache = on ? 1 : 0; }
static inline void rfs_fi_set_direct_io(struct fuse_file_info *fi, int on) { fi->direct_io = on ? 1 : 0; }
static inline void rfs_fi_set_noflush(struct fuse_file_info *fi, int on) { fi->noflush = on ? 1 : 0; }
static inline void rfs_fi_set_cache_readdir(struct fuse_file_info *fi, int on) { fi->cache_readdir = on ? 1 : 0; }

/// Capabilities the kernel offered and we may want; FUSE_CAP_* are macros.
static inline unsigned rfs_cap_async_read(void) { return FUSE_CAP_ASYNC_READ; }
static inline unsigned rfs_cap_splice_write(void) { return FUSE_CAP_SPLICE_WRITE; }
static inline unsigned rfs_cap_splice_move(void) { return FUSE_CAP_SPLICE_MOVE; }
static inline unsigned rfs_cap_auto_inval_data(void) { return FUSE_CAP_AUTO_INVAL_DATA; }

/// Reply with data read straight from a file descriptor (splice where the kernel allows it).
static inline int rfs_reply_fd(fuse_req_t req, int fd, off_t offset, size_t size) {
    struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
    buf.buf[0].flags = (enum fuse_buf_flags)(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
    buf.buf[0].fd = fd;
    buf.buf[0].pos = offset;
    return fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

static inline int rfs_errno_value(void) { return errno; }

/// Answers an OPEN in passthrough mode: the kernel reads backing file `backing_id` itself (DESIGN.md §6). libfuse
/// 3.14's fuse_open_out calls the last field padding; since protocol 7.40 it is the backing id, and
/// FOPEN_PASSTHROUGH is 1 << 7 (with FOPEN_NOFLUSH, 1 << 5; never FOPEN_KEEP_CACHE).
static inline int rfs_reply_open_passthrough(fuse_req_t req, uint64_t fh, int32_t backing_id) {
    struct { uint64_t fh; uint32_t open_flags; int32_t backing_id; } out = { fh, (1u << 7) | (1u << 5), backing_id };
    return fuse_reply_buf(req, (const char *)&out, sizeof out);
}

/// Routes the session's requests and replies through rangefs's passthrough io (CLinux's rfs_io_*).
static inline int rfs_session_custom_io(struct fuse_session *se,
                                        ssize_t (*read_fn)(int, void *, size_t, void *),
                                        ssize_t (*writev_fn)(int, struct iovec *, int, void *),
                                        ssize_t (*splice_fn)(int, off_t *, int, off_t *, size_t, unsigned int, void *)) {
    static struct fuse_custom_io io;  // lives as long as the process, whatever libfuse keeps of it
    io.writev = writev_fn;
    io.read = read_fn;
    io.splice_receive = splice_fn;
    io.splice_send = splice_fn;
    return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}

#endif
