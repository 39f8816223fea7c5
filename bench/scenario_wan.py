"""The `wan` scenario: the same origin far away (issue 36), through capproxy's latency emulator.

Two profiles: 40 ms round trip, 4 MiB/s per connection, 25 MiB/s in all; and 150 ms, 2 MiB/s, 12 MiB/s. For each,
every filesystem is mounted fresh and cold for every measure (the mount's own listing is not timed):
- cold `cp` of 256 MiB, as a ratio to the link's total cap (aria2c -x8 -s8 and curl as references);
- `stat` then a 1-byte read of a listed file, and then of a second file of the same directory, in round trips;
- `ls -lR` of 1,000 files in 20 directories, in round trips;
- `cp -r` of 500 files of 4-64 KiB (curl fetching the same URLs one by one in one process beside it);
- 100 random 4 KiB reads of the big file (curl: the same ranges one by one in one process);
- ffprobe of a movie, then a seek into its middle (ffmpeg -ss, one frame).
The emulator itself is checked first (bench/linkcheck.py). Every run has a deadline (45 s) and counts as "did not
finish" past it. The origin's log gives what each measure cost in requests, connections and bytes (nginx's
$connection and $bytes_sent). Builds and aria2c get `--runs` runs (medians); the other peers one run each.
"""
import json, os, random, shutil, socket, subprocess, sys, time

import harness
import linkcheck, tools
from tables import Table, attempt

TIMEOUT = 45
HERE = os.path.dirname(os.path.abspath(__file__))


def write_random(path, size, seed):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = random.Random(seed).randbytes(size)
    with open(path, "wb") as f:
        f.write(data)


def make_files(bench):
    """www/wan/: big/ (one big file), first/ (two files of a few MiB), tree/ (20 directories of 50 small files),
    small/ (500 files of 4-64 KiB) and, unless smoke, movie/ (an MP4 with its index at the end)."""
    a, root = bench.args, os.path.join(bench.www, "wan")
    os.makedirs(os.path.join(root, "big"), exist_ok=True)
    harness.make_file(os.path.join(root, "big", "big.bin"), a.wan_big, 3601)
    for index, name in enumerate(("a.bin", "b.bin")):
        write_random(os.path.join(root, "first", name), a.wan_first, 3602 + index)
    generator = random.Random(3604)
    directories, per_directory = a.wan_tree
    for d in range(directories):
        for f in range(per_directory):
            write_random(os.path.join(root, "tree", f"d{d:02d}", f"f{f:03d}.txt"), generator.randint(100, 4000),
                         d * 1000 + f)
    for index in range(a.wan_small):
        write_random(os.path.join(root, "small", f"p{index:04d}.bin"), generator.randint(4096, 65536), 50_000 + index)
    if a.smoke:
        return
    # The scan scenario's movie, shorter: 10 s of encoded video looped 4 times (about 56 MiB), moov at the end.
    short = os.path.join(bench.work, "wan-short.mp4")
    os.makedirs(os.path.join(root, "movie"), exist_ok=True)
    harness.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=25", "-f", "lavfi",
                 "-i", "sine=frequency=440:sample_rate=44100", "-t", "10", "-c:v", "mpeg4", "-q:v", "2", "-c:a", "aac",
                 short])
    harness.run(["ffmpeg", "-v", "error", "-y", "-stream_loop", "3", "-i", short, "-c", "copy",
                 os.path.join(root, "movie", "movie.mp4")])


def traffic(bench, prefix):
    """(requests, connections, MiB with headers) the origin logged for paths under `prefix` since the log was
    cleared."""
    requests, connections, sent = 0, set(), 0
    with open(bench.nginx.access_log) as f:
        for line in f:
            fields = line.rstrip("\n").split("|")
            if len(fields) >= 9 and fields[4].startswith(prefix):
                requests += 1
                connections.add(fields[5])
                sent += int(fields[7])
    return requests, len(connections), sent / harness.MiB


def same_tree(copy, original):
    for folder, _, files in os.walk(original):
        for name in files:
            path = os.path.join(folder, name)
            other = os.path.join(copy, os.path.relpath(path, original))
            if not os.path.exists(other) or harness.sha256(other) != harness.sha256(path):
                return False
    return True


