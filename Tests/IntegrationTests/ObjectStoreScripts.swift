// The Python the object-store fixtures run (ObjectStoreServers.swift, S3TestClient.swift), kept as text so the tests
// need no file outside the checkout. Both use only moto's install at /opt/moto or the standard library: no boto3.

/// Scripts written into a fixture's folder and run with /usr/bin/python3 (the interpreter /opt/moto was installed
/// for; see mount-scripts/install-deps.sh).
enum ObjectStoreScripts {
    /// Runs moto's S3 server with an IAM key made in-process and signature checking on from the first request, and
    /// a seeding route that fills buckets in-process (2,500 objects in well under a second, where 2,500 signed PUTs
    /// take 5 to 20 s). Arguments: PORT KEYS_FILE auth|noauth.
    static let motoLauncher = #"""
"""moto's S3 server for rangefs's tests (run with PYTHONPATH=/opt/moto).
usage: moto_launcher.py PORT KEYS_FILE [auth|noauth]
Before serving: creates an IAM user allowed s3:* and writes 'ACCESS SECRET' to KEYS_FILE (mode 0600; the secret
never goes on a command line), then turns signature checking on for every request (auth) or leaves it off.
POST /_rangefs/seed with a manifest path as the body applies the manifest in this process (fast: no HTTP per object,
no signature, not counted by moto and left out of the test's request counts). Manifest: JSON lines, each
{"op": "bucket"|"put"|"delete"|"public", "bucket": B, "key": K, "offset": O, "length": L},
the bytes of a put being DATA[O:O+L], DATA = the file manifest + ".data".
"""
import json, os, sys
port, keys_file, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
from moto import settings
from moto.core import DEFAULT_ACCOUNT_ID
from moto.core.authorization import ActionAuthenticatorMixin
from moto.iam.models import iam_backends
from moto.s3.models import s3_backends
from moto.server import DomainDispatcherApplication, create_backend_app
from moto.moto_server.werkzeug_app import MotoRequestHandler
from werkzeug.serving import run_simple

iam = iam_backends[DEFAULT_ACCOUNT_ID]["aws"]
iam.create_user("us-east-1", "rangefs")
iam.put_user_policy("rangefs", "s3all",
                    '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}')
key = iam.create_access_key("rangefs")
descriptor = os.open(keys_file + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
os.write(descriptor, f"{key.access_key_id} {key.secret_access_key}\n".encode())
os.close(descriptor)
os.rename(keys_file + ".tmp", keys_file)
if mode == "auth":
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    ActionAuthenticatorMixin.request_count = 0
s3 = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
PUBLIC = ('{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*",'
          '"Action":["s3:GetObject","s3:ListBucket"],"Resource":["arn:aws:s3:::%s","arn:aws:s3:::%s/*"]}]}')


def seed(manifest):
    with open(manifest + ".data", "rb") as data_file:
        data = data_file.read()
    done = 0
    with open(manifest, encoding="utf-8") as lines:
        for line in lines:
            step = json.loads(line)
            op, bucket = step["op"], step["bucket"]
            if op == "bucket":
                s3.create_bucket(bucket, "us-east-1")
            elif op == "put":
                start = step["offset"]
                s3.put_object(bucket, step["key"], data[start:start + step["length"]])
            elif op == "delete":
                s3.delete_object(bucket, step["key"])
            elif op == "public":
                s3.put_bucket_policy(bucket, (PUBLIC % (bucket, bucket)).encode())
            else:
                raise ValueError("unknown op " + op)
            done += 1
    return done


moto_app = DomainDispatcherApplication(create_backend_app)


def app(environ, start_response):
    if environ.get("PATH_INFO") != "/_rangefs/seed":
        return moto_app(environ, start_response)
    length = int(environ.get("CONTENT_LENGTH") or 0)
    manifest = environ["wsgi.input"].read(length).decode()
    try:
        status, body = "200 OK", f"seeded {seed(manifest)}\n"
    except Exception as error:  # the test sees the reason in its failure message
        status, body = "500 Internal Server Error", f"{type(error).__name__}: {error}\n"
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body.encode())))])
    return [body.encode()]


run_simple("127.0.0.1", port, app, threaded=True, request_handler=MotoRequestHandler)
"""#

    /// A stand-alone AWS Signature V4 signer (hmac and hashlib only): prints the request target and the headers
    /// that sign it, for curl to send. Independent of rangefs's own signer, so the fixtures' self-test does not
    /// trust the code under test.
    static let signer = #"""
"""Signs one S3 request with AWS Signature V4 for rangefs's tests (stdlib only: no boto3, no botocore).
usage: s3_sign.py HOST:PORT KEYS_FILE|- METHOD BUCKET KEY [NAME=VALUE...] [--header NAME:VALUE...]
KEYS_FILE holds 'ACCESS SECRET' (a file, so the secret is never on a command line); '-' leaves the request unsigned.
Prints the request target (path and query, encoded exactly as signed) and then one 'Name: value' line per header.
Encoding: each path segment and every query name and value is UTF-8 percent-encoded with the RFC 3986 unreserved
set (A-Z a-z 0-9 - _ . ~) left as is; the query pairs are sorted; an empty value is 'name='."""
import datetime, hashlib, hmac, sys, urllib.parse

host, keys_file, method, bucket, key = sys.argv[1:6]
query, headers = [], {}
rest = iter(sys.argv[6:])
for argument in rest:
    if argument == "--header":
        name, _, value = next(rest).partition(":")
        headers[name.strip().lower()] = value.strip()
    else:
        name, _, value = argument.partition("=")
        query.append((name, value))


def encode(text, safe=""):
    return urllib.parse.quote(text.encode("utf-8"), safe="-_.~" + safe)


path = "/" + bucket + ("/" + key if key else "") if bucket else "/"
canonical_uri = encode(path, safe="/")
canonical_query = "&".join(f"{n}={v}" for n, v in sorted((encode(n), encode(v)) for n, v in query))
headers["host"] = host
if keys_file != "-":
    with open(keys_file, encoding="utf-8") as file:
        access, secret = file.read().split()
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    headers["x-amz-date"] = now
    headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD"
    signed = sorted(headers)
    canonical = "\n".join([method, canonical_uri, canonical_query,
                           "".join(f"{n}:{' '.join(headers[n].split())}\n" for n in signed), ";".join(signed),
                           "UNSIGNED-PAYLOAD"])
    scope = f"{now[:8]}/us-east-1/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", now, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    signing_key = ("AWS4" + secret).encode()
    for part in (now[:8], "us-east-1", "s3", "aws4_request"):
        signing_key = hmac.new(signing_key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(signing_key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={access}/{scope}, SignedHeaders={';'.join(signed)}, "
                                f"Signature={signature}")
print(canonical_uri + ("?" + canonical_query if canonical_query else ""))
for name, value in headers.items():
    print(f"{name}: {value}")
"""#
}
