"""What every part of the benchmark shares: running commands, making and checking files, dropping the page cache,
timing a command, and the CPU and memory of processes read from /proc.

The benchmark's modules import this one (and `origin.py`, `mounts.py`), never `bench.py`: `bench.py` is the command
line that imports the scenarios, so a scenario that imported it would close a circle (issue 48;
`.ci/check-bench-imports` keeps it closed).
"""
import hashlib, os, random, shutil, signal, socket, subprocess, tempfile, time

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


_handed_out = set()
_port_choice = random.SystemRandom()  # unaffected by any seed a scenario sets for its files


def free_port():
    """A port on 127.0.0.1 that nothing listens on now, for a server started next: below the kernel's range for
    the local ends of outgoing connections, and never the same twice in one run. A port from that range (what a
    bind to port 0 gives) can be taken by any connection's own end between this check and the server's bind: a CI
    run's capproxy found its port in use so."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 32768
    for _ in range(1000):
        port = _port_choice.randrange(10000, max(10001, ephemeral))
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket() as s:  # every port tried was taken: the kernel's choice, as before
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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

