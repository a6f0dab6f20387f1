"""Every route of the HTTP listener through Python's standard clients (urllib and http.client), keep-alive with 100
requests on one connection, and pipelined requests answered in order. Run by HTTPTests with:

    http_routes.py BASE_URL ADMIN_KEY TENANT_KEY TENANT_SLUG

Exits 0 when every check passed; otherwise prints the failures and exits 1."""
import http.client
import json
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

base, admin_key, tenant_key, slug = sys.argv[1:5]
parsed = urllib.parse.urlparse(base)
host, port = parsed.hostname, parsed.port
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)


def url(path, method="GET", body=None, headers=None):
    """urllib: (status, headers, body bytes); HTTP errors are answers too."""
    request = urllib.request.Request(base + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def rpc(conn, payload, key=None, content_type="application/json"):
    """http.client on a kept-alive connection: (status, headers, parsed JSON or None)."""
    headers = {"Content-Type": content_type}
    if key is not None:
        headers["Authorization"] = "Bearer " + key
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    conn.request("POST", "/v1/rpc", body=body, headers=headers)
    response = conn.getresponse()
    data = response.read()
    return response.status, response.headers, (json.loads(data) if data else None)


# GET routes through urllib
status, headers, body = url("/livez")
check(status == 200 and json.loads(body) == {"status": "ok"}, f"/livez: {status} {body!r}")
status, headers, body = url("/readyz")
check(status == 200 and json.loads(body)["status"] == "ok", f"/readyz: {status} {body!r}")
status, headers, body = url("/metrics")
check(status == 200, f"/metrics status {status}")
check(headers.get("Content-Type", "").startswith("text/plain; version=0.0.4"), f"/metrics type {headers.get('Content-Type')}")
names = {family.name for family in text_string_to_metric_families(body.decode())}
check("offergate_rpc_requests" in names, f"/metrics families: {sorted(names)}")
status, headers, body = url("/v1/openrpc.json")
document = json.loads(body)
check(status == 200 and document["openrpc"].startswith("1."), f"/v1/openrpc.json: {status}")
status, headers, body = url("/no/such/route")
check(status == 404 and json.loads(body)["reason"] == "not_found", f"unknown path: {status} {body!r}")
status, headers, body = url("/livez", method="POST", body=b"{}", headers={"Content-Type": "application/json"})
check(status == 405 and headers.get("Allow") == "GET", f"POST /livez: {status} {headers.get('Allow')}")
status, headers, body = url("/v1/rpc")
check(status == 405 and headers.get("Allow") == "POST", f"GET /v1/rpc: {status}")

# /v1/rpc through http.client, all on one connection
conn = http.client.HTTPConnection(host, port, timeout=10)
ping = {"jsonrpc": "2.0", "id": 1, "method": "system.ping"}
status, headers, answer = rpc(conn, ping)
check(status == 200 and answer == {"jsonrpc": "2.0", "id": 1, "result": {}}, f"ping: {status} {answer}")
status, headers, answer = rpc(conn, {"jsonrpc": "2.0", "id": 2, "method": "tenants.list"})
check(status == 401 and answer["error"]["code"] == -32001, f"no key: {status} {answer}")
check(headers.get("WWW-Authenticate") == "Bearer", f"no key: WWW-Authenticate {headers.get('WWW-Authenticate')}")
status, headers, answer = rpc(conn, {"jsonrpc": "2.0", "id": 3, "method": "tenants.list"}, key="og_wrong_key")
check(status == 401 and answer["error"]["code"] == -32001, f"wrong key: {status} {answer}")
status, headers, answer = rpc(conn, {"jsonrpc": "2.0", "id": 4, "method": "system.health"}, key="og_wrong_key")
check(status == 200 and answer["result"]["status"] == "ok", f"wrong key, health: {status} {answer}")
status, headers, answer = rpc(conn, {"jsonrpc": "2.0", "id": 5, "method": "tenants.list"}, key=admin_key)
check(status == 200 and any(t["slug"] == slug for t in answer["result"]["tenants"]), f"admin: {status} {answer}")
status, headers, answer = rpc(conn, {"jsonrpc": "2.0", "id": 6, "method": "catalog.get"}, key=tenant_key)
check(status == 200 and "groups" in answer["result"], f"tenant catalog.get: {status} {answer}")
status, headers, answer = rpc(
    conn, {"jsonrpc": "2.0", "id": 7, "method": "offers.best", "params": {"customerId": "py-1", "productId": "monthly"}},
    key=tenant_key)
check(status == 200 and "result" in answer, f"tenant offers.best: {status} {answer}")
status, headers, answer = rpc(conn, ping, content_type="text/plain")
check(status == 415 and answer["reason"] == "unsupported_media_type", f"text/plain: {status} {answer}")
status, headers, answer = rpc(conn, {"jsonrpc": "2.0", "method": "system.ping"})
check(status == 204 and answer is None, f"notification only: {status} {answer}")
status, headers, answer = rpc(conn, [ping, {"jsonrpc": "2.0", "id": 9, "method": "no.such"}])
check(status == 200 and isinstance(answer, list) and len(answer) == 2, f"batch: {status} {answer}")
status, headers, answer = rpc(conn, b'{"jsonrpc":"2.0","id":1,"method"')
check(status == 200 and answer["error"]["code"] == -32700, f"parse error: {status} {answer}")
status, headers, answer = rpc(conn, {"jsonrpc": "2.0", "id": 10, "method": "rpc.discover"})
check(status == 200 and answer["result"] == document, f"rpc.discover == /v1/openrpc.json: {status}")

# Apple's URLs
for path, expected in [
    (f"/v1/apple/{slug}/notifications", (400, "malformed_jws")),
    ("/v1/apple/no-such-app/notifications", (404, "unknown_tenant")),
    ("/v1/apple/../notifications", (404, None)),
]:
    status, headers, body = url(path, "POST", json.dumps({"signedPayload": "x.y"}).encode(),
                                {"Content-Type": "application/json"})
    reason = json.loads(body).get("reason")
    check(status == expected[0] and (expected[1] is None or reason == expected[1]), f"{path}: {status} {body!r}")
status, headers, body = url(f"/v1/apple/{slug}/notifications", "POST", b"[1,2]", {"Content-Type": "application/json"})
check(status == 400 and json.loads(body)["reason"] == "invalid_body", f"notification body [1,2]: {status} {body!r}")

# Keep-alive: 100 requests on one connection, never reconnected
conn = http.client.HTTPConnection(host, port, timeout=10)
conn.connect()
local = conn.sock.getsockname()
for i in range(100):
    status, headers, answer = rpc(conn, {"jsonrpc": "2.0", "id": i, "method": "system.ping"})
    check(status == 200 and answer["id"] == i, f"keep-alive #{i}: {status} {answer}")
    check(conn.sock is not None and conn.sock.getsockname() == local, f"keep-alive #{i}: reconnected")
    if failures:
        break
conn.close()

# Pipelining: five requests written at once, answered in order
def request_bytes(i):
    body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "system.ping"}).encode()
    return (f"POST /v1/rpc HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body

raw = socket.create_connection((host, port), timeout=10)
raw.sendall(b"".join(request_bytes(i) for i in range(5)) + f"GET /livez HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
stream = raw.makefile("rb")
for i in range(6):
    # http.client parses each response off the one stream; its body is read by the parsed Content-Length without
    # response.read(), which would close the shared stream.
    response = http.client.HTTPResponse(raw)
    response.fp = stream
    response.begin()
    data = stream.read(response.length)
    response.fp = None  # else dropping the response closes the shared stream
    if i < 5:
        check(response.status == 200 and json.loads(data)["id"] == i, f"pipelined #{i}: {response.status} {data!r}")
    else:
        check(response.status == 200 and json.loads(data) == {"status": "ok"}, f"pipelined /livez: {data!r}")
raw.close()

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("ok")
