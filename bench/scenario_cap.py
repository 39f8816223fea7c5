"""The `cap` scenario (issue 46, acceptance 7): many small files read once under `--cache-max-size 200M`.

100,000 files of 4-12 KB (seeded sizes and bytes; 8 KB on average, about 800 MB: four times the cap) in 100 folders
of 1,000 that nginx lists with its HTML autoindex, on 127.0.0.1. One fresh mount, default options but the cap
(`--cache-max-size 200M`); every folder listed first (not measured: what a listing costs in memory is acceptance
4's, in the library scenario), then one reader, `xargs cat` of every file in listing order with the sha256 of all
their bytes checked, in two halves. Meanwhile a sampler reads the daemon's /proc/PID/status and counts the lines of
/proc/PID/maps and the entries of /proc/PID/fd every 0.2 s.

Reported: the read's wall time; the daemon's peak RSS (VmHWM) and its RSS after the listing, at half-way and at
the end; its peak mapping and descriptor counts, and both at half-way and at the end; all three again 40 s after
the read (entries idle for 30 s are released); the cached data at the end as the mount states it
(`user.rangefs.cached_bytes`, summed) and the cache folder's inodes and allocated bytes (`du`'s way,
smallcache.footprint) at the end and after the unmount. The goals: the cached data stays under the cap, and from
half-way (the cap passed twice over) to the end neither the RSS nor the mapping count grows with the files read.
`--cap-files N` measures another count (e.g. 30,000 where 100,000 take too long to set up).
"""
import hashlib, os, random, shutil, subprocess, threading, time

import harness, mounts
import smallcache
from tables import Goals, Table

MiB = 1 << 20
SIZES = (4096, 12288)  # bytes: 8 KiB on average
PER_FOLDER = 1000
CAP = "200M"
# From half-way to the end: what "does not grow with the files read" allows per file read.
RSS_PER_FILE, MAPS_PER_FILE = 100, 0.01
IDLE_WAIT = 40  # seconds: past the daemon's 30 s idle time, plus a group commit


