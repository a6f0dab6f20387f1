"""Hostile HTTP against the listener; each case must end in a clean 4xx or in the server closing the connection
(a timeout), never a 2xx for the hostile request, never a crash. Run by HTTPTests with:

    http_hostile.py HOST PORT TENANT_SLUG REQUEST_TIMEOUT_SECONDS ADMIN_KEY

The obs-fold cases carry an admin key and a tenants.create that would store a tenant (`folded-*`): the caller checks
that none exists afterwards, and the unfolded twin of that request (tenant `unfolded-control`) was answered 200.

Prints one JSON object: {"cases": {name: outcome}, "failures": [...]}; exits 1 on any failure."""
import json
import re
import resource
import socket
import sys
import time

host, port, slug, request_timeout = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
admin_key = sys.argv[5].encode()
failures = []
cases = {}


def exchange(raw, wait=30.0, want=1):
    """Sends raw bytes; reads until `want` responses arrived and the line went quiet, the server closed, or `wait`
    passed (a deadline for a loaded machine, not a speed bound). Returns (bytes, closed_by_server)."""
    s = socket.create_connection((host, port), timeout=wait)
    try:
        s.sendall(raw)
    except OSError:
        pass
    out = b""
    closed = False
    deadline = time.monotonic() + wait
    try:
        while time.monotonic() < deadline:
            quiet = len(statuses(out)) >= want
            s.settimeout(0.3 if quiet else max(0.05, deadline - time.monotonic()))
            try:
                data = s.recv(65536)
            except socket.timeout:
                if quiet:
                    break
                continue
            if not data:
                closed = True
                break
            out += data
    except ConnectionResetError:
        closed = True
    s.close()
    return out, closed


def statuses(out):
    return [int(code) for code in re.findall(rb"HTTP/1\.[01] (\d{3}) ", out)]


def expect_4xx(name, raw, or_closed=False):
    """Only 4xx answers (or, with `or_closed`, the server closing without a word)."""
    out, closed = exchange(raw)
    found = statuses(out)
    cases[name] = found or ("closed" if closed else "silent")
    if or_closed and not found and closed:
        return
    if not found or not all(400 <= s < 500 for s in found):
        failures.append(f"{name}: expected 4xx only, got {found} {out[:300]!r}")


body = b'{"jsonrpc":"2.0","id":1,"method":"system.ping"}'
notification = b'{"signedPayload":"eyJhbGciOiJFUzI1NiJ9.e30.AA"}'
smuggled = b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"
apple = f"/v1/apple/{slug}/notifications".encode()

# Request smuggling shapes
expect_4xx("content-length and transfer-encoding",
           b"POST " + apple + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4\r\n"
           b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled)
expect_4xx("two content-lengths",
           b"POST /v1/rpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
           b"Content-Length: 5\r\n\r\n" % len(body) + body)
expect_4xx("transfer-encoding twice",
           b"POST /v1/rpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
           b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
expect_4xx("transfer-encoding other than chunked",
           b"POST /v1/rpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n\r\n")
expect_4xx("invalid content-length",
           b"POST /v1/rpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1x\r\n\r\n")

# obs-fold (RFC 9112 §5.2: a server must reject it, or replace it with spaces): libmicrohttpd 0.9.75 glues the
# continuation onto the previous field's name; the listener notices and answers 400 (decision 008), whether the folded
# field is one that frames the request or any other. Each request would create a tenant if it were accepted.
def create_tenant(name):
    return b'{"jsonrpc":"2.0","id":1,"method":"tenants.create","params":{"slug":"%s","bundleId":"com.example.%s"}}' % (
        name, name)


def rpc_post(body, fields):
    return (b"POST /v1/rpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer " + admin_key
            + b"\r\n" + fields + b"Content-Length: %d\r\n\r\n" % len(body) + body)


expect_4xx("obs-fold of Transfer-Encoding, a request smuggled after",
           rpc_post(create_tenant(b"folded-a"), b"Transfer-Encoding:\r\n chunked\r\n") + smuggled)
expect_4xx("obs-fold of an ordinary field (space)", rpc_post(create_tenant(b"folded-b"), b"X-Note: a\r\n b\r\n"))
expect_4xx("obs-fold of an ordinary field (tab)", rpc_post(create_tenant(b"folded-c"), b"X-Note: a\r\n\tb c\r\n"))
expect_4xx("obs-fold of an empty field after another",
           rpc_post(create_tenant(b"folded-d"), b"X-Trace: 1\r\nAccept:\r\n */*\r\n"))
out, _ = exchange(rpc_post(create_tenant(b"unfolded-control"), b"X-Note: a b\r\n"))
cases["unfolded control"] = statuses(out)
if statuses(out) != [200] or b'"result"' not in out:
    failures.append(f"the unfolded twin of the obs-fold requests was not answered 200 with a result: {out[:400]!r}")

# 64 KiB of header fields (one field, and many)
expect_4xx("64 KiB header field", b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 65536 + b"\r\n\r\n")
expect_4xx("64 KiB of header fields",
           b"GET /livez HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-F%05d: %s\r\n" % (i, b"b" * 54) for i in range(1024)) + b"\r\n")

