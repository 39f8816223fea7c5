"""The `scan` scenario (scan safety): ffprobe of every movie in a mounted tree must cost the origin little more than
the probe reads, while a `cp` or a 30% sequential read still gets its movie completed; httpdirfs and a baseline
build beside. It takes the run's `Bench` (bench.py) and adds its rows to its results.
"""
import os, shutil, subprocess, time

import harness, mounts
from harness import MiB


def make_movies(bench):
    """`args.movies` MP4 movies in www/movies/, each 10 s of encoded video looped `args.loops` + 1 times (about
    14 MiB per loop; 8 loops give 112 MiB), with the index (moov) at the end, as a camera or ffmpeg writes it."""
    folder = os.path.join(bench.www, "movies")
    os.makedirs(folder, exist_ok=True)
    short = os.path.join(bench.work, "short.mp4")
    harness.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=25", "-f", "lavfi",
         "-i", "sine=frequency=440:sample_rate=44100", "-t", "10", "-c:v", "mpeg4", "-q:v", "2", "-c:a", "aac",
         short])
    names = []
    for index in range(bench.args.movies):
        name = f"movies/m{index:02d}.mp4"
        harness.run(["ffmpeg", "-v", "error", "-y", "-stream_loop", str(bench.args.loops), "-i", short, "-c", "copy",
             "-metadata", f"title=movie {index}", os.path.join(bench.www, name)])
        names.append(name)
    return names


def scan(bench):
    """Scan safety: ffprobe of every movie in a mounted tree, bytes the origin sent per movie counted after the
    fill had 10 s to run (httpdirfs and a baseline build beside it); then a cp of one movie and a 30% sequential
    read of another must get completed."""
    names = make_movies(bench)
    sizes = {name: os.path.getsize(os.path.join(bench.www, name)) for name in names}
    per_movie = {}

    def probe_all(paths):
        for path in paths:
            probe = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=codec_name", "-of",
                                    "csv=p=0", path], capture_output=True, text=True)
            bench.checks.append((f"ffprobe of {os.path.basename(path)}", "mpeg4" in probe.stdout))
        time.sleep(bench.args.scan_wait)

    # rangefs mounts the directory as a tree; a baseline that cannot do trees mounts the same URLs one by one.
    for label, binary in bench.builds():
        cache = bench.fresh_cache()
        tree = label == "rangefs"
        sources = [bench.nginx.url("movies/")] if tree else [bench.nginx.url(n) for n in names]
        mount = mounts.Mount(binary, bench.work, sources, cache)
        bench.nginx.clear_log()
        probe_all([os.path.join(mount.point, os.path.basename(n)) for n in names])
        per_movie[label] = [bench.nginx.direct_bytes(n) / MiB for n in names]
        if tree:
            # A use: a cp completes its movie, and so does a 30% sequential read of another.
            copied, played = names[0], names[1]
            dest = os.path.join(bench.work, "movie.out")
            harness.run(["cp", mount.path(os.path.basename(copied)), dest])
            same = harness.sha256(dest) == harness.sha256(os.path.join(bench.www, copied))
            bench.checks.append(("cp of a movie in the tree", same))
            os.remove(dest)
            path = mount.path(os.path.basename(played))
            harness.run(["dd", f"if={path}", "of=/dev/null", "bs=1M", f"count={sizes[played] * 3 // 10 // MiB}"],
                stderr=subprocess.DEVNULL)
            started = time.time()
            complete = mount.wait_complete(os.path.basename(played), timeout=120)
            bench.checks.append(("a 30% sequential read gets its movie completed", complete))
            bench.results["  30% read: seconds until completed"] = (time.time() - started, "", 0, None)
        mount.close()
        shutil.rmtree(cache)
    peer_cache = bench.fresh_cache()
    peer = mounts.PeerMount(bench.work, f"http://127.0.0.1:{bench.nginx.direct}/", peer_cache)
    bench.nginx.clear_log()
    probe_all([peer.path(n) for n in names])
    per_movie["httpdirfs"] = [bench.nginx.direct_bytes(n) / MiB for n in names]
    peer.close()
    shutil.rmtree(peer_cache, ignore_errors=True)
    harness.log(f"  {len(names)} movies of {min(sizes.values()) / MiB:.0f} MiB: MiB sent per movie, most: "
        + ", ".join(f"{label} {max(values):.1f}" for label, values in per_movie.items()))
    bench.results["scan: ffprobe MiB sent per movie, most"] = (max(per_movie["rangefs"]), "", 0, "<=8")
    for label in ("baseline", "httpdirfs"):
        if label in per_movie:
            bench.results[f"  {label}: MiB sent per movie, most"] = (max(per_movie[label]), "", 0, None)