def make_files(bench, count):
    """www/cap/dNNN/cNNNNNN.bin: `count` files of 4-12 KB, PER_FOLDER a folder. Returns (paths relative to
    www/cap in listing order, the sha256 of all the bytes of the first half of them and of the second, in that
    order, their total size)."""
    generator = random.Random(46)
    paths, digests, total = [], [hashlib.sha256(), hashlib.sha256()], 0
    for index in range(count):
        folder = f"d{index // PER_FOLDER:03d}"
        if index % PER_FOLDER == 0:
            os.makedirs(os.path.join(bench.www, "cap", folder), exist_ok=True)
        path = f"{folder}/c{index:06d}.bin"
        data = generator.randbytes(generator.randint(*SIZES))
        with open(os.path.join(bench.www, "cap", path), "wb") as f:
            f.write(data)
        digests[0 if index < count // 2 else 1].update(data)
        paths.append(path)
        total += len(data)
    return paths, [digest.hexdigest() for digest in digests], total


class Sampler(threading.Thread):
    """Samples a process's RSS, mapping count and descriptor count every `interval` seconds until `stop`, keeping
    the peaks; `now()` takes a sample at once."""

    def __init__(self, pid, interval=0.2):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak_maps = self.peak_fds = 0
        self.done = threading.Event()

    def now(self):
        """(RSS bytes, mappings, descriptors) now, or zeros once the process is gone."""
        try:
            with open(f"/proc/{self.pid}/maps", "rb") as f:
                maps = f.read().count(b"\n")
            fds = len(os.listdir(f"/proc/{self.pid}/fd"))
            rss = harness.memory(self.pid)
        except OSError:
            return 0, 0, 0
        self.peak_maps, self.peak_fds = max(self.peak_maps, maps), max(self.peak_fds, fds)
        return rss, maps, fds

    def run(self):
        while not self.done.wait(self.interval):
            self.now()

    def stop(self):
        self.done.set()
        self.join()


def read_half(point, names_file):
    """Seconds `xargs cat` of the files named in `names_file` takes in `point`, and the sha256 of what it read
    (None if a cat failed)."""
    start = time.perf_counter()
    done = subprocess.run(["bash", "-c", "set -o pipefail; xargs -d '\\n' -a \"$1\" cat | sha256sum", "bash",
                           names_file], cwd=point, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    return seconds, done.stdout.split()[0] if done.returncode == 0 and done.stdout else None


def cached_data(point, paths):
    """Bytes the mount states it holds of `paths` (`user.rangefs.cached_bytes`: exact, where `st_blocks` rounds
    each file up to 512 bytes)."""
    return sum(int(os.getxattr(os.path.join(point, path), "user.rangefs.cached_bytes")) for path in paths)


def run(bench):
    """Under a cap (issue 46): 100,000 small files read once under --cache-max-size 200M, RSS and mappings."""
    args = bench.args
    count = args.cap_files
    cap, cap_bytes = args.cap_size

    harness.log(f"  cap: making {count} files of 4-12 KB")
    paths, expected, total = make_files(bench, count)
    half = count // 2
    names_files = []
    for part, chosen in (("first", paths[:half]), ("second", paths[half:])):
        names_files.append(os.path.join(bench.work, f"cap-names-{part}.txt"))
        with open(names_files[-1], "w") as f:
            f.write("".join(path + "\n" for path in chosen))
    cache = bench.fresh_cache()
    mount = mounts.Mount(bench.binary, bench.work, [bench.nginx.url("cap/")], cache, ["--cache-max-size", cap])
    sampler = Sampler(mount.process.pid)
    sampler.start()
    measured = {}
    try:
        listed = sum(len(os.listdir(os.path.join(mount.point, f"d{i:03d}")))
                     for i in range((count + PER_FOLDER - 1) // PER_FOLDER))
        measured["rss_listed"] = sampler.now()[0]
        harness.drop_caches()
        digests, seconds = [], 0.0
        for index, names_file in enumerate(names_files):
            took, digest = read_half(mount.point, names_file)
            seconds += took
            digests.append(digest)
            measured["rss", index], measured["maps", index], measured["fds", index] = sampler.now()
            harness.log(f"  cap: {'first' if index == 0 else 'second'} half read in {took:.1f} s; RSS "
                        f"{measured['rss', index] / 1e6:.1f} MB, {measured['maps', index]} mappings, "
                        f"{measured['fds', index]} descriptors")
        measured["peak_rss"] = mount.peak_rss()
        measured["cached"] = cached_data(mount.point, paths)
        measured["inodes"], measured["disk"] = smallcache.footprint(cache)
        # An entry is released once idle for 30 s (StoreSettings.idleEntryTime): what is left once that passed.
        time.sleep(IDLE_WAIT)
        measured["rss", 2], measured["maps", 2], measured["fds", 2] = sampler.now()
    finally:
        sampler.stop()
        mount.close()
    measured["inodes_after"], measured["disk_after"] = smallcache.footprint(cache)
    shutil.rmtree(cache, ignore_errors=True)
    right = listed == count and digests == expected
    bench.checks.append((f"cap: {count} files listed and read right under --cache-max-size {cap}", right))
    report(bench, count, cap, cap_bytes, total, seconds, measured, sampler)


def report(bench, count, cap, cap_bytes, total, seconds, measured, sampler):
    """The cap table and its goals (markdown), and the goals as rows of the text report."""
    half = count // 2
    caches = harness.describe_filesystem(bench.args.cache_root or bench.work)
    table = Table(f"cap: {count} files of 4-12 KB ({total / 1e6:.0f} MB) read once under --cache-max-size {cap}, "
                  f"loopback nginx, cache on {caches} (one run; "
                  f"load average {os.getloadavg()[0]:.1f} at the end on {os.cpu_count()} CPUs)", ["rangefs"])
    rows = [
        ("read, seconds (xargs cat, listing order)", seconds, "{:.1f}"),
        ("daemon peak RSS (VmHWM), MB", measured["peak_rss"] / 1e6, "{:.1f}"),
        ("  RSS after listing every folder, MB", measured["rss_listed"] / 1e6, "{:.1f}"),
        (f"  RSS at half-way ({half} files read), MB", measured["rss", 0] / 1e6, "{:.1f}"),
        (f"  RSS at the end ({count} files read), MB", measured["rss", 1] / 1e6, "{:.1f}"),
        (f"  RSS {IDLE_WAIT} s after the read, MB", measured["rss", 2] / 1e6, "{:.1f}"),
        ("daemon peak mappings (/proc/PID/maps lines, sampled)", sampler.peak_maps, "{:.0f}"),
        ("  mappings at half-way", measured["maps", 0], "{:.0f}"),
        ("  mappings at the end", measured["maps", 1], "{:.0f}"),
        (f"  mappings {IDLE_WAIT} s after the read", measured["maps", 2], "{:.0f}"),
        ("daemon peak descriptors (sampled)", sampler.peak_fds, "{:.0f}"),
        ("  descriptors at the end", measured["fds", 1], "{:.0f}"),
        (f"  descriptors {IDLE_WAIT} s after the read", measured["fds", 2], "{:.0f}"),
        ("cached data at the end (user.rangefs.cached_bytes, summed), MiB", measured["cached"] / MiB, "{:.1f}"),
        ("cache folder on disk at the end, MiB (du)", measured["disk"] / MiB, "{:.1f}"),
        ("cache folder inodes at the end", measured["inodes"], "{:.0f}"),
        ("cache folder on disk after the unmount, MiB (du)", measured["disk_after"] / MiB, "{:.1f}"),
    ]
    for row, value, fmt in rows:
        table.add(row, "rangefs", value, fmt)
    bench.tables.append(table)
    rss_growth = (measured["rss", 1] - measured["rss", 0]) / (count - half)
    maps_growth = (measured["maps", 1] - measured["maps", 0]) / (count - half)
    goals = Goals(f"cap: issue 46's acceptance 7 ({count} files, --cache-max-size {cap})")
    checks = [
        (f"cached data at the end ≤ the cap ({cap})", measured["cached"] / MiB, 1.0, cap_bytes / MiB,
         f"{cap_bytes / MiB:.0f} MiB", "{:.1f} MiB", "cap: cached data over the cap (ratio)"),
        (f"RSS growth from half-way to the end ≤ {RSS_PER_FILE} bytes per file read", rss_growth, RSS_PER_FILE,
         None, None, "{:.1f} B", "cap: RSS growth per file read, second half (bytes per file)"),
        (f"mappings added from half-way to the end ≤ {MAPS_PER_FILE} per file read", maps_growth, MAPS_PER_FILE,
         None, None, "{:.4f}", "cap: mappings added per file read, second half (ratio)"),
    ]
    for goal, value, limit, reference, reference_shown, shown, label in checks:
        held = goals.add(goal, value, limit, reference, shown, reference_shown)
        if held is not None:
            bench.results[label] = (held, "", 0, f"<={limit}")
    bench.tables.append(goals)
    bench.results["cap: peak RSS MB (VmHWM)"] = (measured["peak_rss"] / 1e6, "", 0, None)
    bench.results["cap: peak mappings"] = (sampler.peak_maps, "", 0, None)
    bench.results["cap: read seconds"] = (seconds, "", 0, None)
