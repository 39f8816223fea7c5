"""The `small` scenario: many small files on loopback (issues 36 and 46).

3,000 files of 1-60 KB (seeded random sizes and bytes) in one directory, listed by nginx's HTML autoindex. Each
filesystem is mounted fresh and cold, the directory listed (not timed: every tool needs the names first), the page
cache dropped, and then timed: `xargs cat` of every file in listing order, and (another fresh mount) `xargs -P 8`.
The mount of the one reader is then unmounted and mounted again on the same cache, and the same read timed again,
with the requests for files it cost counted in nginx's access log; then once more with `xargs -P 8` (several
readers of a cached tree, where the daemon's locks are contended). The references: bindfs over the origin's own
files (FUSE with no network: what any FUSE file system costs), curl fetching the same URLs one after another in
one process (a --config file, `-o` each) and `curl -Z --parallel-max 8`. The daemon's CPU seconds are measured
beside each read, and after the cold read the cache's inodes and disk use are counted. Issue 46's goals follow as
a table of their own. All of it twice: caches on a fresh journaled ext4 image, and on the work folder's file
system (`--small-caches` picks one; bench/smallcache.py).

A separate run, not timed, counts the daemon's system calls with `strace -c -f -p` over 1,000 cold small files:
flushes (fsync, fdatasync, syncfs, sync_file_range) per file, and the mkdir, unlink, openat and access calls that
failed (lookups of files that are not there).

The builds, bindfs and curl get `--runs` runs (medians); the other peers one run each, with a deadline.
"""
import hashlib, os, random, shutil, signal, subprocess, time

import harness
import smallcache
import tools
from tables import Goals, Table, attempt

PEER_TIMEOUT = 60
FLUSHES = ("fsync", "fdatasync", "syncfs", "sync_file_range")
SIZES = (1000, 60000)  # bytes, issue 46's 1-60 KB
BATCH = 20  # names per cat under `xargs -P 8`: 150 cats, so the 8 readers share the list to its end
KiB = 1024


def make_files(bench, count):
    """www/small/: `count` files of 1,000-60,000 bytes; returns (names in listing order, sha256 of them in order,
    their bytes)."""
    folder = os.path.join(bench.www, "small")
    os.makedirs(folder, exist_ok=True)
    generator = random.Random(36)
    names, digest, total = [], hashlib.sha256(), 0
    for index in range(count):
        name = f"s{index:05d}.bin"
        data = generator.randbytes(generator.randint(*SIZES))
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
        digest.update(data)
        names.append(name)
        total += len(data)
    return names, digest.hexdigest(), total


def contents_digest(paths):
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


def reader_command(names_file, count):
    """`xargs cat` of the files named in `names_file` (one a line, in listing order); with `count` > 1, `count`
    cats at a time (`xargs -P`), BATCH names each."""
    command = ["xargs", "-d", "\n", "-a", names_file]
    if count > 1:
        command += ["-P", str(count), "-n", str(BATCH)]
    return command + ["cat"]


