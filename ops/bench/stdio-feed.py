#!/usr/bin/env python3
"""B8 driver: spawns `offergate serve --stdio`, authenticates, then has `stdio-pump` (C, ops/bench/stdio-pump.c) write
N pre-generated pipelined requests to its stdin and count the response lines, timed from the first byte written to
the last line read. Prints one key=value line, with the gateway's CPU and the pump's per 1,000 answers."""
import argparse, json, resource, subprocess, sys, tempfile

p = argparse.ArgumentParser()
p.add_argument("--offergate", required=True)
p.add_argument("--database-url", required=True)
p.add_argument("--fixture", required=True)
p.add_argument("--method", choices=["ping", "best"], required=True)
p.add_argument("--requests", type=int, default=100_000)
p.add_argument("--pump", required=True, help="the stdio-pump binary")
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
requests = tempfile.NamedTemporaryFile(prefix="b8-requests-")
requests.write(("\n".join(lines) + "\n").encode())
requests.flush()
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

# The pump gets its own copies of the gateway's stdin and stdout; closing ours lets the pump's close end the input.
pump = subprocess.Popen([a.pump, requests.name, str(proc.stdin.fileno()), str(proc.stdout.fileno()),
                         str(a.requests)], pass_fds=(proc.stdin.fileno(), proc.stdout.fileno()),
                        stdout=subprocess.PIPE, text=True)
proc.stdin.close()
figures = dict(f.split("=", 1) for f in pump.communicate()[0].split())
if "responses" not in figures:
    sys.exit(f"stdio-pump failed (exit {pump.returncode}) before reporting")
reaped = resource.getrusage(resource.RUSAGE_CHILDREN)  # the pump's
proc.stdout.close()
proc.wait(timeout=30)
got, seconds = int(figures["responses"]), float(figures["seconds"])
# The gateway's whole CPU time (start-up included, the same for every run): the children's once it is reaped too,
# less the pump's.
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
gateway_cpu = usage.ru_utime + usage.ru_stime - reaped.ru_utime - reaped.ru_stime
print(f"method={a.method} requests={a.requests} responses={got} errors={figures['errors']} seconds={seconds:.3f} "
      f"rate={got / seconds:.0f} gateway_cpu_ms_per_1000={1e6 * gateway_cpu / max(got, 1):.1f} "
      f"driver_cpu_ms_per_1000={figures['driver_cpu_ms_per_1000']}")
sys.exit(0 if got == a.requests and pump.returncode == 0 else 1)
