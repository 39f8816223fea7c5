#!/usr/bin/env bash
# Builds the Debian package rangefs_<version>_amd64.deb into OUTDIR (default: the current folder), from this checkout:
# the release binary with the Swift runtime linked in (--static-swift-stdlib) and stripped, so it runs without a
# Swift toolchain; the mount(8) helper; the systemd unit template; the manual pages (swift-argument-parser's
# generator); bash, zsh and fish completions; the copyright file. Depends: what dpkg-shlibdeps finds the binary
# links, and fuse3 (fusermount3). The version is Sources/rangefs/Version.swift's.
#   mount-scripts/package.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
out=$(realpath "${1:-.}")
# The maintainer: this checkout's last committer (a package needs a mail address with a real host).
maintainer=$(git log -1 --format='%cn <%ce>' 2>/dev/null || true)
[ -n "$maintainer" ] || maintainer="rangefs maintainers <rangefs@example.org>"
version=$(sed -n 's/^let rangefsVersion = "\(.*\)"$/\1/p' Sources/rangefs/Version.swift)
[ -n "$version" ] || { echo "package.sh: no version in Sources/rangefs/Version.swift" >&2; exit 1; }
# Its own build folders: the static build must not replace the usual release build's objects (nor take the lock
# that `swift build` and `swift test` hold on .build), and the manual generator's plugin, which builds the tool
# again without the static runtime, must not relink the binary packaged here.
scratch=.build/package
binary="$(swift build -c release --static-swift-stdlib --scratch-path "$scratch" --show-bin-path)/rangefs"
rm -f "$binary"  # linked by this build, with these flags, whatever an earlier one left
swift build -c release --product rangefs --static-swift-stdlib --scratch-path "$scratch" >&2

if ldd "$binary" | grep -q 'libswift\|libFoundation\|libdispatch'; then
    echo "package.sh: $binary loads the Swift runtime; it would not run without a toolchain" >&2
    exit 1
fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/root"
install -D -m 0755 "$binary" "$root/usr/bin/rangefs"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/rangefs"
install -d "$root/usr/sbin" "$root/lib/systemd/system"
sed "s|@RANGEFS@|/usr/bin/rangefs|" mount-scripts/mount.fuse.rangefs > "$root/usr/sbin/mount.fuse.rangefs"
chmod 0755 "$root/usr/sbin/mount.fuse.rangefs"
sed "s|@RANGEFS@|/usr/bin/rangefs|" mount-scripts/systemd/rangefs@.service > "$root/lib/systemd/system/rangefs@.service"
chmod 0644 "$root/lib/systemd/system/rangefs@.service"

# Manual pages: rangefs(1) written by hand (mount-scripts/debian/rangefs.1: examples, files, SEE ALSO), and one
# generated per subcommand.
man="$stage/man"
mkdir -p "$man" "$root/usr/share/man/man1"
swift package --scratch-path "$scratch-manual" --allow-writing-to-directory "$man" generate-manual --multi-page --date "$(date -u -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)" +%Y-%m-%d)" --output-directory "$man" >&2
for page in "$man"/*.1; do
    name=$(basename "$page" .1)  # rangefs, rangefs.status, ...
    if [ "$name" = rangefs ]; then
        cp mount-scripts/debian/rangefs.1 "$page"
    else
        # The generator names a subcommand "rangefs status" in NAME; whatis (man -k, lintian's bad-whatis-entry)
        # wants one word there: the page's own name, and an alias as rangefs.ALIAS (`umount` alone would pose as
        # umount(8) in man -k). The synopsis still shows the command as it is typed.
        command=${name//./ }
        sed -i -e "0,/^\.Nm \"$command\"\( ,\)\?\$/s//.Nm $name\1/" \
            -e "/^\.Sh NAME\$/,/^\.Nd /s/^\.Nm \([A-Za-z][A-Za-z0-9-]*\)\$/.Nm rangefs.\1/" \
            -e "s/^\.Nm\$/.Nm \"$command\"/" \
            -e '/^\.Sh NAME$/,/^\.Sh /s/^\.Nd "\(.*\)"$/.Nd \1/' "$page"
        # (The last: the generator quotes the one-line description, and whatis would show the quotes.)
    fi
    gzip -9n < "$page" > "$root/usr/share/man/man1/$name.1.gz"
done
install -d "$root/usr/share/man/man8"
gzip -9n < mount-scripts/debian/mount.fuse.rangefs.8 > "$root/usr/share/man/man8/mount.fuse.rangefs.8.gz"
chmod 0644 "$root"/usr/share/man/man1/* "$root"/usr/share/man/man8/*

# Completions, from the binary itself.
install -d "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
    "$root/usr/share/fish/vendor_completions.d"
"$root/usr/bin/rangefs" --generate-completion-script bash | sed '1{/^#!/d}' \
    > "$root/usr/share/bash-completion/completions/rangefs"
"$root/usr/bin/rangefs" --generate-completion-script zsh > "$root/usr/share/zsh/vendor-completions/_rangefs"
"$root/usr/bin/rangefs" --generate-completion-script fish > "$root/usr/share/fish/vendor_completions.d/rangefs.fish"
chmod 0644 "$root"/usr/share/bash-completion/completions/* "$root"/usr/share/zsh/vendor-completions/* \
    "$root"/usr/share/fish/vendor_completions.d/*

# Documentation: the copyright file and a changelog (changelog.gz: the version has no Debian revision, a native
# package).
doc="$root/usr/share/doc/rangefs"
install -d "$doc"
install -m 0644 mount-scripts/debian/copyright "$doc/copyright"
printf 'rangefs (%s) unstable; urgency=medium\n\n  * Built from %s.\n\n -- %s  %s\n' "$version" \
    "$(git rev-parse --short HEAD 2>/dev/null || echo 'a source tree')" "$maintainer" \
    "$(date -R -u -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)")" | gzip -9n > "$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"

# Depends: the libraries the binary links, as dpkg-shlibdeps names their packages.
mkdir -p "$stage/shlibs/debian"
printf 'Source: rangefs\n\nPackage: rangefs\nArchitecture: any\n' > "$stage/shlibs/debian/control"
depends=$(cd "$stage/shlibs" && dpkg-shlibdeps -O "$root/usr/bin/rangefs" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
install -d "$root/DEBIAN"
cat > "$root/DEBIAN/control" <<CONTROL
Package: rangefs
Version: $version
Architecture: amd64
Maintainer: $maintainer
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: fuse3, $depends
Section: utils
Priority: optional
Description: mount HTTP(S) URLs as files, cached block by block
 rangefs is a FUSE file system in which remote HTTP(S) URLs appear as
 ordinary read-only files. Each read becomes a Range request for the blocks
 it touches; fetched blocks land in a local cache that survives unmounts,
 restarts, crashes and an origin that is down, and a copy interrupted at 40%
 resumes at 40%. Web directories, list files, mirrors and fstab mounts are
 supported.
CONTROL
deb="$out/rangefs_${version}_amd64.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >&2
echo "$deb"
