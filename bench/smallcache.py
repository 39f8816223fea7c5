"""Where the small scenario puts its caches, and what a cache and the origin's log say after a read (issue 46).

The caches go on a fresh journaled ext4 image (as installs have: each inode a cache makes costs a journal
transaction) and on the work folder's file system (`/` here, ext4 without a journal), the same table for each.
What a cache holds is counted from the disk (inodes and allocated bytes under its folder), and what a read asked
of the origin from nginx's access log, never from rangefs's own counters.
"""
import contextlib, os, shutil, subprocess, tempfile, time

import harness

# The image holds one tool's cache at a time (3,000 files of at most 60 KB, ~90 MB, up to 5 inodes a file on
# today's main) with room to spare; it is a sparse file, so its size costs nothing until written.
IMAGE_BYTES = 2 << 30


class NoImage(Exception):
    """The ext4 image could not be made or mounted (not root, no loop device, no mkfs.ext4)."""


@contextlib.contextmanager
def ext4_image(work):
    """A fresh journaled ext4 file system (`mkfs.ext4 -q` on a file, loop-mounted) in `work`: yields its folder,
    then unmounts it and removes the image. Needs root and a free loop device, else raises NoImage."""
    image = os.path.join(work, "caches.ext4")
    point = tempfile.mkdtemp(dir=work, prefix="ext4-")
    # Allocated whole, and made with its inode tables and journal written: a sparse image, or one that ext4 goes on
    # initialising in the background, made whichever build wrote into it first pay for that (a cold read of 3,000
    # files 0.3-0.4 s slower in the first column of every run, whichever build was there).
    with open(image, "wb") as f:
        os.posix_fallocate(f.fileno(), 0, IMAGE_BYTES)
    mounted = False
    try:
        for command in (["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", image],
                        ["mount", "-o", "loop", image, point]):
            done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if done.returncode != 0:
                raise NoImage(f"no caches on an ext4 image: `{' '.join(command)}` failed "
                              f"({done.stderr.strip() or done.returncode}); run as root with a free loop device, "
                              "or pass --small-caches work")
        mounted = True
        yield point
    finally:
        if mounted:
            subprocess.run(["umount", point])
        os.rmdir(point)
        os.remove(image)


@contextlib.contextmanager
def cache_location(bench, where):
    """The folder the caches of one pass go in: `image` (a fresh ext4 image) or `work` (--cache-root if given, else
    the work folder). Yields (folder, its description for the table's title)."""
    if where == "image":
        with ext4_image(bench.work) as point:
            yield point, harness.describe_filesystem(point) + ", a fresh image"
    else:
        folder = bench.args.cache_root or bench.work
        yield folder, harness.describe_filesystem(folder)


def footprint(folder):
    """(inodes, bytes allocated on disk) under `folder`, the folder itself included: every file, folder and link
    counted once (a hard link is one inode), `du`'s way."""
    seen, allocated = set(), 0
    for root, folders, files in os.walk(folder):
        for name in [None, *folders, *files]:
            path = root if name is None else os.path.join(root, name)
            try:
                status = os.lstat(path)
            except FileNotFoundError:
                continue
            if status.st_ino in seen:
                continue
            seen.add(status.st_ino)
            allocated += status.st_blocks * 512
    return len(seen), allocated


def fresh_cache(folder):
    """An empty cache folder in `folder`, removed by the caller (tools.close)."""
    return tempfile.mkdtemp(dir=folder, prefix="cache-")


def log_offset(bench):
    """Where nginx's access log ends now: the requests after it are the ones `file_requests` counts."""
    return os.path.getsize(bench.nginx.access_log)


def file_requests(bench, offset, prefix):
    """Requests nginx logged since `offset` for files under `prefix` (e.g. /small/), not counting the listings
    (a URI ending in /)."""
    with open(bench.nginx.access_log) as f:
        f.seek(offset)
        uris = [line.split("|")[4] for line in f if line.count("|") >= 4]
    return sum(1 for uri in uris if uri.startswith(prefix) and not uri.endswith("/"))


def settled_file_requests(bench, offset, prefix, quiet=1.5, limit=30):
    """`file_requests` once the log has not grown for `quiet` seconds (at most `limit` seconds): a daemon may still
    send background checks after the reader is done, and those count too."""
    deadline = time.time() + limit
    size = os.path.getsize(bench.nginx.access_log)
    still_since = time.time()
    while time.time() < deadline and time.time() - still_since < quiet:
        time.sleep(0.1)
        now = os.path.getsize(bench.nginx.access_log)
        if now != size:
            size, still_since = now, time.time()
    return file_requests(bench, offset, prefix)


def remove(cache):
    """Removes a cache no mount holds (one whose mount failed)."""
    shutil.rmtree(cache, ignore_errors=True)