class Profile:
    """One link: a capproxy in front of the direct origin, and the tables its measures fill."""

    def __init__(self, bench, rtt_ms, rate, total):
        self.bench, self.rtt, self.rate, self.total = bench, rtt_ms / 1000, rate, total
        self.port = harness.free_port()
        self.proxy = subprocess.Popen([sys.executable, os.path.join(HERE, "capproxy.py"), str(self.port),
                                       str(bench.nginx.direct), str(rate), "--rtt", str(rtt_ms), "--total",
                                       str(total)])
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        name = f"{rtt_ms} ms, {rate // harness.MiB} MiB/s per connection, {total // harness.MiB} MiB/s in all"
        self.name = name
        baseline = bench.args.baseline_label if bench.args.baseline else None
        self.filesystems = tools.filesystems(bench, long_link=True)
        columns = [column for column, _ in self.filesystems] + ["aria2c -x8 -s8", "curl, one process"]
        self.times = Table(f"wan, {name} (medians of {bench.args.runs} runs for the builds and aria2c, one run for "
                           f"the others; deadline {TIMEOUT} s)", columns, baseline, TIMEOUT)
        self.traffic = Table(f"wan, {name}: what each measure cost the origin (requests / connections / MiB, from "
                             "nginx's log; last run)", columns, baseline, TIMEOUT)
        a = bench.args
        self.rows = {"big": f"cold cp {a.wan_big // harness.MiB} MiB, ratio to the total cap",
                     "first": "stat + 1st byte of a listed file",
                     "second": "  then of a second file, same directory",
                     "tree": f"ls -lR, {a.wan_tree[0] * a.wan_tree[1]} files in {a.wan_tree[0]} directories",
                     "small": f"cp -r, {a.wan_small} files of 4-64 KiB",
                     "random": f"{a.wan_reads} random 4 KiB reads, per read",
                     "probe": "ffprobe of a 56 MiB movie",
                     "seek": "  then a seek to its middle (one frame)"}
        self.prefixes = {self.rows[key]: folder for key, folder in (
            ("big", "big/"), ("first", "first/"), ("tree", "tree/"), ("small", "small/"), ("random", "big/"),
            ("probe", "movie/"))}
        for row in self.rows.values():  # the tables show the rows in this order
            self.times.rows[row], self.traffic.rows[row] = {}, {}

    def url(self, path):
        return f"http://127.0.0.1:{self.port}/wan/{path}"

    def record(self, row, column, value, fmt, cost=True):
        self.times.add(row, column, value, fmt)
        if cost:
            if value is None:
                # nginx logs a request when it ends: one cut at the deadline ends once the close has crossed the
                # emulated link and nginx noticed. Without this wait it lands in the next measure's count.
                time.sleep(1 + 2 * self.rtt)
            requests, connections, mib = traffic(self.bench, "/wan/" + self.prefixes[row])
            self.traffic.rows.setdefault(row, {})[column] = ([1], lambda _: f"{requests} / {connections} / {mib:.1f}")

    def in_rtts(self, seconds):
        return seconds / self.rtt

    def stop(self):
        self.proxy.terminate()
        self.proxy.wait(timeout=10)


