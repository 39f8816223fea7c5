"""Checks that capproxy emulates the link it was asked for, before the wan scenario measures anything through it.

Only lower bounds on time are checked (a request on a new connection takes at least 2 round trips, one on a kept
connection at least 1, a transfer at least its size over the connection's cap), and an upper bound on the total
rate: each holds however loaded the machine is. A proxy that forgot the delay or the cap fails them.
"""
import http.client, threading, time

SLACK = 0.95  # timers may fire a millisecond early: 5% under a bound is still the bound


def fetch(port, path, first=None):
    """(seconds for a new connection's request, seconds for a second request on it, bytes) for `path`; `first`
    is a Range for the second request."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        start = time.perf_counter()
        connection.request("GET", path, headers={"Range": "bytes=0-0"})
        connection.getresponse().read()
        new = time.perf_counter() - start
        start = time.perf_counter()
        connection.request("GET", path, headers={"Range": first} if first else {})
        body = connection.getresponse().read()
        return new, time.perf_counter() - start, len(body)
    finally:
        connection.close()


def check(port, path, size, rtt, rate, total):
    """[(label, ok)] for the link on `port`; `path` names a file of `size` bytes (at least 1 MiB) at the origin."""
    chunk = min(size, 1 << 20)
    new, kept, got = fetch(port, path, f"bytes=0-{chunk - 1}")
    checks = [(f"capproxy: a request on a new connection takes 2 round trips ({new * 1000:.0f} ms, "
               f"RTT {rtt * 1000:.0f} ms)", new >= 2 * rtt * SLACK),
              (f"capproxy: {chunk} bytes on one connection at most at its cap ({chunk / kept / 2**20:.2f} MiB/s)",
               got == chunk and kept >= (rtt + chunk / rate) * SLACK)]
    # Enough connections to exceed the total cap: together they stay under it.
    count = -(-total // rate) + 2
    results = []

    def one():
        results.append(fetch(port, path, f"bytes=0-{chunk - 1}"))

    threads = [threading.Thread(target=one) for _ in range(count)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    checks.append((f"capproxy: {count} connections together at most at the total cap "
                   f"({count * chunk / seconds / 2**20:.1f} MiB/s)",
                   all(r[2] == chunk for r in results) and seconds >= (2 * rtt + count * chunk / total) * SLACK))
    return checks
