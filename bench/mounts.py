"""Mounts the benchmark measures: rangefs in the foreground (its PID known), and the peers beside it (httpdirfs,
httpfs2, rclone, bindfs); each is unmounted by its `close`."""
import os, subprocess, tempfile, time

from harness import memory, run


class Mount:
    """A rangefs mount in the foreground (so its PID is known), unmounted by `close`."""

    extra_options = []

    def __init__(self, binary, work, urls, cache, options=()):
        self.point = tempfile.mkdtemp(dir=work, prefix="mnt-")
        self.process = subprocess.Popen([binary, "mount", "-f", self.point, *urls, "--cache", cache, *options,
                                         *Mount.extra_options],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while not self.mounted():
            if time.time() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"rangefs did not mount {urls}")
            time.sleep(0.02)

    def mounted(self):
        with open("/proc/self/mountinfo") as f:
            return any(line.split()[4] == self.point for line in f)

    def path(self, name):
        return os.path.join(self.point, name)

    def peak_rss(self):
        return memory(self.process.pid, "VmHWM")

    def wait_complete(self, name, timeout=300):
        deadline = time.time() + timeout
        while time.time() < deadline:
            state = subprocess.run(["getfattr", "--only-values", "-n", "user.rangefs.state", self.path(name)],
                                   capture_output=True, text=True).stdout
            if state == "complete":
                return True
            time.sleep(0.1)
        return False

    def close(self):
        subprocess.run(["fusermount3", "-u", self.point], stderr=subprocess.DEVNULL)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            subprocess.run(["fusermount3", "-uz", self.point])
            self.process.kill()
            self.process.wait()


class PeerMount:
    """An httpdirfs mount of the origin's directory listing, with its own disk cache, unmounted by `close`."""

    def __init__(self, work, url, cache):
        self.point = tempfile.mkdtemp(dir=work, prefix="peer-")
        run(["httpdirfs", "--cache", "--cache-location", cache, url, self.point],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while not os.path.exists(os.path.join(self.point, "big.bin")):
            if time.time() > deadline:
                raise RuntimeError("httpdirfs did not mount " + url)
            time.sleep(0.05)

    def path(self, name):
        return os.path.join(self.point, name)

    def close(self):
        subprocess.run(["fusermount3", "-u", self.point], stderr=subprocess.DEVNULL)
        time.sleep(0.2)


class Httpfs2Mount:
    """httpfs2 (no cache: every read is a Range request) mounting one URL in the foreground, its PID known for
    its CPU; unmounted by `close`. It needs Accept-Ranges on 206 responses, which the direct nginx adds."""

    def __init__(self, work, url, name):
        self.point = tempfile.mkdtemp(dir=work, prefix="httpfs2-")
        self.process = subprocess.Popen(["httpfs2", "-f", "-c", "/dev/null", url, self.point],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.file = os.path.join(self.point, name)
        deadline = time.time() + 30
        while not os.path.exists(self.file):
            if time.time() > deadline or self.process.poll() is not None:
                self.close()
                raise RuntimeError("httpfs2 did not mount " + url)
            time.sleep(0.05)

    def close(self):
        unmount_foreground(self.point, self.process)


class ListingPeer:
    """A peer that mounts a web directory in the foreground (its PID known): httpdirfs or rclone, each with its
    own disk cache, or bindfs over a local folder (no cache); unmounted by `close`."""

    def __init__(self, kind, work, url, cache, timeout=60, rclone="rclone", options=()):
        """`kind` is httpdirfs, rclone or bindfs (`url` is then a local folder); `rclone` the rclone binary,
        `options` more options for it."""
        self.kind = kind
        self.point = tempfile.mkdtemp(dir=work, prefix=f"{kind}-")
        if kind == "httpdirfs":
            command = ["httpdirfs", "-f", "--cache", "--cache-location", cache, url, self.point]
        elif kind == "bindfs":
            command = ["bindfs", "-f", url, self.point]
        else:
            command = [rclone, "mount", ":http:", self.point, "--http-url", url, "--vfs-cache-mode", "full",
                       "--cache-dir", cache, "--read-only", *options]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # httpdirfs lists the directory before the mount appears.
        deadline = time.time() + timeout
        while not Mount.mounted(self):
            if time.time() > deadline or self.process.poll() is not None:
                self.process.kill()
                self.process.wait()
                raise TimeoutError(f"{kind} did not mount {url} within {timeout} s")
            time.sleep(0.05)

    def close(self):
        unmount_foreground(self.point, self.process)


def unmount_foreground(point, process):
    """Unmounts a peer that runs in the foreground and waits for it to exit (killed after 30 s)."""
    subprocess.run(["fusermount3", "-uz", point], stderr=subprocess.DEVNULL)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def kill_during_copy(mount, source, dest, at):
    """Copies `source` to `dest` with cp, kills `mount`'s daemon with SIGKILL once `at` bytes are copied (or cp
    ended), and lazily unmounts its mount point. Returns the bytes cp had copied when the daemon was killed."""
    copy = subprocess.Popen(["cp", source, dest], stderr=subprocess.DEVNULL)
    copied = 0
    while copied < at and copy.poll() is None:
        copied = os.path.getsize(dest) if os.path.exists(dest) else 0
        time.sleep(0.0005)
    mount.process.kill()
    mount.process.wait()
    copy.wait()
    subprocess.run(["fusermount3", "-uz", mount.point], stderr=subprocess.DEVNULL)
    return copied