def measure_mount(bench, profile, column, spec, runs):
    """Every measure of one filesystem on `profile`, each on a fresh cold mount."""
    a, www = bench.args, os.path.join(bench.www, "wan")
    rtt = lambda seconds: f"{seconds / profile.rtt:.1f} RTT ({seconds * 1000:.0f} ms)"
    is_build = spec[0] == "rangefs"

    def mounted(path, measure):
        mount = tools.open_mount(bench, spec, profile.url(path), TIMEOUT)
        if mount is None:
            return None, True
        bench.nginx.clear_log()
        harness.drop_caches()
        before = harness.process_cpu([mount.process.pid])
        value, stuck = measure(mount)
        bench.cpu.setdefault((profile.name, column), 0)
        bench.cpu[(profile.name, column)] += harness.process_cpu([mount.process.pid]) - before
        tools.close(mount, stuck=stuck)
        return value, stuck

    for _ in range(runs):
        # Cold cp of the big file.
        dest = os.path.join(bench.work, "wan-big.out")

        def big(mount):
            seconds = attempt(["cp", os.path.join(mount.point, "big.bin"), dest], TIMEOUT)
            if seconds is not None and is_build:
                bench.checks.append((f"wan {profile.name}: {column} cp of big.bin right",
                                     harness.sha256(dest) == harness.sha256(os.path.join(www, "big", "big.bin"))))
            return seconds, seconds is None
        seconds, _ = mounted("big/", big)
        ratio = None if seconds is None else a.wan_big / seconds / profile.total
        profile.record(profile.rows["big"], column, ratio,
                       lambda r: f"{r:.2f}× ({r * profile.total / harness.MiB:.1f} MiB/s)")
        if os.path.exists(dest):
            os.remove(dest)

        # stat then read 1 byte of a listed file, then of a second file of the same directory.
        def first(mount):
            command = [sys.executable, os.path.join(HERE, "readops.py"), "first",
                       os.path.join(mount.point, "a.bin"), os.path.join(mount.point, "b.bin")]
            try:
                out = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, check=True).stdout
                return json.loads(out), False
            except (subprocess.TimeoutExpired, subprocess.CalledProcessError):
                return None, True
        times, _ = mounted("first/", first)
        profile.record(profile.rows["first"], column, times and times["a"], rtt)
        profile.record(profile.rows["second"], column, times and times["b"], rtt, cost=False)

        # ls -lR of the tree.
        def walk(mount):
            start = time.perf_counter()
            try:
                listed = subprocess.run(["ls", "-lR", mount.point], capture_output=True, text=True, timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                return None, True
            seconds = time.perf_counter() - start
            shown = sum(1 for line in listed.stdout.splitlines() if line.startswith("-"))
            expected = a.wan_tree[0] * a.wan_tree[1]
            if is_build:
                bench.checks.append((f"wan {profile.name}: {column} ls -lR shows all {expected} files",
                                     shown == expected))
            return (seconds if shown == expected or not is_build else None), False
        seconds, _ = mounted("tree/", walk)
        profile.record(profile.rows["tree"], column, seconds, rtt)

        # cp -r of the small files.
        copy = os.path.join(bench.work, "wan-small.out")

        def copy_tree(mount):
            seconds = attempt(["cp", "-r", mount.point, copy], TIMEOUT)
            if seconds is not None and is_build:
                bench.checks.append((f"wan {profile.name}: {column} cp -r right",
                                     same_tree(copy, os.path.join(www, "small"))))
            return seconds, seconds is None
        seconds, _ = mounted("small/", copy_tree)
        profile.record(profile.rows["small"], column, seconds, "{:.2f} s")
        shutil.rmtree(copy, ignore_errors=True)

        # Random 4 KiB reads of the big file.
        def reads(mount):
            command = [sys.executable, os.path.join(HERE, "readops.py"), "random",
                       os.path.join(mount.point, "big.bin"), os.path.join(www, "big", "big.bin"), str(a.wan_reads),
                       "7"]
            try:
                out = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, check=True).stdout
            except (subprocess.TimeoutExpired, subprocess.CalledProcessError):
                return None, True
            result = json.loads(out)
            if is_build:
                bench.checks.append((f"wan {profile.name}: {column} random reads right", result["wrong"] == 0))
            return sum(result["times"]), False
        seconds, _ = mounted("big/", reads)
        profile.record(profile.rows["random"], column,
                       None if seconds is None else seconds / a.wan_reads, rtt)

        # ffprobe, then a seek into the middle.
        if not a.smoke:
            def movie(mount):
                path = os.path.join(mount.point, "movie.mp4")
                start = time.perf_counter()
                try:
                    probe = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=codec_name", "-of",
                                            "csv=p=0", path], capture_output=True, text=True, timeout=TIMEOUT)
                    probed = time.perf_counter() - start
                    subprocess.run(["ffmpeg", "-v", "error", "-ss", "20", "-i", path, "-frames:v", "1", "-f", "null",
                                    "-"], capture_output=True, timeout=max(1, TIMEOUT - probed), check=True)
                except (subprocess.TimeoutExpired, subprocess.CalledProcessError):
                    return None, True
                if is_build:
                    bench.checks.append((f"wan {profile.name}: {column} ffprobe", "mpeg4" in probe.stdout))
                return (probed, time.perf_counter() - start - probed), False
            times, _ = mounted("movie/", movie)
            profile.record(profile.rows["probe"], column, times and times[0], rtt)
            profile.record(profile.rows["seek"], column, times and times[1], rtt, cost=False)