# A body larger than the limit: announced, and chunked
expect_4xx("announced body over the limit",
           b"POST " + apple + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2000000\r\n\r\n"
           + b"x" * 65536)
expect_4xx("chunked body over the limit",
           b"POST /v1/rpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
           + (b"10000\r\n" + b"x" * 65536 + b"\r\n") * 20 + b"0\r\n\r\n")

# Paths: not UTF-8, raw and percent-encoded; ../ in {tenant}, raw and encoded
expect_4xx("non-UTF-8 path", b"POST /v1/apple/\xff\xfe/notifications HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
expect_4xx("percent-encoded non-UTF-8 path", b"GET /v1/%FF%FE HTTP/1.1\r\nHost: x\r\n\r\n")
for name, path in [("../ in tenant", b"/v1/apple/../notifications"),
                   ("../../ in tenant", b"/v1/apple/../../v1/rpc/notifications"),
                   ("encoded ../ in tenant", b"/v1/apple/..%2F" + slug.encode() + b"/notifications"),
                   ("NUL in tenant", b"/v1/apple/" + slug.encode() + b"%00x/notifications")]:
    expect_4xx(name, b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
               % len(notification) + notification)
expect_4xx("HTTP/1.1 without Host", b"GET /livez HTTP/1.1\r\n\r\n")
# A TLS ClientHello to the plain-HTTP port: libmicrohttpd closes the connection without an answer.
expect_4xx("TLS hello instead of HTTP", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64 + b"\r\n\r\n",
           or_closed=True)

# A header sent one byte a second: the server must close the connection (its request timeout, not ours, ends it)
s = socket.create_connection((host, port), timeout=1)
header = b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"s" * 200
started = time.monotonic()
closed_after = None
for byte in header:
    try:
        s.sendall(bytes([byte]))
        s.settimeout(1.0)
        data = s.recv(4096)
        if not data:
            closed_after = time.monotonic() - started
            break
        if statuses(data) and statuses(data)[0] < 400:
            failures.append(f"slow header answered {data[:100]!r}")
            break
    except socket.timeout:
        continue
    except (BrokenPipeError, ConnectionResetError):
        closed_after = time.monotonic() - started
        break
    if time.monotonic() - started > request_timeout + 60:
        break
s.close()
cases["one byte a second"] = closed_after
if closed_after is None:
    failures.append("slow header: the server never closed the connection")

# 2,000 idle connections; a fresh client is still answered meanwhile
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4096)), hard))
idle = []
for _ in range(2000):
    idle.append(socket.create_connection((host, port), timeout=5))
out, _ = exchange(b"GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
cases["fresh client beside 2,000 idle connections"] = statuses(out)
if statuses(out) != [200]:
    failures.append(f"fresh client beside 2,000 idle connections: {out[:200]!r}")
for s in idle:
    s.close()

print(json.dumps({"cases": cases, "failures": failures}))
sys.exit(1 if failures else 0)
