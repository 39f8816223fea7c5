#!/usr/bin/env python3
"""A TCP proxy that emulates a far link: a round-trip time, a rate cap per connection and an optional total cap.

usage: capproxy.py LISTEN_PORT UPSTREAM_PORT BYTES_PER_SECOND [--rtt MS] [--total BYTES_PER_SECOND]

How the link is modelled, per connection:
- Each direction is a delay line that keeps byte order: a chunk read at t is released at t + rtt/2 (after the rate
  caps let it through, downstream), so a request and its answer cost one round trip.
- A new connection pays the TCP handshake too: its first request leaves one round trip after the accept, as if the
  client's connect had taken that long. (On loopback the client's connect returns at once, so the time is added to
  the request instead, which is where a client waits for it anyway.)
- Downstream (origin to client) goes through a token bucket per connection (the connection's rate, as a mirror or CDN
  throttles each connection; nginx's limit_rate would reset with every request on a kept-alive connection) and,
  with --total, through one shared bucket (the link's capacity, shared by all connections in the order they send).
  Bytes are released progressively, in slices of a few milliseconds, so the first byte of a big chunk is not held
  until its last one passed. Upstream (the requests) is delayed but not capped.
- The proxy reads from the origin only as fast as the link drains and holds a bounded amount for a client that
  does not read, so it behaves like a link with a window, not like a buffer that swallows the file.

Without --rtt and --total it is the old per-connection cap (burst 256 KiB), as the `capped` and `mirrors`
scenarios use it. Written for asyncio in one thread: at 25 MiB/s it costs a few percent of a core.
"""
import argparse, asyncio, collections, socket

READ = 64 * 1024  # bytes read from a socket at once: big enough to be cheap, small enough to pace
SLICE_SECONDS = 0.004  # a chunk is released in slices of about this much link time
MIN_SLICE = 8 * 1024
LEAD_SECONDS = 0.010  # the next chunk is read this long before the link has passed the last one
UPSTREAM_BUFFER = 256 * 1024
HOLD_SECONDS = 0.25  # a client that does not read: at most this much link time is held for it (and 1 MiB)


class Bucket:
    """A token bucket kept as a virtual clock: `reserve` returns when n bytes starting at `start` have passed."""

    def __init__(self, rate, burst):
        self.rate, self.burst_seconds = rate, burst / rate
        self.free_at = 0.0

    def reserve(self, n, start):
        begin = max(self.free_at, start - self.burst_seconds)
        self.free_at = begin + n / self.rate
        return max(self.free_at, start)


class DelayLine:
    """One direction of one connection: chunks with their release times, written in order by `drain_to`."""

    def __init__(self, first_release):
        self.items = collections.deque()  # (release time, bytes or None for end of stream)
        self.held = 0
        self.last_release = first_release
        self.wakeup = asyncio.Event()
        self.room = asyncio.Event()
        self.room.set()

    def put(self, release, data):
        release = max(release, self.last_release)  # order is kept: nothing overtakes what was read before it
        self.last_release = release
        self.items.append((release, data))
        if data:
            self.held += len(data)
        self.wakeup.set()

    async def drain_to(self, writer, limit):
        """Writes each chunk at its release time, coalescing those that are due; closes at the end of stream."""
        loop = asyncio.get_running_loop()
        try:
            while True:
                while not self.items:
                    self.wakeup.clear()
                    await self.wakeup.wait()
                release, data = self.items[0]
                wait = release - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                now = loop.time()
                parts = []
                while self.items and self.items[0][0] <= now and self.items[0][1] is not None:
                    parts.append(self.items.popleft()[1])
                if parts:
                    payload = b"".join(parts)
                    self.held -= len(payload)
                    if self.held < limit:
                        self.room.set()
                    writer.write(payload)
                    await writer.drain()
                elif self.items and self.items[0][1] is None:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
        except (ConnectionError, OSError):
            pass
        finally:
            self.room.set()


