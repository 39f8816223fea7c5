#!/usr/bin/env bash
# Installs rangefs: the binary in PREFIX/bin, the mount(8) helper in SBINDIR, and the systemd unit template in
# UNITDIR. Builds the release binary first unless --binary names one.
#   mount-scripts/install.sh [--prefix /usr/local] [--sbindir /sbin] [--unitdir /etc/systemd/system]
#                            [--binary PATH] [--no-systemd]
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=/usr/local sbindir=/sbin unitdir=/etc/systemd/system binary="" systemd=1
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$2; shift 2 ;;
        --sbindir) sbindir=$2; shift 2 ;;
        --unitdir) unitdir=$2; shift 2 ;;
        --binary) binary=$2; shift 2 ;;
        --no-systemd) systemd=0; shift ;;
        *) echo "install.sh: unknown option $1; see the comment at the top of this script" >&2; exit 64 ;;
    esac
done
if [ -z "$binary" ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
    swift build -c release >/dev/null
    binary="$(swift build -c release --show-bin-path)/rangefs"
fi
install -d "$prefix/bin" "$sbindir"
install -m 0755 "$binary" "$prefix/bin/rangefs"
sed "s|@RANGEFS@|$prefix/bin/rangefs|" mount-scripts/mount.fuse.rangefs > "$sbindir/mount.fuse.rangefs"
chmod 0755 "$sbindir/mount.fuse.rangefs"
echo "installed $prefix/bin/rangefs and $sbindir/mount.fuse.rangefs"
if [ "$systemd" = 1 ]; then
    install -d "$unitdir"
    sed "s|@RANGEFS@|$prefix/bin/rangefs|" mount-scripts/systemd/rangefs@.service > "$unitdir/rangefs@.service"
    echo "installed $unitdir/rangefs@.service (see mount-scripts/systemd/ for a .mount unit and an fstab line)"
fi