def timed_read(point, names_file, count, timeout):
    """Seconds the readers of `reader_command` take in the folder `point`, or None when a cat failed or they did
    not finish within `timeout` (then xargs and its cats are killed: they run in a process group of their own)."""
    start = time.perf_counter()
    process = subprocess.Popen(reader_command(names_file, count), cwd=point, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return None
    seconds = time.perf_counter() - start
    return seconds if code == 0 else None


ONE, EIGHT, AGAIN = ("1 reader in listing order, cold", "8 readers (xargs -P 8), cold",
                     "1 reader after unmount and remount")
CPU_ONE, CPU_EIGHT, CPU_AGAIN = ("  daemon CPU s, 1 reader cold", "  daemon CPU s, 8 readers cold",
                                 "  daemon CPU s, after the remount")
# Not a goal of issue 46: a cached tree re-read by several readers at once, where the daemon's locks are contended
# (docs/performance.md, "Locks that do not spin a time slice away").
EIGHT_AGAIN, CPU_EIGHT_AGAIN = ("8 readers after a second remount", "  daemon CPU s, 8 readers after it")
REQUESTS = "  requests for files, after the remount (nginx's log)"
INODES, DISK = "cache inodes per file, after the cold read", "cache on disk, MB, after the cold read"


class Pass:
    """The scenario with every cache in one folder (`folder`, described as `described`): each filesystem's reads,
    CPU, requests and cache, in one table, and issue 46's goals in another."""

    def __init__(self, bench, folder, described, files, filesystems, curl_columns):
        self.bench, self.folder, self.described = bench, folder, described
        self.names, self.expected, self.total, self.names_file = files
        self.filesystems, self.curl_columns = filesystems, curl_columns
        self.url, self.source = bench.nginx.url("small/"), os.path.join(bench.www, "small")
        args = bench.args
        self.table = Table(f"small: {len(self.names)} files of 1-60 KB ({self.total / 1e6:.1f} MB), loopback "
                           f"nginx, caches on {described} (seconds, medians of {args.runs} runs for the builds, "
                           f"bindfs and curl, one run for the other peers)",
                           [column for column, _ in filesystems] + curl_columns,
                           baseline=args.baseline_label if args.baseline else None, timeout=PEER_TIMEOUT,
                           rows=[ONE, CPU_ONE, EIGHT, CPU_EIGHT, AGAIN, CPU_AGAIN, REQUESTS, EIGHT_AGAIN,
                                 CPU_EIGHT_AGAIN, INODES, DISK])

    def mount(self, spec, cache):
        """A mount by `spec` on `cache`: bindfs over the origin's folder, the others of its URL; None if it failed."""
        return tools.open_mount(self.bench, spec, self.source if spec[0] == "bindfs" else self.url, PEER_TIMEOUT,
                                cache)

    def read(self, column, spec, mount, count, row, cpu_row):
        """Lists `mount` (not timed), drops the page cache and times `count` readers; the time and the daemon's
        CPU seconds go in the table. Returns (seconds or None, the names listed)."""
        listed = sorted(os.listdir(mount.point))
        harness.drop_caches()
        before = harness.process_cpu([mount.process.pid])
        seconds = timed_read(mount.point, self.names_file, count, 600 if spec[0] == "rangefs" else PEER_TIMEOUT)
        self.table.add(row, column, seconds)
        self.table.add(cpu_row, column, harness.process_cpu([mount.process.pid]) - before)
        return seconds, listed

    def check(self, column, spec, mount, listed, what):
        """Every file listed and its bytes right: a check for a build, a note for a peer."""
        paths = [os.path.join(mount.point, name) for name in self.names]
        right = listed == self.names and contents_digest(paths) == self.expected
        if spec[0] == "rangefs":
            self.bench.checks.append((f"small, caches on {self.described}: {column}, {what}: every file listed "
                                      "and right", right))
        elif not right:
            harness.log(f"  small: {column} showed wrong or missing files ({what})")

    def mounted_read(self, column, spec, cache, count, rows, what, keep_cache=False, counted=None):
        """Mounts `spec` on `cache`, reads (`count` readers; `rows`: the time's and the CPU's), calls `counted` (if
        any) before the check, whose opens could send requests of their own, checks and unmounts. The cache is
        kept for a remount if `keep_cache` and the read finished, else removed. Returns the seconds or None."""
        mount = self.mount(spec, cache)
        if mount is None:
            self.table.add(rows[0], column, None)
            smallcache.remove(cache)
            return None
        seconds, listed = self.read(column, spec, mount, count, *rows)
        if counted:
            counted()
        if seconds is not None:
            self.check(column, spec, mount, listed, what)
        tools.close(mount, stuck=seconds is None, keep_cache=keep_cache and seconds is not None)
        return seconds

    def one_reader(self, column, spec):
        """One reader cold on a fresh cache, the cache counted after the unmount, then one reader again after a
        remount on that cache, with the requests for files it cost from nginx's log, then eight readers after
        another remount."""
        cache = smallcache.fresh_cache(self.folder)
        if self.mounted_read(column, spec, cache, 1, (ONE, CPU_ONE), "1 reader cold", keep_cache=True) is None:
            return
        if spec[0] != "bindfs":
            inodes, allocated = smallcache.footprint(cache)
            self.table.add(INODES, column, inodes / len(self.names))
            self.table.add(DISK, column, allocated / 1e6, "{:.1f}")
        offset = smallcache.log_offset(self.bench)

        def requests():
            self.table.add(REQUESTS, column, smallcache.settled_file_requests(self.bench, offset, "/small/"),
                           "{:.0f}")
        if self.mounted_read(column, spec, cache, 1, (AGAIN, CPU_AGAIN), "1 reader after a remount",
                             keep_cache=True, counted=requests) is None:
            return
        self.mounted_read(column, spec, cache, 8, (EIGHT_AGAIN, CPU_EIGHT_AGAIN), "8 readers after a remount")

    def eight_readers(self, column, spec):
        self.mounted_read(column, spec, smallcache.fresh_cache(self.folder), 8, (EIGHT, CPU_EIGHT), "8 readers cold")

    def measure(self, config):
        """`--runs` runs of every measure; the peers other than bindfs in the first only. The machine's load average
        before and after goes in the title: other work on the machine slows every column."""
        args = self.bench.args
        load = os.getloadavg()[0]
        for index in range(args.runs):
            harness.drop_caches()
            self.table.add(ONE, self.curl_columns[0], attempt(["curl", "-s", "--config", config], PEER_TIMEOUT))
            harness.drop_caches()
            self.table.add(EIGHT, self.curl_columns[1],
                           attempt(["curl", "-s", "-Z", "--parallel-max", "8", "--config", config], PEER_TIMEOUT))
            for column, spec in self.bench.in_turn(self.filesystems, index):
                if index > 0 and spec[0] not in ("rangefs", "bindfs"):
                    continue
                self.one_reader(column, spec)
                self.eight_readers(column, spec)
            harness.log(f"  small run {index + 1}, caches on {self.described}: " + ", ".join(
                f"{column} {self.table.text(ONE, column)} / {self.table.text(EIGHT, column)} / "
                f"{self.table.text(AGAIN, column)} / {self.table.text(EIGHT_AGAIN, column)}"
                for column, _ in self.filesystems))
        self.table.title += (f"; load average {load:.1f} before, {os.getloadavg()[0]:.1f} after, on "
                             f"{os.cpu_count()} CPUs")
        self.bench.tables.append(self.table)

    def goals(self):
        """Issue 46's goals for each build, against bindfs and curl measured in the same runs (a table, and rows of
        the report)."""
        value = self.table.value
        goals = Goals(f"small, issue 46's goals, caches on {self.described} (medians of {self.bench.args.runs} runs)")
        curl_one, curl_eight = self.curl_columns
        floor = {}
        for row, curl in ((ONE, curl_one), (EIGHT, curl_eight)):
            bindfs, fetch = value(row, "bindfs"), value(row, curl)
            floor[row] = (bindfs + fetch if bindfs and fetch else None,
                          f"bindfs {bindfs or 0:.2f} + {curl} {fetch or 0:.2f}")
        bytes_bound = self.total + 4 * KiB * len(self.names)
        builds = [column for column, spec in self.filesystems if spec[0] == "rangefs"]
        for build in builds:
            who = f"{build}: " if len(builds) > 1 else ""
            rows = [
                ("1 reader cold ≤ 1.25 × (bindfs + curl, one process)", value(ONE, build), 1.25, *floor[ONE],
                 "{:.2f}"),
                ("8 readers cold ≤ 1.25 × (bindfs, 8 readers + curl -Z)", value(EIGHT, build), 1.25, *floor[EIGHT],
                 "{:.2f}"),
                ("after a remount ≤ 1.25 × bindfs", value(AGAIN, build), 1.25, value(AGAIN, "bindfs"),
                 f"bindfs {value(AGAIN, 'bindfs') or 0:.2f}", "{:.2f}"),
                ("requests for files after a remount = 0", value(REQUESTS, build), 0, None, None, "{:.0f}"),
                ("inodes per cached file ≤ 1.2", value(INODES, build), 1.2, None, None, "{:.2f}"),
                ("disk ≤ the files' bytes + 4 KiB per file", value(DISK, build), 1.0, bytes_bound / 1e6,
                 f"{self.total / 1e6:.1f} + {4 * KiB * len(self.names) / 1e6:.1f} MB", "{:.1f} MB"),
            ]
            for goal, measured, limit, reference, reference_shown, shown in rows:
                held = goals.add(who + goal, measured, limit, reference, shown, reference_shown)
                if held is not None:
                    kind = "requests" if "requests" in goal else "ratio"
                    self.bench.results[f"small, {self.described}: {who}{goal} ({kind})"] = (held, "", 0,
                                                                                            f"<={limit}")
            for column, spec in self.filesystems:
                mine, theirs = value(ONE, build), value(ONE, column)
                if spec[0] == "rclone" and mine and theirs:
                    self.bench.results[f"small, {self.described}: {who}1 reader vs {column} (time ratio)"] = (
                        mine / theirs, "", 0, "<=0.34")
        self.bench.tables.append(goals)


def curl_config(bench, names):
    path = os.path.join(bench.work, "small-urls.conf")
    with open(path, "w") as f:
        for name in names:
            f.write(f'url = "{bench.nginx.url("small/" + name)}"\noutput = "/dev/null"\n')
    return path


def strace_counts(bench, binary, names):
    """System calls of the daemon (all threads) while 1,000 cold small files are read, and after, until its
    commit lands: {syscall: (calls, errors)}."""
    mount = tools.open_mount(bench, ("rangefs", binary, []), bench.nginx.url("small/"), 60)
    counts = {}
    try:
        os.listdir(mount.point)
        output = os.path.join(bench.work, "strace.out")
        tracer = subprocess.Popen(["strace", "-c", "-f", "-o", output, "-p", str(mount.process.pid)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        tasks = f"/proc/{mount.process.pid}/task"
        deadline = time.time() + 30
        while time.time() < deadline:  # every thread traced before the first read
            traced = []
            for task in os.listdir(tasks):
                with open(f"{tasks}/{task}/status") as f:
                    traced.append(any(line.startswith("TracerPid:") and line.split()[1] != "0" for line in f))
            if all(traced):
                break
            time.sleep(0.05)
        subprocess.run(["cat", *[mount.path(n) for n in names]], stdout=subprocess.DEVNULL, timeout=600)
        time.sleep(3)  # the group commit of what was read
        tracer.send_signal(signal.SIGINT)
        tracer.wait(timeout=60)
        with open(output) as f:
            for line in f:
                fields = line.split()
                if len(fields) in (5, 6) and fields[-1].isidentifier() and fields[3].isdigit():
                    counts[fields[-1]] = (int(fields[3]), int(fields[4]) if len(fields) == 6 else 0)
    finally:
        tools.close(mount)
    return counts




def run(bench):
    """Many small files on loopback: cold, 8 readers and after a remount, against bindfs, curl and the peers, caches
    on an ext4 image and on /; strace of the daemon."""
    args = bench.args
    names, expected, total = make_files(bench, args.small_files)
    names_file = os.path.join(bench.work, "small-names.txt")
    with open(names_file, "w") as f:
        f.write("".join(name + "\n" for name in names))
    config = curl_config(bench, names)
    filesystems = tools.filesystems(bench, long_link=False, local=True)
    curl_columns = ["curl, one process", "curl -Z --parallel-max 8"]
    for where in ("image", "work") if args.small_caches == "both" else (args.small_caches,):
        try:
            with smallcache.cache_location(bench, where) as (folder, described):
                small = Pass(bench, folder, described, (names, expected, total, names_file), filesystems,
                             curl_columns)
                small.measure(config)
                small.goals()
        except smallcache.NoImage as error:
            harness.log(f"  small: {error}")
            bench.checks.append((f"small: {error}", False))
    if args.smoke or not shutil.which("strace"):
        return
    builds = [column for column, spec in filesystems if spec[0] == "rangefs"]
    traced = Table(f"small: the daemon's system calls over {min(1000, len(names))} cold small files "
                   "(strace -c -f, one run)", builds, baseline=args.baseline_label if args.baseline else None)
    sample = names[:1000]
    for column, spec in filesystems:
        if spec[0] != "rangefs":
            continue
        counts = strace_counts(bench, spec[1], sample)
        flushes = sum(counts.get(name, (0, 0))[0] for name in FLUSHES)
        traced.add("fsync + fdatasync + syncfs + sync_file_range per file", column, flushes / len(sample))
        for name in ("fsync", "fdatasync", "rename", "ftruncate"):
            traced.add(f"  {name} per file", column, counts.get(name, (0, 0))[0] / len(sample))
        for name in ("mkdir", "unlink", "openat", "access"):
            traced.add(f"failing {name} calls", column, counts.get(name, (0, 0))[1], "{:.0f}")
        harness.log(f"  strace {column}: {flushes} flushes for {len(sample)} files; failing mkdir "
                    f"{counts.get('mkdir', (0, 0))[1]}, unlink {counts.get('unlink', (0, 0))[1]}")
        if column == builds[0]:
            bench.results["small: flushes per cold file (strace)"] = (flushes / len(sample), "", 0, "<=0.2")
            bench.results["small: failing mkdir + unlink (strace)"] = (
                counts.get("mkdir", (0, 0))[1] + counts.get("unlink", (0, 0))[1], "", 0, "<=0")
    bench.tables.append(traced)
