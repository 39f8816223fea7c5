"""The `s3` scenario: object stores (issue 38), rangefs against s3fs-fuse and `rclone mount :s3:` in the same run.

1. Listing: a prefix of --s3-objects objects of 100 B (100,000; a smoke run 200) on rclone serve s3 (-vv, which
   logs every request). The first `ls -l` of a fresh mount (seconds, the LIST and HEAD + GET requests it cost, the
   daemon's CPU seconds and its RSS growth per entry over a fresh mount's), a second `ls -l`, and `ls -lR` after a
   remount (rangefs: `rangefs unmount`, then `rangefs mount M --cache DIR` with no URL and no key: the saved set).
2. A cold `cp` of the 512 MiB object (fresh cache, page cache dropped), MiB/s and the daemon's CPU seconds, beside
   curl of the same object (signed by curl's own --aws-sigv4, its key in a -K file, not in argv).
3. rangefs only: `kill -9` of the daemon at 40% of a cold cp, a lazy unmount, a remount and a cp again: the bytes
   the server sent for the second pass against the bytes missing + 32 MiB.
4. A remount with the server stopped: does `ls -lR` show a small tree (3 folders of 10 objects), and does `cat`
   of an object read before the stop give its bytes.

rclone serve s3 1.75 answers a Range GET with 200 and Content-Range. A build that cannot read that (checked at the
start on a 2 MiB object) gets rows 2 to 4 from moto 5.2.5 instead, for every tool, and the tables say which
server served what. moto reads the whole object for every Range GET, so each request of the 512 MiB object costs
it about 0.4 s whatever its length: there, row 2 measures moto's cost per request as much as the clients.

The builds and curl get --runs runs (medians); the peers one run of row 1, with a deadline (s3fs HEADs every
object to `ls -l` it), and --runs of row 2.
"""
import os, shutil, subprocess, tempfile, time

import harness, mounts
import s3servers as s3
from tables import Table

MiB = 1 << 20
PEER_TIMEOUT = 180  # seconds for a peer's mount and listing of the 100,000 objects
TREE = [(f"d{d}", f"f{f:03d}.bin") for d in range(3) for f in range(10)]


