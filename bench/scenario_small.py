"""The `small` scenario: many small files on loopback (issue 36).

3,000 files of 1-64 KB (seeded random sizes and bytes) in one directory, listed by nginx's HTML autoindex. Each
filesystem is mounted fresh and cold, the directory listed (not timed: every tool needs the names first), and then
timed: one `cat` of every file in listing order, and 8 `cat`s in parallel over the list split in 8. The references
are curl fetching the same URLs one after another in one process (a --config file, `-o` each), and
`curl -Z --parallel-max 8`. The daemon's CPU seconds are measured beside each read.

A separate run, not timed, counts the daemon's system calls with `strace -c -f -p` over 1,000 cold small files:
flushes (fsync, fdatasync, syncfs, sync_file_range) per file, and the mkdir and unlink calls that failed.

Builds and curl get `--runs` runs (medians); the peers one run each, with a deadline.
"""
import hashlib, os, random, signal, subprocess, time

import bench as b
import tools
from tables import Table, attempt

PEER_TIMEOUT = 60
FLUSHES = ("fsync", "fdatasync", "syncfs", "sync_file_range")


def make_files(bench, count):
    """www/small/: `count` files of 1,000-64,000 bytes; returns (names in listing order, sha256 of them in order)."""
    folder = os.path.join(bench.www, "small")
    os.makedirs(folder, exist_ok=True)
    generator = random.Random(36)
    names, digest = [], hashlib.sha256()
    for index in range(count):
        name = f"s{index:05d}.bin"
        data = generator.randbytes(generator.randint(1000, 64000))
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
        digest.update(data)
        names.append(name)
    return names, digest.hexdigest()


def contents_digest(paths):
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


def readers(paths, count, timeout):
    """Seconds for `count` cats in parallel over `paths` split in `count` runs of the list, or None past
    `timeout`."""
    share = -(-len(paths) // count)
    start = time.perf_counter()
    processes = [subprocess.Popen(["cat", *paths[i * share:(i + 1) * share]], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for i in range(count)]
    deadline = start + timeout
    ok = True
    for process in processes:
        try:
            ok &= process.wait(timeout=max(0.1, deadline - time.perf_counter())) == 0
        except subprocess.TimeoutExpired:
            ok = False
    seconds = time.perf_counter() - start
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()
    return seconds if ok else None


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
    args = bench.args
    names, expected = make_files(bench, args.small_files)
    url = bench.nginx.url("small/")
    filesystems = tools.filesystems(bench, long_link=False)
    curl_columns = ["curl, one process", "curl -Z --parallel-max 8"]
    builds = [column for column, spec in filesystems if spec[0] == "rangefs"]
    caches = b.describe_filesystem(args.cache_root or bench.work)
    table = Table(f"small: {len(names)} files of 1-64 KB, loopback nginx, caches on {caches} (seconds, medians of "
                  f"{args.runs} runs for the builds and curl, one run for the peers)",
                  [column for column, _ in filesystems] + curl_columns,
                  baseline=args.baseline_label if args.baseline else None, timeout=PEER_TIMEOUT)
    one, eight, cpu_one, cpu_eight = ("1 reader, in listing order", "8 readers in parallel", "  daemon CPU s, 1 reader",
                                      "  daemon CPU s, 8 readers")
    config = curl_config(bench, names)
    for index in range(args.runs):
        b.drop_caches()
        table.add(one, curl_columns[0], attempt(["curl", "-s", "--config", config], PEER_TIMEOUT))
        table.add(eight, curl_columns[1], attempt(["curl", "-s", "-Z", "--parallel-max", "8", "--config", config],
                                                  PEER_TIMEOUT))
        for column, spec in filesystems:
            if index > 0 and spec[0] != "rangefs":
                continue
            for row, cpu_row, count in ((one, cpu_one, 1), (eight, cpu_eight, 8)):
                mount = tools.open_mount(bench, spec, url, PEER_TIMEOUT)
                if mount is None:
                    table.add(row, column, None)
                    continue
                paths = [os.path.join(mount.point, n) for n in sorted(os.listdir(mount.point))]
                b.drop_caches()
                before = b.process_cpu([mount.process.pid])
                seconds = readers(paths, count, PEER_TIMEOUT if spec[0] != "rangefs" else 600)
                table.add(row, column, seconds)
                table.add(cpu_row, column, b.process_cpu([mount.process.pid]) - before)
                if seconds is not None:
                    right = [os.path.basename(p) for p in paths] == names and contents_digest(paths) == expected
                    if spec[0] == "rangefs":
                        bench.checks.append((f"small: {column}, {count} reader(s): every file listed and right",
                                             right))
                    elif not right:
                        b.log(f"  small: {column} showed wrong or missing files")
                tools.close(mount, stuck=seconds is None)
        b.log(f"  small run {index + 1}: " + ", ".join(
            f"{column} {table.text(one, column)} / {table.text(eight, column)}" for column, _ in filesystems))
    bench.tables.append(table)
    # The ratios issue 36 sets as goals, for this build.
    ours = builds[0]
    for label, row, reference, goal in (("small: 1 reader vs curl", one, curl_columns[0], "<=1.25"),
                                        ("small: 8 readers vs curl -Z", eight, curl_columns[1], "<=1.25")):
        mine, theirs = table.value(row, ours), table.value(row, reference)
        if mine and theirs:
            bench.results[label + " (time ratio)"] = (mine / theirs, "", 0, goal)
    rclones = [column for column, spec in filesystems if spec[0] == "rclone"]
    for column in rclones:
        mine, theirs = table.value(one, ours), table.value(one, column)
        if mine and theirs:
            bench.results[f"small: 1 reader vs {column} (time ratio)"] = (mine / theirs, "", 0, "<=0.34")
    if args.smoke or not b.shutil.which("strace"):
        return
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
        for name in ("mkdir", "unlink", "openat"):
            traced.add(f"failing {name} calls", column, counts.get(name, (0, 0))[1], "{:.0f}")
        b.log(f"  strace {column}: {flushes} flushes for {len(sample)} files; failing mkdir "
              f"{counts.get('mkdir', (0, 0))[1]}, unlink {counts.get('unlink', (0, 0))[1]}")
        if column == ours:
            bench.results["small: flushes per cold file (strace)"] = (flushes / len(sample), "", 0, "<=0.2")
            bench.results["small: failing mkdir + unlink (strace)"] = (
                counts.get("mkdir", (0, 0))[1] + counts.get("unlink", (0, 0))[1], "", 0, "<=0")
    bench.tables.append(traced)
