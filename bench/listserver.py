#!/usr/bin/env python3
"""A purpose-written S3 server that answers ListObjectsV2 from memory (issue 46, acceptance 4): one bucket whose
prefix PREFIX holds COUNT objects named `photo-NNNNNNN.jpg` (1 byte each, one date, an MD5-like ETag each), made
up page by page from the index in the continuation token, so a million keys cost the server nothing to hold. No
signature is checked: it stands for a store whose listing is as fast as the client can page.

    listserver.py PORT BUCKET PREFIX COUNT [HOLD]

With HOLD (a path), every page after the first waits until that file exists: a listing held back after its first
page, for a test that the mount returns before the listing ends. GET of any key answers its 1 byte.
"""
import hashlib, http.server, os, sys, time, urllib.parse
from xml.sax.saxutils import escape

PORT, BUCKET, PREFIX, COUNT = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
HOLD = sys.argv[5] if len(sys.argv) > 5 else None
DATE = "2026-11-01T10:00:00.000Z"


def page(prefix, start, limit):
    """The ListBucketResult of up to `limit` keys of `prefix` from `start` (an index), with the token of the next
    page when more follow. A prefix other than PREFIX holds 3 keys (a floor to measure against)."""
    count = COUNT if prefix == PREFIX else 3
    end = min(count, start + limit)
    parts = [f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>{BUCKET}</Name>'
             f"<Prefix>{escape(prefix)}</Prefix><KeyCount>{end - start}</KeyCount><MaxKeys>{limit}</MaxKeys>"
             f"<Delimiter>/</Delimiter><IsTruncated>{'true' if end < count else 'false'}</IsTruncated>"]
    if end < count:
        parts.append(f"<NextContinuationToken>{end}</NextContinuationToken>")
    for index in range(start, end):
        etag = hashlib.md5(str(index).encode()).hexdigest()
        parts.append(f"<Contents><Key>{escape(prefix)}photo-{index:07d}.jpg</Key><LastModified>{DATE}</LastModified>"
                     f"<ETag>&quot;{etag}&quot;</ETag><Size>1</Size><StorageClass>STANDARD</StorageClass></Contents>")
    parts.append("</ListBucketResult>")
    return "".join(parts)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def answer(self, status, body, kind="application/xml"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def do_GET(self):
        path, _, query = self.path.partition("?")
        fields = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
        if path.strip("/") == BUCKET and fields.get("list-type") == "2":
            token = fields.get("continuation-token")
            if token is not None and HOLD is not None:
                while not os.path.exists(HOLD):
                    time.sleep(0.05)
            start = int(token) if token else 0
            limit = min(1000, int(fields.get("max-keys", "1000")))
            return self.answer(200, page(fields.get("prefix", ""), start, limit))
        if path.startswith(f"/{BUCKET}/"):
            return self.answer(200, b"x", "application/octet-stream")
        return self.answer(404, "<Error><Code>NoSuchKey</Code></Error>")

    do_HEAD = do_GET


class Server(http.server.ThreadingHTTPServer):
    request_queue_size = 128
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client that hangs up between pages is no error of the listing


if __name__ == "__main__":
    Server(("127.0.0.1", PORT), Handler).serve_forever()
