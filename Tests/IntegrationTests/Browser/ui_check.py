#!/usr/bin/env python3
"""Drives `rangefs ui` in Debian's headless chromium (issue 50, acceptance 1); run by UITests, exits non-zero on
the first check that fails.

Against a real mount whose origin sends /ui/ at 256 KiB/s per connection, it checks that:
  - the page opens from the printed URL (the token leaves the address bar) and lists the mount's files;
  - a URL's secret query value appears nowhere in the page, the selected file's detail included;
  - during a cold `cp`, the file's row (bytes, map) and its fine block map grow, as read from the DOM, and the row
    ends complete without a reload; the copy has the right sha256;
  - Pin starts a file's download and `rangefs status` shows it pinned; Pause stops it: once nginx has finished
    the requests in flight (its stub_status shows only our own), the access log gains no request for the file
    over three more updates of the page; Resume completes it with the right sha256;
  - Evict empties a complete file's cache, as `rangefs status` shows.
It keeps two screenshots: --screenshot at the end, and NAME-copy.png beside it during the copy. Waits are for events (a DOM value, a log line, a message); the deadline
only ends a hang.
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

DEADLINE = 600  # seconds; reached only by a hang


def wait_for(what, check, timeout=DEADLINE):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        for chunk in iter(lambda: source.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class Page:
    def __init__(self, options):
        self.options = options
        chrome = webdriver.ChromeOptions()
        chrome.binary_location = "/usr/bin/chromium"
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,860", f"--user-data-dir={options.work}/chromium"):
            chrome.add_argument(flag)
        self.driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=chrome)

    def script(self, text, *arguments):
        return self.driver.execute_script(text, *arguments)

    def row(self, name):
        """The visible row of `name` as the page shows it, or None."""
        return self.script("""
            const row = [...document.querySelectorAll('.row')].find(r => !r.hidden && r.dataset.name === arguments[0]);
            return row ? {cached: Number(row.dataset.cached), size: Number(row.dataset.size), state: row.dataset.state,
                          filled: Number(row.querySelector('canvas').dataset.filled || 0)} : null;""", name)

    def fine_filled(self, name):
        return self.script("""
            const detail = document.getElementById('detail'), canvas = document.getElementById('fineMap');
            return !detail.hidden && (canvas.dataset.key || '').endsWith('/' + arguments[0])
                ? Number(canvas.dataset.filled || 0) : null;
            """, name)

    def show_only(self, name):
        """Types `name` into the filter (reached with the `/` key) and selects its row with the arrow key."""
        body = self.driver.find_element(By.TAG_NAME, "body")
        self.script("document.activeElement.blur()")
        body.send_keys("/")
        box = self.driver.find_element(By.ID, "filter")
        assert self.driver.switch_to.active_element == box, "the / key focuses the filter"
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys(Keys.DELETE)
        box.send_keys(name)
        wait_for(f"only {name} listed", lambda: self.row(name) and self.script(
            "return [...document.querySelectorAll('.row')].filter(r => !r.hidden).length") == 1)
        self.script("document.getElementById('list').focus()")
        ActionChains(self.driver).send_keys(Keys.ARROW_DOWN).perform()
        wait_for(f"{name} selected", lambda: self.fine_filled(name) is not None)

    def clear_filter(self):
        box = self.driver.find_element(By.ID, "filter")
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys(Keys.DELETE)
        wait_for("every file listed", lambda: self.script(
            "return document.getElementById('filter').value === '' && "
            "[...document.querySelectorAll('.row')].filter(r => !r.hidden).length === 3"))

    def click(self, command, name):
        self.script("document.getElementById('message').textContent = ''")
        self.driver.find_element(By.CSS_SELECTOR, f'#actions button[data-command="{command}"]').click()
        message = wait_for(f"the answer to {command}", lambda: self.script(
            "const m = document.getElementById('message'); return m.className ? [m.className, m.textContent] : null"))
        assert message[0] == "done" and name in message[1], f"{command} {name}: {message}"
        print(f"clicked {command}: {message[1]}")

    def updates(self, count):
        """Waits for `count` more events from the server (the page counts them in #live's data-events)."""
        start = self.script("return Number(document.getElementById('live').dataset.events || 0)")
        wait_for(f"{count} updates", lambda: self.script(
            "return Number(document.getElementById('live').dataset.events || 0)") >= start + count)


def status(options):
    answer = subprocess.run([options.rangefs, "status", "--mount", options.mount, "--json"], capture_output=True,
                            text=True, check=True)
    return {file["name"]: file for file in json.loads(answer.stdout)["files"]}


def requests_for(options, path):
    with open(options.access_log) as log:
        return sum(1 for line in log if line.rstrip("\n").split("|")[-1] == path)


def nginx_writing(options):
    text = urllib.request.urlopen(options.nginx_status, timeout=10).read().decode()
    return int(re.search(r"Writing: (\d+)", text).group(1))


def check(options):
    growing, growing_sha = options.growing.split("=")
    pausable, pausable_sha = options.pausable.split("=")
    page = Page(options)
    try:
        page.driver.get(options.url)
        ready = wait_for("the page to be interactive", lambda: page.script("return document.documentElement.dataset.ready"))
        print(f"interactive after {ready} ms")
        assert "token=" not in page.driver.current_url, "the token left the address bar"
        for name in (growing, pausable, "small.txt"):
            wait_for(f"{name} listed", lambda name=name: page.row(name))

        page.show_only("small.txt")
        page.updates(1)
        assert "sig=" in page.driver.find_element(By.ID, "detail").text, "the URL with its query key is shown"
        for where in (page.driver.page_source, page.script("return document.documentElement.textContent")):
            assert options.secret not in where, "the page shows the URL's secret"

        # A cold copy: the row and the fine map grow, and the row ends complete without a reload.
        page.show_only(growing)
        page.clear_filter()  # every row in view again; the selection stays
        copy = subprocess.Popen(["cp", f"{options.mount}/{growing}", f"{options.work}/growing.copy"])
        seen = []
        midway = options.screenshot.replace(".png", "-copy.png")
        def complete():
            row, fine = page.row(growing), page.fine_filled(growing)
            if row and 0.4 < row["cached"] / row["size"] < 0.9 and not os.path.exists(midway):
                page.driver.save_screenshot(midway)
            speed = page.script("return Number(document.querySelector('.mount canvas').dataset.latest || 0)")
            if row and (not seen or seen[-1][:3] != (row["cached"], row["filled"], fine)):
                seen.append((row["cached"], row["filled"], fine, speed))
            return row and row["state"] == "complete" and row["cached"] == row["size"] and fine == 1
        wait_for(f"{growing} complete on the page", complete)
        assert copy.wait(timeout=DEADLINE) == 0, "cp failed"
        assert sha256(f"{options.work}/growing.copy") == growing_sha, "the copy's sha256"
        partial = [sample for sample in seen if 0 < sample[0] < page.row(growing)["size"]]
        print(f"{growing} on the page (bytes, row map, fine map, mount speed), {len(seen)} changes: {seen[:3]} … "
              f"{seen[-3:]}")
        assert len(partial) >= 2, f"the bar was seen growing: {seen}"
        for column, what in ((0, "bytes"), (1, "row map"), (2, "fine map")):
            values = [sample[column] for sample in seen if sample[column] is not None]
            assert values == sorted(values) and values[0] < values[-1], f"the {what} only grew: {values}"
        assert any(0 < sample[2] < 1 for sample in seen if sample[2] is not None), "the fine map was seen in part"
        assert any(sample[3] > 0 for sample in seen), "the speed graph showed the copy"

        # Pin starts the download and shows in status; Pause stops it.
        page.show_only(pausable)
        page.click("pin", pausable)
        assert status(options)[pausable]["pinned"] is True, "rangefs status shows the pin"
        wait_for(f"{pausable} downloading", lambda: (page.row(pausable) or {}).get("cached", 0) > 0)
        page.click("pause", pausable)
        wait_for("nginx to finish the requests in flight", lambda: nginx_writing(options) == 1)
        path = "/ui/" + pausable
        before, state = requests_for(options, path), status(options)[pausable]
        assert state["state"] == "paused" and state["cached_bytes"] < state["size"], f"paused in part: {state}"
        page.updates(3)
        after = status(options)[pausable]
        assert requests_for(options, path) == before, "a request came after the pause"
        assert nginx_writing(options) == 1, "a transfer runs during the pause"
        assert after["cached_bytes"] == state["cached_bytes"], f"bytes came during the pause: {state} {after}"
        assert page.row(pausable)["state"] == "paused", "the page shows the pause"
        print(f"paused at {state['cached_bytes']} of {state['size']} bytes, {before} requests")
        page.driver.save_screenshot(options.screenshot)

        page.click("resume", pausable)
        wait_for(f"{pausable} complete on the page", lambda: (page.row(pausable) or {}).get("state") == "complete")
        assert requests_for(options, path) > before, "resume fetched the rest"
        assert sha256(f"{options.mount}/{pausable}") == pausable_sha, "the resumed file's sha256"

        # Evict empties a complete, closed, unpinned file.
        page.show_only(growing)
        page.click("evict", growing)
        requests_before = requests_for(options, "/ui/" + growing)
        try:
            wait_for("status to show the eviction", lambda: status(options)[growing]["cached_bytes"] == 0, timeout=120)
        except AssertionError:
            print(f"status of {growing}: {status(options)[growing]}; requests for it before the eviction "
                  f"{requests_before}, now {requests_for(options, '/ui/' + growing)}")
            raise
        wait_for("the page to show the eviction", lambda: page.row(growing)["cached"] == 0)

        # The screenshot kept: every file, the resumed one selected.
        page.show_only(pausable)
        page.clear_filter()
        page.updates(1)
        page.driver.save_screenshot(options.screenshot)
        print(f"screenshots: {options.screenshot}, {midway} (during the copy)")
    finally:
        page.driver.quit()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for option in ("url", "mount", "rangefs", "access-log", "nginx-status", "growing", "pausable", "secret", "work",
                   "screenshot"):
        parser.add_argument("--" + option, required=True)
    options = parser.parse_args()
    try:
        check(options)
    except AssertionError as failure:
        print(f"ui_check: FAILED: {failure}", file=sys.stderr)
        return 1
    print("ui_check: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
