"""The `archives` scenario (issue 49, acceptance 5): archives on a web server opened as folders.

The tree of ArchiveMountTests (2,000 files of 0-20 KB in 20 folders, random and compressible, and a 40,000-byte
`big/m40k.bin`) as a zip (python's zipfile, stored and deflated by turns) and a .tar.gz, served by the bench's nginx
on 127.0.0.1. Each tool mounts them fresh (an empty cache or index folder) and is measured for: the time from its
start to the first listing of the archive's root folder; one 40 KB member read (time, and bytes nginx sent for the
archive, from its access log); the daemon's RSS after that; and, after an unmount, a remount's first listing (with
its kept index). The tools: rangefs `--archives`; ratarmount 1.3 (PyPI; it reads http URLs through fsspec and keeps
its index in ~/.ratarmount or beside the archive); rclone 1.75's `:archive:` over `:http:` (zip only: its tar support
is rated poor by its docs, and it has no gzip). A tool that is not installed or fails is reported as such.
"""
import os, random, shutil, subprocess, tempfile, time, zipfile, tarfile

import harness

MEMBER = "big/m40k.bin"


def make_archives(folder):
    """folder/tree.zip and folder/tree.tar.gz of a generated tree; returns the member's bytes."""
    source = os.path.join(folder, "tree")
    generator = random.Random(49)
    for i in range(2000):
        path = os.path.join(source, "dir%02d" % (i % 20), "f%04d.%s" % (i, "txt" if i % 2 else "bin"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        size = generator.randint(0, 20000)
        data = (("line %d\n" % i) * (size // 6 + 1)).encode()[:size] if i % 2 else generator.randbytes(size)
        with open(path, "wb") as f:
            f.write(data)
    member = generator.randbytes(40000)
    os.makedirs(os.path.join(source, "big"), exist_ok=True)
    with open(os.path.join(source, MEMBER), "wb") as f:
        f.write(member)
    with zipfile.ZipFile(os.path.join(folder, "tree.zip"), "w") as z:
        for n, (root, _, files) in enumerate(sorted(os.walk(source))):
            for k, name in enumerate(sorted(files)):
                path = os.path.join(root, name)
                z.write(path, os.path.relpath(path, source),
                        compress_type=zipfile.ZIP_DEFLATED if (n + k) % 2 else zipfile.ZIP_STORED)
    with tarfile.open(os.path.join(folder, "tree.tar.gz"), "w:gz") as t:
        for entry in sorted(os.listdir(source)):
            t.add(os.path.join(source, entry), entry)
    shutil.rmtree(source)
    return member


def wait_listing(path, deadline):
    """Lists `path` as soon as it can be listed; the names, or None at the deadline."""
    while time.time() < deadline:
        try:
            names = os.listdir(path)
            if names:
                return names
        except OSError:
            pass
        time.sleep(0.01)
    return None


class Tool:
    """One mount of one tool: `start` returns the process; `folder(name)` where archive `name`'s root shows."""

    def __init__(self, label, start, folder, stop):
        self.label, self.start, self.folder, self.stop = label, start, folder, stop


def tools(bench, work):
    port_url = bench.nginx.url("archives/")
    found = []
    rangefs_cache = bench.fresh_cache()
    found.append(Tool(
        "rangefs --archives",
        lambda point, name: subprocess.Popen([bench.binary, "mount", "-f", point, port_url + name, "--cache",
                                              rangefs_cache, "--archives"],
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        lambda point, name: os.path.join(point, name), None))
    # install-deps.sh puts it in a folder of its own (pip --target), run with that folder on PYTHONPATH.
    ratarmount, environment = shutil.which("ratarmount"), None
    if os.path.exists("/opt/ratarmount/bin/ratarmount"):
        ratarmount = "/opt/ratarmount/bin/ratarmount"
        environment = dict(os.environ, PYTHONPATH="/opt/ratarmount")
    if ratarmount:
        index_folder = tempfile.mkdtemp(dir=work, prefix="ratar-index-")
        found.append(Tool(
            "ratarmount 1.3",
            lambda point, name: subprocess.Popen([ratarmount, "-f", "--index-folders", index_folder,
                                                  port_url + name, point], env=environment,
                                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
            lambda point, name: point, None))
    rclone = bench.args.rclone_new
    if os.path.exists(rclone):
        found.append(Tool(
            "rclone 1.75 :archive:",
            lambda point, name: subprocess.Popen(
                [rclone, "mount", "--read-only", f":archive::http,url='{port_url}':", point],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) if name.endswith(".zip") else None,
            lambda point, name: os.path.join(point, name), None))
    return found


def measure(bench, tool, name, member, work):
    """One fresh mount and one remount of archive `name` by `tool`: a dict of what was measured, or a reason."""
    point = tempfile.mkdtemp(dir=work, prefix="arch-")
    bench.nginx.clear_log()
    started = time.time()
    process = tool.start(point, name)
    if process is None:
        return "not supported"
    result = {}
    try:
        names = wait_listing(tool.folder(point, name), started + 300)
        if names is None:
            return "no listing in 300 s"
        result["first listing s"] = time.time() - started
        result["index bytes"] = bench.nginx.direct_bytes("archives/" + name)
        bench.nginx.clear_log()
        began = time.time()
        with open(os.path.join(tool.folder(point, name), MEMBER), "rb") as f:
            data = f.read()
        result["member ms"] = (time.time() - began) * 1000
        result["member bytes"] = bench.nginx.direct_bytes("archives/" + name)
        result["right"] = data == member
        result["RSS MB"] = harness.memory(process.pid) / 1e6
    finally:
        subprocess.run(["fusermount3", "-u", point], stderr=subprocess.DEVNULL)
        process.wait(timeout=60)
    bench.nginx.clear_log()
    started = time.time()
    process = tool.start(point, name)
    try:
        names = wait_listing(tool.folder(point, name), started + 300)
        result["remount listing s"] = time.time() - started if names else None
        result["remount bytes"] = bench.nginx.direct_bytes("archives/" + name)
    finally:
        subprocess.run(["fusermount3", "-u", point], stderr=subprocess.DEVNULL)
        process.wait(timeout=60)
    return result


def run(bench):
    """Archives as folders (issue 49): rangefs --archives, ratarmount 1.3 and rclone's :archive: over HTTP."""
    folder = os.path.join(bench.www, "archives")
    os.makedirs(folder, exist_ok=True)
    member = make_archives(folder)
    sizes = {name: os.path.getsize(os.path.join(folder, name)) for name in ("tree.zip", "tree.tar.gz")}
    harness.log(f"  archives: tree.zip {sizes['tree.zip']} bytes, tree.tar.gz {sizes['tree.tar.gz']} bytes")
    rows = []
    for tool in tools(bench, bench.work):
        for name in ("tree.zip", "tree.tar.gz"):
            try:
                result = measure(bench, tool, name, member, bench.work)
            except (OSError, subprocess.SubprocessError) as error:
                result = f"failed: {error}"
            harness.log(f"  archives: {tool.label}, {name}: {result}")
            rows.append((tool.label, name, result))
            if isinstance(result, dict) and tool.label.startswith("rangefs"):
                bench.checks.append((f"archives: {name} member read right through rangefs", result["right"]))
    lines = ["| tool | archive | first listing | index bytes | 40 KB member | member bytes | RSS | remount listing |",
             "|---|---|---|---|---|---|---|---|"]
    for label, name, result in rows:
        if not isinstance(result, dict):
            lines.append(f"| {label} | {name} | {result} | | | | | |")
            continue
        remount = result.get("remount listing s")
        lines.append(f"| {label} | {name} | {result['first listing s']:.2f} s | {result['index bytes']:,} | "
                     f"{result['member ms']:.0f} ms{'' if result['right'] else ' (WRONG BYTES)'} | "
                     f"{result['member bytes']:,} | {result['RSS MB']:.0f} MB | "
                     f"{'%.2f s' % remount if remount is not None else 'none'} ({result['remount bytes']:,} bytes) |")
    harness.log("\n".join(lines))
