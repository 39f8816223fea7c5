"""The `library` scenario (library scale): mount and `ls -l` of a 100,000-file directory listed as nginx JSON and
HTML, and of a page of links without sizes; the requests it took, the daemon's memory per entry, and whether the
time per entry stays flat from 5,000 to 50,000 entries; httpdirfs and rclone beside. It takes the run's `Bench`
(bench.py) and adds its rows to its results.
"""
import os, shutil, statistics, subprocess, time

import harness, mounts


def make_library(bench):
    """Folders of small files for the library scenario: each is listed by nginx as HTML (its autoindex) and as
    JSON (under /json/); `nosize` holds a plain page of links without sizes or dates, as many servers write."""
    counts = bench.args.library
    root = os.path.join(bench.www, "library")
    bench.library_folders = {}
    for count in sorted(set(counts.values())):
        folder = os.path.join(root, f"f{count}")
        os.makedirs(folder, exist_ok=True)
        for index in range(count):
            with open(os.path.join(folder, f"f{index:07d}.bin"), "wb") as f:
                f.write(b"x" * (index % 1000))
        bench.library_folders[count] = folder
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


def idle_memory(bench, kind):
    """The RSS of a rangefs daemon that mounted a one-file directory: the baseline a listing's memory is
    measured against (rangefs lists a directory URL at mount, so its own mount is no idle baseline)."""
    cached = getattr(bench, "_idle_memory", {})
    if kind not in cached:
        cache = bench.fresh_cache()
        mount = mounts.Mount(kind, bench.work, [bench.nginx.url("library/tiny/")], cache)
        subprocess.run(["ls", "-l", mount.point], capture_output=True, timeout=60)
        cached[kind] = harness.memory(mount.process.pid)
        mount.close()
        shutil.rmtree(cache, ignore_errors=True)
        bench._idle_memory = cached
    return cached[kind]


def library_requests(bench, prefix):
    """Requests the origin logged for paths under `prefix` since the log was last cleared."""
    with open(bench.nginx.access_log) as f:
        return sum(1 for line in f if line.rstrip("\n").split("|")[4].startswith(prefix))


def list_directory(bench, label, kind, url, prefix, expected, timeout):
    """One mount of `url` by `kind` (a rangefs build or a peer): the time from the mount's start to the end of
    the first `ls -l` (httpdirfs lists at mount), the second `ls -l`, the requests the first sent, the names it
    showed with their sizes, and the daemon's memory growth per entry. Times are None past `timeout`."""
    idle = idle_memory(bench, kind) if kind not in ("httpdirfs", "rclone") else 0
    cache = bench.fresh_cache()
    bench.nginx.clear_log()
    start = time.perf_counter()
    try:
        if kind in ("httpdirfs", "rclone"):
            mount = mounts.ListingPeer(kind, bench.work, url, cache, timeout=timeout)
        else:
            mount = mounts.Mount(kind, bench.work, [url], cache)
    except TimeoutError as error:
        harness.log(f"  {label}: {error}")
        shutil.rmtree(cache, ignore_errors=True)
        return {"first": None, "listing": None, "second": None, "shown": {},
                "requests": library_requests(bench, prefix), "bytes_per_entry": None}
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
        requests = library_requests(bench, prefix)
        grown = harness.memory(pid) - idle
        start = time.perf_counter()
        subprocess.run(["ls", "-l", point], capture_output=True, timeout=timeout)
        second = time.perf_counter() - start
    except subprocess.TimeoutExpired:
        harness.log(f"  {label}: ls -l did not finish within {timeout} s")
        first, second, shown = None, None, {}
        requests, grown = library_requests(bench, prefix), harness.memory(pid) - idle
        listing = None
    mount.close()
    shutil.rmtree(cache, ignore_errors=True)
    return {"first": first, "listing": listing, "second": second, "shown": shown, "requests": requests,
            "bytes_per_entry": grown / max(1, expected)}


def library(bench):
    """Library scale: mount and first `ls -l`, and a second `ls -l`, of a 100,000-file directory listed as nginx JSON and HTML,
    and of a 5,000-file page without sizes; requests, daemon memory per entry, and time per entry at 5,000
    against 50,000 entries; against httpdirfs and rclone in the same run."""
    make_library(bench)
    counts, runs = bench.args.library, bench.args.runs
    big, small, middle = counts["big"], counts["small"], counts["middle"]
    directories = [("JSON", f"json/f{big}/", big), ("HTML", f"library/f{big}/", big),
                   ("no sizes", "library/nosize/", counts["nosize"])]
    peers = [] if bench.args.smoke else ["httpdirfs", "rclone"]
    for title, path, count in directories:
        url = bench.nginx.url(path)
        measured = {}
        # Run by run, the builds in turn (Bench.in_turn); the peers get one run, in the first: minutes each.
        for run in range(runs):
            for label, kind in bench.in_turn(bench.builds() + [(peer, peer) for peer in peers], run):
                # httpdirfs reads no JSON (it shows an empty directory).
                if (kind in peers and run > 0) or (kind == "httpdirfs" and title == "JSON"):
                    continue
                measured.setdefault(label, []).append(list_directory(bench, label, kind, url, "/" + path, count,
                                                                     timeout=600 if kind in peers else 300))
        ours = measured["rangefs"]
        for run_ in ours:
            prefix = "n" if title == "no sizes" else "f"
            expected = {f"{prefix}{index:07d}.bin": index % 1000 for index in range(count)}
            bench.checks.append((f"library {title}: ls -l shows all {count} files with their sizes",
                                run_["shown"] == expected))
        def median(runs_, key):
            values = [r[key] for r in runs_ if r[key] is not None]
            return statistics.median(values) if values else float("inf")
        # A peer's memory is its whole RSS (it lists at mount): bytes per entry of the listing it holds.
        big_goal = count >= 100_000
        bench.results[f"library {title} {count}: first ls -l seconds"] = (median(ours, "first"), "", 0,
                                                                         "<=5" if big_goal else None)
        bench.results[f"  {title}: second ls -l seconds"] = (median(ours, "second"), "", 0,
                                                            "<=1.5" if big_goal else None)
        bench.results[f"  {title}: requests"] = (median(ours, "requests"), "", 0,
                                                "<=1" if title != "no sizes" else f"<={count + 1}")
        bench.results[f"  {title}: RSS bytes per entry"] = (median(ours, "bytes_per_entry"), "", 0, "<=1024")
        for label, values in measured.items():
            if label == "rangefs":
                continue
            bench.results[f"  {title}: {label} first ls -l seconds"] = (median(values, "first"), "", 0, None)
            bench.results[f"  {title}: {label} requests"] = (median(values, "requests"), "", 0, None)
            bench.results[f"  {title}: {label} names shown"] = (len(values[0]["shown"]), "", 0, None)
            bench.results[f"  {title}: {label} RSS bytes per entry"] = (median(values, "bytes_per_entry"), "", 0,
                                                                       None)
    # Linear: time per entry of the `ls -l` alone at `middle` entries against `small` (HTML, exact sizes).
    per_entry = {}
    for count in (small, middle):
        path = f"library/f{count}/"
        runs_ = [list_directory(bench, "rangefs", bench.binary, bench.nginx.url(path), "/" + path, count, 300)
                 for _ in range(runs)]
        per_entry[count] = statistics.median(r["listing"] for r in runs_) / count
    ratio = per_entry[middle] / per_entry[small]
    bench.results[f"library: ls -l seconds per entry, {middle} / {small}"] = (ratio, "", 0, "<=1.5")