def bounded(command, timeout, mount=None):
    """(seconds, stdout) of `command`, or (None, b"") if it failed or passed `timeout`. A reader stuck in a FUSE
    request cannot be killed until the daemon answers (rclone mount retries a stopped server for minutes), so past
    the deadline `mount`'s daemon is killed first, which fails the request."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.DEVNULL)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            if mount is not None:
                mount.kill()
            process.kill()
            process.wait()
            return None, b""
        seconds = time.perf_counter() - start
        output.seek(0)
        return (seconds, output.read()) if process.returncode == 0 else (None, b"")


def listing(command, timeout, mount=None):
    """(seconds, regular files shown) of `command` (an ls), or (None, 0) if it failed or passed `timeout`."""
    seconds, output = bounded(command, timeout, mount)
    return seconds, sum(1 for line in output.splitlines() if line.startswith(b"-"))


def make_objects(bench, folder):
    """The objects, as files under `folder`/bench/ (the bucket): flat/ (the listing), data/big.bin (a hard link to
    the bench's big file), data/probe.bin (2 MiB) and tree/ (row 4). Returns {key: path} of data/ and tree/."""
    root = os.path.join(folder, s3.BUCKET)
    flat = os.path.join(root, "flat")
    os.makedirs(flat)
    for index in range(bench.args.s3_objects):
        with open(os.path.join(flat, f"f{index:06d}.bin"), "wb") as f:
            f.write((b"%06d" % index) * 16 + b"\n" * 4)
    os.makedirs(os.path.join(root, "data"))
    objects = {"data/big.bin": os.path.join(root, "data", "big.bin"),
               "data/probe.bin": os.path.join(root, "data", "probe.bin")}
    os.link(os.path.join(bench.www, "big.bin"), objects["data/big.bin"])
    harness.make_file(objects["data/probe.bin"], 2 * MiB + 12345, 38)
    for index, (directory, name) in enumerate(TREE):
        path = os.path.join(root, "tree", directory, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        harness.make_file(path, 1000, 3800 + index)
        objects[f"tree/{directory}/{name}"] = path
    return objects


def reads_rclone(bench, binary, store, objects):
    """Whether `binary` reads an object of rclone serve s3 right (its Range answers are 200 + Content-Range)."""
    cache = bench.fresh_cache()
    try:
        mount = s3.S3Mount("rangefs", binary, bench.work, store, "data/", cache)
    except RuntimeError:
        shutil.rmtree(cache, ignore_errors=True)
        return False
    try:
        return bounded(["cmp", mount.path("probe.bin"), objects["data/probe.bin"]], 60, mount)[0] is not None
    finally:
        mount.kill()
        shutil.rmtree(cache, ignore_errors=True)


def tools(bench):
    """[(column, kind, binary)]: the builds, then s3fs and the current rclone if installed (not in a smoke run)."""
    found = [(label, "rangefs", binary) for label, binary in bench.labelled_builds()]
    if bench.args.smoke:
        return found
    if shutil.which("s3fs"):
        found.append(("s3fs 1.90", "s3fs", "s3fs"))
    if os.path.exists(s3.RCLONE):
        found.append(("rclone 1.75 mount", "rclone", s3.RCLONE))
    return found


def requests(table, row, column, store, since):
    """Adds the LIST and HEAD + GET requests `store` logged after `since` under `row`."""
    counts = store.requests(since)
    table.add(f"  {row}: LIST requests", column, counts["LIST"], "{:.0f}")
    table.add(f"  {row}: HEAD + GET requests", column, counts["HEAD"] + counts["GET"], "{:.0f}")
    return counts


def fresh_rss(bench, kind, binary, store):
    """The RSS of a fresh mount of `kind`: a mount of a prefix of 10 objects, listed, then unmounted."""
    cache = bench.fresh_cache()
    try:
        mount = s3.S3Mount(kind, binary, bench.work, store, "tree/d0/", cache)
    except RuntimeError:
        return None
    try:
        listing(["ls", "-l", mount.point], 60, mount)
        time.sleep(0.5)  # settled
        return mount.rss()
    finally:
        mount.close()
        shutil.rmtree(cache, ignore_errors=True)


def mount_or_note(bench, table, column, kind, row, what, cache, mount):
    """`mount()`, or None after logging why it failed, leaving `row` empty for `column`, counting a failed check
    for rangefs (`what` it could not do) and removing `cache`."""
    try:
        return mount()
    except RuntimeError as error:
        harness.log(f"  s3: {column}: {error}")
        if kind == "rangefs":
            bench.checks.append((f"s3: {column} {what}", False))
        table.add(row, column, None)
        shutil.rmtree(cache, ignore_errors=True)
        return None


def list_prefix(bench, table, column, kind, binary, store, timeout):
    """Row 1 for one tool: a fresh mount and its first `ls -l` (rangefs lists a prefix before its mount returns,
    the peers when it is first read, so both are timed together), a second `ls -l`, and a remount and `ls -lR`."""
    count = bench.args.s3_objects
    first, second, again = (f"mount + 1st `ls -l` of {count:,} objects, s", "2nd `ls -l`, s",
                            "remount + `ls -lR`, s")
    fresh = fresh_rss(bench, kind, binary, store)
    cache = bench.fresh_cache()
    since, start = store.mark(), time.perf_counter()
    mount = mount_or_note(bench, table, column, kind, first, f"mounts s3://{s3.BUCKET}/flat/", cache,
                          lambda: s3.S3Mount(kind, binary, bench.work, store, "flat/", cache, timeout=timeout))
    if mount is None:
        return
    try:
        for row, step in ((first, "1st"), (second, "2nd")):
            if row == second:
                since, start = store.mark(), time.perf_counter()
            cpu = 0 if row == first else mount.cpu()  # the first: all the daemon's CPU since it started
            seconds, shown = listing(["ls", "-l", mount.point], max(1, timeout - (time.perf_counter() - start)),
                                     mount)
            table.add(row, column, None if seconds is None else time.perf_counter() - start)
            # Past the deadline the daemon was killed: its CPU and RSS are gone with it.
            table.add(f"  {step}: daemon CPU s", column, None if seconds is None else mount.cpu() - cpu)
            counts = requests(table, step, column, store, since)
            if row == first and fresh is not None and seconds is not None:
                table.add("  RSS growth per entry, bytes", column, (mount.rss() - fresh) / count, "{:.0f}")
            harness.log(f"  s3 {column} {step} ls -l: {table.text(row, column)} s, {shown} files, {counts}")
            if kind == "rangefs":
                bench.checks.append((f"s3: {column} {step} ls -l shows {count} objects", shown == count))
            if seconds is None:
                return
    finally:
        mount.close()
    since, start = store.mark(), time.perf_counter()
    mount = mount_or_note(bench, table, column, kind, again, "mounts its saved set again", cache,
                          lambda: s3.S3Mount(kind, binary, bench.work, store, "flat/", cache, again=True,
                                             timeout=timeout))
    if mount is None:
        return
    try:
        seconds, shown = listing(["ls", "-lR", mount.point], max(1, timeout - (time.perf_counter() - start)),
                                 mount)
        table.add(again, column, None if seconds is None else time.perf_counter() - start)
        table.add("  remount: daemon CPU s", column, None if seconds is None else mount.cpu())
        counts = requests(table, "remount", column, store, since)
        harness.log(f"  s3 {column} remount ls -lR: {table.text(again, column)} s, {shown} files, {counts}")
        if kind == "rangefs":
            bench.checks.append((f"s3: {column} ls -lR after a remount shows {count} objects", shown == count))
    finally:
        mount.close()
        shutil.rmtree(cache, ignore_errors=True)


ALONE = "pages alone"


def list_alone(bench, table, store):
    """The listing's floor: a bare client pages through the same ListObjectsV2 listing (signed, one keep-alive
    connection, each page read and dropped), so the mounts' first `ls -l` can be set against the server's own
    cost of the listing in the same run."""
    count = bench.args.s3_objects
    since = store.mark()
    pages, keys, seconds = s3.list_alone(store, "flat/")
    table.add(f"mount + 1st `ls -l` of {count:,} objects, s", ALONE, seconds)
    counts = requests(table, "1st", ALONE, store, since)
    harness.log(f"  s3 {ALONE}: {pages} pages, {keys} keys in {seconds:.2f} s, {counts}")
    bench.checks.append((f"s3: ListObjectsV2 alone finds {count} keys", keys == count))


def cold_copy(bench, table, column, kind, binary, store, dest):
    """Row 2 for one tool: a cold cp of data/big.bin from a fresh mount; checked, then removed."""
    size = bench.sizes["big.bin"]
    cache = bench.fresh_cache()
    row = f"cold `cp` of {size // MiB} MiB, MiB/s"
    try:
        mount = s3.S3Mount(kind, binary, bench.work, store, "data/", cache)
    except RuntimeError as error:
        harness.log(f"  s3: {column}: {error}")
        table.add(row, column, None)
        return
    try:
        harness.drop_caches()
        since, cpu = store.mark(), mount.cpu()
        seconds, used, busy = harness.timed_cpu(["cp", mount.path("big.bin"), dest], {"server": [store.process.pid]})
        table.add(row, column, size / seconds / MiB, "{:.0f}")
        table.add("  cp: daemon CPU s", column, mount.cpu() - cpu)
        table.add("  cp: server CPU s", column, used["server"])
        counts = store.requests(since)
        table.add("  cp: GET requests", column, counts["GET"], "{:.0f}")
        right = bench.check_copy(dest, "big.bin")
        harness.log(f"  s3 {column} cold cp: {size / seconds / MiB:.0f} MiB/s, {counts['GET']} GETs, "
                    f"{harness.describe_cpu(used, busy)}, {'right' if right else 'WRONG BYTES'}")
    except subprocess.CalledProcessError:
        table.add(row, column, None)
    finally:
        if os.path.exists(dest):
            os.remove(dest)
        mount.close()
        shutil.rmtree(cache, ignore_errors=True)


def curl_copy(bench, table, store, dest):
    """Row 2's reference: curl of the same object, signed with curl's --aws-sigv4 (the key in a -K file)."""
    config = os.path.join(bench.work, "curl-s3.conf")
    with open(os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(f'user = "{s3.ACCESS}:{s3.SECRET}"\n')
    size = bench.sizes["big.bin"]
    harness.drop_caches()
    seconds, used, _ = harness.timed_cpu(["curl", "-sf", "-K", config, "--aws-sigv4", "aws:amz:us-east-1:s3", "-o",
                                          dest, f"{store.endpoint()}/{s3.BUCKET}/data/big.bin"],
                                         {"server": [store.process.pid]})
    table.add(f"cold `cp` of {size // MiB} MiB, MiB/s", "curl", size / seconds / MiB, "{:.0f}")
    table.add("  cp: server CPU s", "curl", used["server"])
    bench.check_copy(dest, "big.bin")
    os.remove(dest)


def kill_resume(bench, table, column, binary, store, dest):
    """Row 3: kill -9 at 40% of a cold cp, lazy unmount, remount on the same cache, cp again; the bytes the server
    sent for the second pass against the missing bytes + 32 MiB. Returns the MiB over the missing bytes."""
    size = bench.sizes["big.bin"]
    cache = bench.fresh_cache()
    try:
        mount = s3.S3Mount("rangefs", binary, bench.work, store, "data/", cache)
    except RuntimeError as error:
        harness.log(f"  s3: {column}: {error}")
        bench.checks.append((f"s3: {column} mounts for kill -9", False))
        shutil.rmtree(cache, ignore_errors=True)
        return float("inf")
    harness.drop_caches()
    copied = mounts.kill_during_copy(mount, mount.path("big.bin"), dest, size * 2 // 5)
    mount = s3.S3Mount("rangefs", binary, bench.work, store, "data/", cache)
    try:
        before = store.sent()
        harness.run(["cp", mount.path("big.bin"), dest])
        second = store.sent() - before
        bench.check_copy(dest, "big.bin")
    finally:
        mount.close()
        os.remove(dest)
        shutil.rmtree(cache, ignore_errors=True)
    missing = size - copied
    table.add("kill -9 at 40%, remount, cp: MiB the server sent", column, second / MiB, "{:.1f}")
    table.add("  bound: MiB missing + 32", column, missing / MiB + 32, "{:.1f}")
    harness.log(f"  s3 {column}: killed at {copied / MiB:.0f} MiB; the second pass cost {second / MiB:.1f} MiB sent "
                f"for {missing / MiB:.0f} MiB missing")
    return max(0, second - missing) / MiB


def offline(bench, table, found, store, objects):
    """Row 4: each tool lists the tree and reads tree/d0/f000.bin while the server runs; then the server stops and
    each remounts its cache: does `ls -lR` show the tree, and does `cat` of that object give its bytes?"""
    name = "tree/d0/f000.bin"
    with open(objects[name], "rb") as f:
        expected = f.read()
    caches = {}
    for column, kind, binary in found:
        cache = bench.fresh_cache()
        try:
            mount = s3.S3Mount(kind, binary, bench.work, store, "tree/", cache)
        except RuntimeError as error:
            harness.log(f"  s3: {column}: {error}")
            if kind == "rangefs":
                bench.checks.append((f"s3: {column} mounts s3://{s3.BUCKET}/tree/", False))
            shutil.rmtree(cache, ignore_errors=True)
            continue
        try:
            listing(["ls", "-lR", mount.point], 60, mount)
            bounded(["cat", mount.path("d0/f000.bin")], 60, mount)
            time.sleep(1)  # rclone writes its VFS cache's metadata back after a moment
        finally:
            mount.close()
        caches[column] = cache
    store.stop()
    shown_row, read_row = "server stopped, remount: `ls -lR` shows the tree", "  and `cat` of a cached object"
    yes = lambda value: "yes" if value else "no"
    for column, kind, binary in found:
        if column not in caches:
            continue
        # Each question on a remount of its own: a daemon killed at the deadline of one does not answer the other.
        results = []
        for command in (["ls", "-lR", ""], ["cat", "d0/f000.bin"]):
            try:
                mount = s3.S3Mount(kind, binary, bench.work, store, "tree/", caches[column], again=True, timeout=30)
            except RuntimeError:
                results.append((None, b""))
                continue
            try:
                results.append(bounded([*command[:-1], mount.path(command[-1])], 30, mount))
            finally:
                mount.close()  # or it was killed at the deadline
        shown = sum(1 for line in results[0][1].splitlines() if line.startswith(b"-"))
        read = results[1][0] is not None and results[1][1] == expected
        table.add(shown_row, column, 1 if shown == len(TREE) else 0, yes)
        table.add(read_row, column, 1 if read else 0, yes)
        harness.log(f"  s3 {column} offline: {shown} of {len(TREE)} files shown, cat {'right' if read else 'failed'}")
        if kind == "rangefs":
            bench.checks.append((f"s3: {column} with the server stopped shows the tree and reads the cached object",
                                 shown == len(TREE) and read))
        shutil.rmtree(caches[column], ignore_errors=True)


def run(bench):
    """Object stores (issue 38): a 100,000-object listing, a cold cp, kill -9 and an offline remount, with peers."""
    args = bench.args
    found = tools(bench)
    builds = [column for column, kind, _ in found if kind == "rangefs"]
    folder = os.path.join(bench.work, "s3")
    objects = make_objects(bench, folder)
    caches = harness.describe_filesystem(args.cache_root or bench.work)
    baseline = args.baseline_label if args.baseline else None
    lister = s3.RcloneStore(bench.work, folder)
    reader = None
    try:
        if all(reads_rclone(bench, binary, lister, objects) for _, kind, binary in found if kind == "rangefs"):
            reader = lister
        else:
            harness.log("  s3: this build reads rclone serve s3's 200 + Content-Range answers wrong: rows 2-4 on moto")
            reader = s3.MotoStore(bench.work, objects)
        columns = [column for column, _, _ in found]
        listed = Table(f"s3, listing: {args.s3_objects:,} objects of 100 B under one prefix, {lister.name} "
                       f"(-vv), caches on {caches} (medians of {args.runs} runs for the builds, one run for the "
                       "peers)", columns + [ALONE], baseline=baseline, timeout=PEER_TIMEOUT)
        for index in range(args.runs):
            list_alone(bench, listed, lister)
            for column, kind, binary in bench.in_turn(found, index):
                if index == 0 or kind == "rangefs":
                    list_prefix(bench, listed, column, kind, binary, lister,
                                PEER_TIMEOUT if kind != "rangefs" else 900)
        bench.tables.append(listed)
        size = bench.sizes["big.bin"]
        read = Table(f"s3, reads: one object of {size // MiB} MiB, {reader.name} (medians of {args.runs} runs)",
                     columns + ["curl"], baseline=baseline)
        dest = os.path.join(bench.work, "s3.out")
        extra = {column: [] for column in builds}
        for index in range(args.runs):
            curl_copy(bench, read, reader, dest)
            for column, kind, binary in bench.in_turn(found, index):
                cold_copy(bench, read, column, kind, binary, reader, dest)
            for column, kind, binary in bench.in_turn(found, index):
                if kind == "rangefs":
                    extra[column].append(kill_resume(bench, read, column, binary, reader, dest))
        offline(bench, read, found, reader, objects)
        bench.tables.append(read)
        # The ratios against the peers of this run, for this build.
        ours = builds[0]
        first = f"mount + 1st `ls -l` of {args.s3_objects:,} objects, s"
        copy = f"cold `cp` of {size // MiB} MiB, MiB/s"
        for column in columns[len(builds):] + ["curl"]:
            for label, table, row in (("mount + 1st ls -l time", listed, first), ("cold cp speed", read, copy)):
                mine, theirs = table.value(row, ours), table.value(row, column)
                if mine and theirs:
                    bench.results[f"s3: {label} vs {column} (ratio)"] = (mine / theirs, "", 0, None)
        mine, floor = listed.value(first, ours), listed.value(first, ALONE)
        if mine and floor:
            bench.results[f"s3: mount + 1st ls -l time vs {ALONE} (ratio)"] = (mine / floor, "", 0, None)
        bench.results["s3: kill -9 at 40%: MiB refetched, worst"] = (max(extra[ours]), "", 0, "<=32")
    finally:
        lister.stop()
        if reader is not None:
            reader.stop()
