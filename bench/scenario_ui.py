"""The `ui` scenario (issue 50, acceptance 3): `rangefs ui` with 10,000 files mounted.

10,000 files of 8 KiB on the loopback nginx, mounted with a list file (one `NAME=URL` per line: every file shows,
as no listing hides untouched ones), default options; 1,000 of them read (`cat`) so the mount holds complete and
untouched files. Then, each run: the daemon's CPU seconds (/proc/PID/stat utime + stime) over a window with no page
open; `rangefs ui --mount` started and headless chromium (selenium, /opt/selenium) opening its URL, timed from the
request to the page being interactive (the script marks <html data-ready> once the first state is drawn and the
list takes keys; the page's own performance.now() at that point is shown too); the daemon's CPU over the same
window with the page open and its event stream consumed (`rangefs ui` prints its URL once it holds the mounts' first
state, and the time it takes to is reported too); the page closed, and a second idle window. Reported: the
medians, and the cost of serving updates as (page open - mean of the idle windows) / window, in % of one core. The
goals: interactive in ≤ 2 s, and ≤ 5% of a core.

Standalone (no cache drop, no other scenario): `python3 bench/scenario_ui.py --binary PATH [--files N] [--window S]
[--runs N]`; in the bench: `bench/bench.py --only ui`.
"""
import os, shutil, statistics, subprocess, sys, tempfile, time

import harness, mounts, origin
from tables import Goals, Table

FILES, SIZE, READ = 10_000, 8192, 1_000


def make_files(bench, count):
    """www/uibench/fNNNNN.bin; returns the list file's path."""
    folder = os.path.join(bench.www, "uibench")
    os.makedirs(folder, exist_ok=True)
    block = os.urandom(SIZE)
    lines = []
    for index in range(count):
        name = f"f{index:05d}.bin"
        with open(os.path.join(folder, name), "wb") as f:
            f.write(block[index % 64:] + block[:index % 64])
        lines.append(f"{name}={bench.nginx.url('uibench/' + name)}")
    path = os.path.join(bench.work, "uibench.list")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(path, 0o600)
    return path


def browser():
    sys.path.insert(0, "/opt/selenium")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1280,860"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def start_ui(binary, point):
    """`rangefs ui --mount point`: the process, the URL it printed and the seconds it took to print it."""
    start = time.perf_counter()
    ui = subprocess.Popen([binary, "ui", "--mount", point], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True)
    url = ui.stdout.readline().strip()
    if not url.startswith("http://"):
        ui.kill()
        raise RuntimeError(f"rangefs ui printed no URL: {url!r}")
    return ui, url, time.perf_counter() - start


def cpu_over(pids, seconds):
    before = harness.process_cpu(pids)
    time.sleep(seconds)
    return harness.process_cpu(pids) - before


