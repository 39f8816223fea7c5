// CLinux: the Linux calls and constants Swift's Glibc module hides behind _GNU_SOURCE (O_DIRECT, fallocate's
// punch-hole flags, sync_file_range, POSIX_SPAWN_SETSID, pipe2). It exists so that Swift code calls them through
// typed functions instead of restating their numbers.
#ifndef RANGEFS_CLINUX_H
#define RANGEFS_CLINUX_H

#include <sys/types.h>

/// Starts writeback of [offset, offset+length) of fd without waiting (sync_file_range with SYNC_FILE_RANGE_WRITE).
/// Returns 0 or -1 with errno set.
int rfs_start_writeback(int fd, off_t offset, off_t length);

/// Frees the disk space of [offset, offset+length) of fd, keeping its size (fallocate PUNCH_HOLE|KEEP_SIZE).
/// Returns 0 or -1 with errno set.
int rfs_punch_hole(int fd, off_t offset, off_t length);

/// O_DIRECT, for open(2): writes go from the caller's (aligned) buffer to the disk, past the page cache.
int rfs_o_direct(void);

/// syncfs(2): flushes every file of the file system that holds fd, in one go (a group commit of many files).
int rfs_syncfs(int fd);

/// POSIX_SPAWN_SETSID, for posix_spawnattr_setflags: the child starts a new session.
short rfs_posix_spawn_setsid(void);

/// pipe2(fds, O_CLOEXEC): a pipe whose ends are closed in spawned programs unless dup2'ed there.
int rfs_pipe_cloexec(int fds[2]);

/// malloc_trim(0): gives the heap's free memory back to the system (glibc keeps it otherwise).
int rfs_release_free_memory(void);

/// The PID and effective uid of the process at the other end of a connected unix socket (SO_PEERCRED's struct
/// ucred, which Glibc's Swift module hides: it needs _GNU_SOURCE), as they were at connect or listen.
/// Returns 0, or -1 with errno set.
int rfs_peer_credentials(int fd, pid_t *pid, uid_t *uid);

/// prctl(PR_SET_NAME): names the calling thread (the process, from its main thread) for ps, pgrep and top.
/// A program started through /proc/self/exe is otherwise called "exe". Returns 0 or -1 with errno set.
int rfs_set_process_name(const char *name);

/// Whether a syslog daemon listens on /dev/log (a datagram socket there accepts a connection).
int rfs_syslog_reachable(void);

// FUSE passthrough (passthrough.c): the custom io that negotiates it at INIT, and the backing-file ioctls.
#include <sys/uio.h>
/// Whether the mount asks for passthrough when the kernel offers it (set before the session loop starts).
void rfs_passthrough_want(int on);
/// Whether the kernel offered passthrough at INIT.
int rfs_passthrough_offered(void);
/// Whether the INIT reply took it.
int rfs_passthrough_negotiated(void);
/// Whether the INIT reply has been sent (then `rfs_passthrough_negotiated` is final).
int rfs_passthrough_init_replied(void);
ssize_t rfs_io_read(int fd, void *buffer, size_t length, void *userdata);
ssize_t rfs_io_writev(int fd, struct iovec *iov, int count, void *userdata);
ssize_t rfs_io_splice(int in, off_t *in_offset, int out, off_t *out_offset, size_t length, unsigned int flags,
                      void *userdata);
/// FUSE_DEV_IOC_BACKING_OPEN on the session's descriptor: the backing id (> 0) for `fd`, or -1 with errno.
int rfs_backing_open(int session_fd, int fd);
/// FUSE_DEV_IOC_BACKING_CLOSE: the kernel forgets backing `backing_id` (open files keep their own reference).
int rfs_backing_close(int session_fd, int backing_id);
/// Whether this process holds CAP_SYS_ADMIN in its effective set (the backing ioctl needs it).
int rfs_has_cap_sys_admin(void);

#endif
