"""The benchmark's origin: nginx on 127.0.0.1 serving the work folder's files directly, over TLS and as paced
mirrors, with capproxy.py in front where a link is capped; its access log is how the scenarios count what was sent."""
import os, socket, subprocess, sys, time

from harness import MiB, ROOT, free_port, run


class Nginx:
    """A direct origin (nginx), and a proxy in front of it that caps each connection at 8 MiB/s (capproxy.py)."""

    # The mirrors scenario: three more servers of the same files, each behind its own pacing proxy, unequal.
    MIRROR_RATES = (4 * MiB, 8 * MiB, 16 * MiB)

    def __init__(self, work, www):
        self.work, self.direct, self.capped = work, free_port(), free_port()
        self.mirror_direct = [free_port() for _ in Nginx.MIRROR_RATES]
        self.mirror_capped = [free_port() for _ in Nginx.MIRROR_RATES]
        # The same files over TLS, HTTP/2 offered.
        self.tls = free_port()
        logs = os.path.join(work, "logs")
        os.makedirs(logs, exist_ok=True)
        self.access_log = os.path.join(logs, "access.log")
        self.tls_log = os.path.join(logs, "tls.log")
        self.certificate, key = os.path.join(work, "tls.pem"), os.path.join(work, "tls.key")
        run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
             "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", self.certificate],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        tls = f"ssl_certificate {self.certificate}; ssl_certificate_key {key}; root {www}; keepalive_requests 100000;"
        tls += f" access_log {self.tls_log} protocols;"
        conf = os.path.join(work, "nginx.conf")
        temp = " ".join(f"{t}_temp_path {logs};" for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        with open(conf, "w") as f:
            f.write(f"""daemon off; worker_processes 2; user root; error_log {logs}/error.log; pid {logs}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
  # The small and wan scenarios count connections, requests per connection and bytes with headers (fields 6-9);
  # the fields before them are what the older scenarios read.
  log_format counted '$server_port|$status|$body_bytes_sent|$http_range|$uri|$connection|$connection_requests|'
                     '$bytes_sent|$request_method';
  access_log {self.access_log} counted;
  {temp}
  # autoindex: httpdirfs mounts a directory listing. Accept-Ranges on every response: httpdirfs 1.2.5 refuses a
  # 206 without it ("does not support HTTP range requests"), and stock nginx leaves it out of 206 responses.
  server {{ listen 127.0.0.1:{self.direct}; root {www}; keepalive_requests 100000; autoindex on;
           add_header Accept-Ranges bytes;
           # The library scenario: each folder of files listed as nginx's JSON too.
           location ~ ^/json/(?<folder>[^/]+)/(?<rest>.*)$ {{ alias {www}/library/$folder/$rest; autoindex on;
                                                            autoindex_format json; }} }}
  {" ".join(f"server {{ listen 127.0.0.1:{port}; root {www}; keepalive_requests 100000; }}"
            for port in self.mirror_direct)}
  log_format protocols '$server_port|$server_protocol|$body_bytes_sent';
  server {{ listen 127.0.0.1:{self.tls} ssl http2; {tls} }}
}}
""")
        self.process = subprocess.Popen(["/usr/sbin/nginx", "-c", conf, "-p", work],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.proxy = subprocess.Popen([sys.executable, os.path.join(ROOT, "bench", "capproxy.py"), str(self.capped),
                                       str(self.direct), str(8 * MiB)])
        self.mirror_proxies = [
            subprocess.Popen([sys.executable, os.path.join(ROOT, "bench", "capproxy.py"), str(listen), str(port),
                              str(rate)])
            for listen, port, rate in zip(self.mirror_capped, self.mirror_direct, Nginx.MIRROR_RATES)]
        for port in (self.direct, self.capped, self.tls, *self.mirror_capped):
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), 0.1).close()
                    break
                except OSError:
                    time.sleep(0.05)

    def url(self, name, capped=False):
        return f"http://127.0.0.1:{self.capped if capped else self.direct}/{name}"

    def mirror_urls(self, name):
        """The URLs of `name` on the three paced mirrors."""
        return [f"http://127.0.0.1:{port}/{name}" for port in self.mirror_capped]

    def mirror_bytes(self, name):
        """Body bytes each mirror sent for `name` since the log was cleared, not counting 1-byte probes."""
        sent = {port: 0 for port in self.mirror_direct}
        with open(self.access_log) as f:
            for line in f:
                port, status, size, rng, uri = line.rstrip("\n").split("|")[:5]
                if int(port) in sent and uri == "/" + name and rng != "bytes=0-0":
                    sent[int(port)] += int(size)
        return [sent[port] for port in self.mirror_direct]

    def tls_url(self, name):
        return f"https://127.0.0.1:{self.tls}/{name}"

    def tls_protocols(self):
        """Requests per protocol in the TLS log since it was last cleared, e.g. {'HTTP/2.0': 260}."""
        counts = {}
        with open(self.tls_log) as f:
            for line in f:
                protocol = line.split("|")[1]
                counts[protocol] = counts.get(protocol, 0) + 1
        return counts

    def clear_log(self):
        open(self.access_log, "w").close()

    def direct_bytes(self, name):
        """Body bytes the direct origin sent for `name`, not counting 1-byte probes."""
        total = 0
        with open(self.access_log) as f:
            for line in f:
                port, status, sent, rng, uri = line.rstrip("\n").split("|")[:5]
                if port == str(self.direct) and uri == "/" + name and rng != "bytes=0-0":
                    total += int(sent)
        return total

    def pids(self):
        """The nginx master and its workers."""
        pids = [self.process.pid]
        try:
            with open(f"/proc/{self.process.pid}/task/{self.process.pid}/children") as f:
                pids += [int(p) for p in f.read().split()]
        except OSError:
            pass
        return pids

    def stop(self):
        for process in (self.proxy, *self.mirror_proxies, self.process):
            process.terminate()
            process.wait(timeout=10)