def run(bench):
    """rangefs ui with 10,000 files mounted: time to an interactive page, the daemon's CPU serving it."""
    args = bench.args
    count = getattr(args, "ui_files", None) or (1_000 if args.smoke else FILES)
    window = getattr(args, "ui_window", None) or (5 if args.smoke else 20)
    list_file = make_files(bench, count)
    cache = bench.fresh_cache()
    mount = mounts.Mount(bench.binary, bench.work, ["--list", list_file], cache)
    measured = {"idle": [], "open": [], "ui": [], "ready": [], "page_ready": [], "rows": [], "started": []}
    try:
        subprocess.run(["cat"] + [mount.path(f"f{i:05d}.bin") for i in range(0, count, count // min(READ, count))],
                       check=True, stdout=subprocess.DEVNULL)
        daemon = [mount.process.pid]
        cpu_over(daemon, 3)  # the reads' commits settle
        driver = browser()
        try:
            for _ in range(args.runs):
                idle = cpu_over(daemon, window)
                ui, url, started = start_ui(bench.binary, mount.point)
                measured["started"].append(started * 1000)
                try:
                    start = time.perf_counter()
                    driver.get(url)
                    while not driver.execute_script("return document.documentElement.dataset.ready"):
                        time.sleep(0.01)
                    measured["ready"].append((time.perf_counter() - start) * 1000)
                    measured["page_ready"].append(float(driver.execute_script(
                        "return document.documentElement.dataset.ready")))
                    measured["rows"].append(driver.execute_script(
                        "return document.getElementById('spacer').offsetHeight / 52"))
                    ui_before = harness.process_cpu([ui.pid])
                    measured["open"].append(cpu_over(daemon, window))
                    measured["ui"].append(harness.process_cpu([ui.pid]) - ui_before)
                    driver.get("about:blank")
                finally:
                    ui.terminate()
                    ui.wait()
                measured["idle"].append((idle + cpu_over(daemon, window)) / 2)
        finally:
            driver.quit()
    finally:
        mount.close()
        shutil.rmtree(cache, ignore_errors=True)
    report(bench, count, window, measured)


def report(bench, count, window, measured):
    median = statistics.median
    cost = [(opened - idle) / window * 100 for opened, idle in zip(measured["open"], measured["idle"])]
    bench.checks.append((f"ui: the page listed all {count} files", all(rows == count for rows in measured["rows"])))
    table = Table(f"ui: rangefs ui with {count} files mounted ({len(cost)} runs, {window} s windows, load average "
                  f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)", ["rangefs"])
    rows = [("rangefs ui started to its URL printed (its first state in hand), ms", median(measured["started"]),
             "{:.0f}"),
            ("page interactive, ms (request to first state drawn)", median(measured["ready"]), "{:.0f}"),
            ("  the page's own performance.now() then, ms", median(measured["page_ready"]), "{:.0f}"),
            ("daemon CPU, page closed, % of a core", median(measured["idle"]) / window * 100, "{:.2f}"),
            ("daemon CPU, page open, % of a core", median(measured["open"]) / window * 100, "{:.2f}"),
            ("serving updates (open - closed), % of a core", median(cost), "{:.2f}"),
            ("rangefs ui's own CPU, page open, % of a core", median(measured["ui"]) / window * 100, "{:.2f}")]
    for row, value, fmt in rows:
        table.add(row, "rangefs", value, fmt)
    bench.tables.append(table)
    goals = Goals(f"ui: issue 50's acceptance 3 ({count} files)")
    held = goals.add("page interactive ≤ 2 s", median(measured["ready"]) / 1000, 2.0, shown="{:.2f} s")
    bench.results["ui: page interactive, s"] = (held, "", 0, "<=2.0")
    held = goals.add("serving updates ≤ 5% of one core", median(cost), 5.0, shown="{:.2f}%")
    bench.results["ui: serving updates, % of a core"] = (held, "", 0, "<=5.0")
    bench.tables.append(goals)


class Standalone:
    """What `run` needs of bench.py's Bench, without its cache drop and its big files."""

    def __init__(self, options):
        self.args = options
        self.binary = options.binary
        self.work = tempfile.mkdtemp(prefix="rangefs-uibench-")
        self.www = os.path.join(self.work, "www")
        os.makedirs(self.www)
        self.nginx = origin.Nginx(self.work, self.www)
        self.tables, self.results, self.checks = [], {}, []

    def fresh_cache(self):
        return tempfile.mkdtemp(dir=self.work, prefix="cache-")


def main():
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--files", dest="ui_files", type=int)
    parser.add_argument("--window", dest="ui_window", type=int)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--smoke", action="store_true")
    options = parser.parse_args()
    options.cache_root = None
    bench = Standalone(options)
    try:
        run(bench)
    finally:
        bench.nginx.stop()
        shutil.rmtree(bench.work, ignore_errors=True)
    for table in bench.tables:
        print(table.markdown())
    failed = [label for label, ok in bench.checks if not ok]
    print("checks:", "all passed" if not failed else "FAILED: " + ", ".join(failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
