#!/usr/bin/env python3
"""A TCP proxy that caps every connection's download rate, like a mirror or CDN that throttles per connection.

usage: capproxy.py LISTEN_PORT UPSTREAM_PORT BYTES_PER_SECOND

Each client connection gets its own token bucket (burst 256 KiB), whatever number of HTTP requests it carries:
nginx's limit_rate would reset with every request on a kept-alive connection, which is not what a throttled
link does. Upstream traffic (the requests) is not limited.
"""
import asyncio, sys, time

BURST = 256 * 1024


async def pump(reader, writer, rate):
    tokens, last = float(BURST), time.monotonic()
    try:
        while data := await reader.read(65536):
            if rate:
                now = time.monotonic()
                tokens = min(BURST, tokens + (now - last) * rate)
                last = now
                if tokens < len(data):
                    await asyncio.sleep((len(data) - tokens) / rate)
                    now = time.monotonic()
                    tokens = min(BURST, tokens + (now - last) * rate)
                    last = now
                tokens -= len(data)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def serve(listen_port, upstream_port, rate):
    async def handle(client_reader, client_writer):
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(pump(client_reader, upstream_writer, 0), pump(upstream_reader, client_writer, rate))

    server = await asyncio.start_server(handle, "127.0.0.1", listen_port, backlog=512)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])))
