#!/usr/bin/env python3
"""B8 driver: spawns `offergate serve --stdio`, authenticates, then writes N pre-generated pipelined requests to its
stdin (from a thread) and times until the last response line has arrived. Prints one key=value line."""
import argparse, json, os, resource, subprocess, sys, threading, time

p = argparse.ArgumentParser()
p.add_argument("--offergate", required=True)
p.add_argument("--database-url", required=True)
p.add_argument("--fixture", required=True)
p.add_argument("--method", choices=["ping", "best"], required=True)
p.add_argument("--requests", type=int, default=100_000)
a = p.parse_args()
fx = json.load(open(a.fixture))
customers, products = fx["fixture"]["customers"], fx["fixture"]["products"]
lines = []
for i in range(a.requests):
    if a.method == "ping":
        req = {"jsonrpc": "2.0", "id": i + 1, "method": "system.ping", "params": {}}
    else:
        req = {"jsonrpc": "2.0", "id": i + 1, "method": "offers.best",
               "params": {"customerId": customers[i % len(customers)],
                          "productId": products[(i // len(customers)) % len(products)]}}
    lines.append(json.dumps(req, separators=(",", ":")))
payload = ("\n".join(lines) + "\n").encode()
proc = subprocess.Popen([a.offergate, "serve", "--stdio", "--database-url", a.database_url, "--log-level", "warning",
                         "--quiet-requests", "--no-migrate"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL, bufsize=0)
auth = json.dumps({"jsonrpc": "2.0", "id": "auth", "method": "session.authenticate",
                   "params": {"apiKey": fx["apiKey"]}}) + "\n"
proc.stdin.write(auth.encode())
out = proc.stdout
first = out.readline()
if b'"result"' not in first:
    sys.exit("authentication failed: " + first.decode()[:200])

def writer():
    proc.stdin.write(payload)
    proc.stdin.close()

start = time.monotonic()
t = threading.Thread(target=writer)
t.start()
got = errors = 0
buf = b""
while got < a.requests:
    chunk = os.read(out.fileno(), 1 << 20)
    if not chunk:
        break
    buf += chunk
    n = buf.count(b"\n")
    if n:
        cut = buf.rfind(b"\n") + 1
        errors += buf[:cut].count(b'"error"')
        got += n
        buf = buf[cut:]
elapsed = time.monotonic() - start
t.join()
proc.wait(timeout=30)
# The gateway's whole CPU time (start-up included, the same for every run): this script's only child.
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = usage.ru_utime + usage.ru_stime
print(f"method={a.method} requests={a.requests} responses={got} errors={errors} seconds={elapsed:.3f} "
      f"rate={got / elapsed:.0f} gateway_cpu_ms_per_1000={1e6 * cpu / max(got, 1):.1f}")
sys.exit(0 if got == a.requests else 1)