def measure_references(bench, profile, runs):
    """aria2c and curl: the big file (aria2c `runs` times), and curl's small files and ranges one by one."""
    a, www = bench.args, os.path.join(bench.www, "wan")
    dest = os.path.join(bench.work, "wan-ref.out")
    ratio = lambda seconds: None if seconds is None else a.wan_big / seconds / profile.total
    fmt = lambda r: f"{r:.2f}× ({r * profile.total / harness.MiB:.1f} MiB/s)"
    row = profile.rows["big"]
    for _ in range(runs):
        bench.nginx.clear_log()
        seconds = attempt(["aria2c", "-q", "-x8", "-s8", "-k1M", "--allow-overwrite=true",
                           "--auto-file-renaming=false", "-d", bench.work, "-o", os.path.basename(dest),
                           profile.url("big/big.bin")], TIMEOUT)
        profile.record(row, "aria2c -x8 -s8", ratio(seconds), fmt)
    bench.nginx.clear_log()
    profile.record(row, "curl, one process", ratio(attempt(["curl", "-s", "-o", dest, profile.url("big/big.bin")],
                                                           TIMEOUT)), fmt)
    if os.path.exists(dest):
        os.remove(dest)
    config = os.path.join(bench.work, "wan-curl.conf")
    names = sorted(os.listdir(os.path.join(www, "small")))
    with open(config, "w") as f:
        for name in names:
            f.write(f'url = "{profile.url("small/" + name)}"\noutput = "/dev/null"\n')
    bench.nginx.clear_log()
    profile.record(profile.rows["small"], "curl, one process",
                   attempt(["curl", "-s", "--config", config], TIMEOUT), "{:.2f} s")
    generator = random.Random(7)
    offsets = [generator.randrange(0, a.wan_big // 4096) * 4096 for _ in range(a.wan_reads)]
    with open(config, "w") as f:
        for index, offset in enumerate(offsets):
            f.write(("next\n" if index else "") + f'url = "{profile.url("big/big.bin")}"\n'
                    f'range = "{offset}-{offset + 4095}"\noutput = "/dev/null"\n')
    bench.nginx.clear_log()
    seconds = attempt(["curl", "-s", "--config", config], TIMEOUT)
    profile.record(profile.rows["random"], "curl, one process",
                   None if seconds is None else seconds / a.wan_reads,
                   lambda s: f"{s / profile.rtt:.1f} RTT ({s * 1000:.0f} ms)")


def run(bench):
    """Far away (40 ms and 150 ms round trips through capproxy): big and small files, listings, first bytes."""
    make_files(bench)
    bench.cpu = {}
    for rtt_ms, rate, total in bench.args.wan_profiles:
        profile = Profile(bench, rtt_ms, rate, total)
        try:
            # The emulator first: a proxy without its delay or caps would make every figure below meaningless.
            bench.checks += linkcheck.check(profile.port, "/wan/big/big.bin", bench.args.wan_big, profile.rtt, rate,
                                            total)
            measure_references(bench, profile, bench.args.runs)
            # Run by run, the builds in turn (Bench.in_turn); the peers once, in the first run.
            for run in range(bench.args.runs):
                for column, spec in bench.in_turn(profile.filesystems, run):
                    if run == 0 or spec[0] == "rangefs":
                        measure_mount(bench, profile, column, spec, 1)
                        harness.log(f"  wan {profile.name}: {column} run {run + 1} done")
        finally:
            profile.stop()
        bench.tables += [profile.times, profile.traffic]
        # The daemons' CPU seconds over all of a run's measures (a build's: the mean of its runs), which the tables
        # leave out: a far origin's times hide what a build costs the machine.
        for column, spec in profile.filesystems:
            seconds = bench.cpu.get((profile.name, column))
            if seconds is not None:
                per_run = seconds / (bench.args.runs if spec[0] == "rangefs" else 1)
                harness.log(f"  wan {profile.name}: {column} daemon CPU s per run, all measures: {per_run:.2f}")
        ours = profile.filesystems[0][0]
        short = f"wan {rtt_ms} ms"
        value = profile.times.value
        rows = profile.rows
        goals = [(rows["big"], "cold cp, ratio to the cap", ">=0.9"), (rows["first"], "first byte, RTT", "<=1.5"),
                 (rows["second"], "first byte of a 2nd file, RTT", "<=1.5"), (rows["tree"], "ls -lR, RTT", "<=5"),
                 (rows["small"], f"cp -r {bench.args.wan_small} small files, s", "<=3" if rtt_ms <= 40 else "<=8")]
        for row, label, goal in goals:
            measured = value(row, ours)
            if measured is None:
                bench.results[f"{short}: {label}"] = (float("inf"), "", 0, goal if goal.startswith("<=") else None)
                continue
            if "RTT" in label:
                measured /= profile.rtt
            if goal.startswith(">="):
                bench.results[f"{short}: {label}"] = (measured, "", 0, None)
            else:
                bench.results[f"{short}: {label}"] = (measured, "", 0, goal)
