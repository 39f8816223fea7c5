#!/usr/bin/env bash
# The rangefs demo, offline: build, start a local nginx serving a 256 MiB sample file, mount its URL, copy part of
# it and then all of it out of the mount, showing progress with ls -ls and getfattr, and unmount.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

bash mount-scripts/install-deps.sh
echo "== building rangefs (release)"
swift build -c release 2>&1 | tail -n 1
rangefs="$(swift build -c release --show-bin-path)/rangefs"

demo="$(mktemp -d /tmp/rangefs-demo-XXXXXX)"
mkdir -p "$demo/www" "$demo/logs" "$demo/mnt"
nginx_pid=""
cleanup() {
    fusermount3 -uz "$demo/mnt" 2>/dev/null || true
    [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null || true
    sleep 0.3
    rm -rf "$demo"
}
trap cleanup EXIT

# A port the kernel says is free now; if another program takes it before nginx does, try another.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

write_config() {
cat > "$demo/nginx.conf" <<CONF
daemon off;
worker_processes 1;
user root;
error_log $demo/logs/error.log;
pid $demo/logs/nginx.pid;
events { worker_connections 128; }
http {
    access_log $demo/logs/access.log;
    client_body_temp_path $demo/logs;
    proxy_temp_path $demo/logs;
    fastcgi_temp_path $demo/logs;
    uwsgi_temp_path $demo/logs;
    scgi_temp_path $demo/logs;
    server { listen 127.0.0.1:$port; root $demo/www; }
}
CONF
}

echo "== making a 256 MiB sample file and serving it with nginx"
head -c $((256 << 20)) /dev/urandom > "$demo/www/sample.bin"
serving=""
for _ in 1 2 3 4 5; do
    port="$(free_port)"
    write_config
    /usr/sbin/nginx -c "$demo/nginx.conf" -p "$demo" &
    nginx_pid=$!
    for _ in $(seq 50); do
        if curl -s -o /dev/null "http://127.0.0.1:$port/sample.bin" -r 0-0; then serving=yes; break; fi
        kill -0 "$nginx_pid" 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$serving" ] && break
    kill "$nginx_pid" 2>/dev/null || true
    wait "$nginx_pid" 2>/dev/null || true
    nginx_pid=""
done
if [ -z "$serving" ]; then
    echo "demo: nginx did not start (see $demo/logs/error.log)" >&2
    exit 1
fi
echo "== serving http://127.0.0.1:$port/sample.bin"

echo "== rangefs mount $demo/mnt http://127.0.0.1:$port/sample.bin"
"$rangefs" mount "$demo/mnt" "http://127.0.0.1:$port/sample.bin" --cache "$demo/cache"
ls -ls "$demo/mnt"

echo "== reading the first 64 MiB; past 16 MiB read, the file is completed in the background (--prefetch use)"
head -c $((64 << 20)) "$demo/mnt/sample.bin" > /dev/null
ls -ls "$demo/mnt"
getfattr -d "$demo/mnt/sample.bin"

echo "== cp of the whole file out of the mount"
time cp "$demo/mnt/sample.bin" "$demo/copy.bin"
ls -ls "$demo/mnt"
du -h "$demo/mnt/sample.bin"
if [ "$(sha256sum < "$demo/www/sample.bin")" = "$(sha256sum < "$demo/copy.bin")" ]; then
    echo "== the copy is byte-for-byte identical to the origin"
else
    echo "== MISMATCH between the copy and the origin" >&2
    exit 1
fi

echo "== rangefs unmount $demo/mnt"
"$rangefs" unmount "$demo/mnt"
