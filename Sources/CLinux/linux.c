#define _GNU_SOURCE
#include "CLinux.h"
#include <fcntl.h>
#include <malloc.h>
#include <spawn.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int rfs_start_writeback(int fd, off_t offset, off_t length) {
    return sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE);
}

int rfs_punch_hole(int fd, off_t offset, off_t length) {
    return fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length);
}

int rfs_o_direct(void) { return O_DIRECT; }

int rfs_syncfs(int fd) { return syncfs(fd); }

short rfs_posix_spawn_setsid(void) { return POSIX_SPAWN_SETSID; }

int rfs_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

int rfs_release_free_memory(void) { return malloc_trim(0); }

int rfs_peer_credentials(int fd, pid_t *pid, uid_t *uid) {
    struct ucred credentials;
    socklen_t size = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) return -1;
    *pid = credentials.pid;
    *uid = credentials.uid;
    return 0;
}

int rfs_set_process_name(const char *name) { return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0); }

int rfs_syslog_reachable(void) {
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    struct sockaddr_un address = { .sun_family = AF_UNIX };
    strncpy(address.sun_path, "/dev/log", sizeof address.sun_path - 1);
    int reachable = connect(fd, (struct sockaddr *)&address, sizeof address) == 0;
    close(fd);
    return reachable;
}