class Link:
    def __init__(self, rate, rtt, total):
        self.rate, self.half = rate, rtt / 2
        self.rtt = rtt
        self.emulated = rtt > 0 or total is not None
        self.total = Bucket(total, READ) if total else None

    async def pump(self, reader, writer, line, bucket, hold):
        """Reads `reader` and feeds `line`, paced by `bucket` (and the total bucket when given)."""
        loop = asyncio.get_running_loop()
        total = self.total if bucket else None
        drain = asyncio.ensure_future(line.drain_to(writer, hold))
        try:
            while not drain.done():
                data = await reader.read(READ)
                if not data:
                    break
                now = loop.time()
                if bucket is None:
                    line.put(now + self.half, data)
                    continue
                finish = bucket.reserve(len(data), now)
                if total:
                    finish = max(finish, total.reserve(len(data), finish - len(data) / bucket.rate))
                start = max(now, finish - len(data) / min(bucket.rate, total.rate if total else bucket.rate))
                slice_size = max(MIN_SLICE, int(bucket.rate * SLICE_SECONDS))
                count = max(1, -(-len(data) // slice_size))
                for index in range(count):
                    piece = data[index * slice_size:(index + 1) * slice_size]
                    line.put(start + (finish - start) * (index + 1) / count + self.half, piece)
                # Read on only when the link has nearly passed this chunk (a little early, so that a late wake-up
                # does not leave the link idle), and while the client keeps up.
                if finish - LEAD_SECONDS > now:
                    await asyncio.sleep(finish - LEAD_SECONDS - now)
                while line.held >= hold and not drain.done():
                    line.room.clear()
                    await line.room.wait()
        except (ConnectionError, OSError):
            pass
        line.put(loop.time() + self.half, None)
        await drain
        writer.close()

    async def handle(self, client_reader, client_writer, upstream_port):
        loop = asyncio.get_running_loop()
        accepted = loop.time()
        upstream = socket.socket()
        if self.emulated:
            # A small receive buffer from the origin: what the origin has sent is then about what crossed the
            # link, not several MiB more parked in the kernel (the bench counts bytes from the origin's log).
            upstream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, UPSTREAM_BUFFER)
        upstream.setblocking(False)
        try:
            await loop.sock_connect(upstream, ("127.0.0.1", upstream_port))
            upstream_reader, upstream_writer = await asyncio.open_connection(sock=upstream, limit=4 * READ)
        except OSError:
            upstream.close()
            client_writer.close()
            return
        # The handshake's round trip: the first request reaches the origin 1.5 round trips after the accept.
        up = DelayLine(accepted + self.rtt + self.half if self.rtt else 0.0)
        down = DelayLine(0.0)
        if self.emulated:
            bucket = Bucket(self.rate or 1e12, MIN_SLICE)
            hold = max(1 << 20, int(self.rate * HOLD_SECONDS)) if self.rate else 1 << 20
        else:
            bucket = Bucket(self.rate, 256 * 1024) if self.rate else None
            hold = 1 << 20
        await asyncio.gather(self.pump(client_reader, upstream_writer, up, None, 1 << 20),
                             self.pump(upstream_reader, client_writer, down, bucket, hold))


async def serve(listen_port, upstream_port, link):
    server = await asyncio.start_server(lambda r, w: link.handle(r, w, upstream_port), "127.0.0.1", listen_port,
                                        backlog=512, limit=4 * READ)
    async with server:
        await server.serve_forever()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("listen_port", type=int)
    parser.add_argument("upstream_port", type=int)
    parser.add_argument("rate", type=int, help="bytes per second per connection, downstream (0: no cap)")
    parser.add_argument("--rtt", type=float, default=0, metavar="MS", help="round-trip time in milliseconds")
    parser.add_argument("--total", type=int, default=None, metavar="BYTES_PER_SECOND",
                        help="cap on all connections together, downstream")
    args = parser.parse_args()
    asyncio.run(serve(args.listen_port, args.upstream_port, Link(args.rate, args.rtt / 1000, args.total)))


if __name__ == "__main__":
    main()
