#!/usr/bin/env python3
"""analytics.funnel driver over a Unix socket: `setup` creates the tenant and a catalog of 2 products × 10
promotional offers through the admin API; `query` asks analytics.funnel (as the admin, naming the tenant) N times for
each shape and prints one JSON object of median/p90/max answer times in ms. Uses only the standard library."""
import argparse, json, os, socket, statistics, sys, time

p = argparse.ArgumentParser()
p.add_argument("command", choices=["setup", "query"])
p.add_argument("--socket", required=True)
p.add_argument("--tenant", default="funnel-bench")
p.add_argument("--from", dest="start", default="2026-10-01T00:00:00Z")
p.add_argument("--to", dest="end", default="2026-10-31T00:00:00Z")
p.add_argument("--repeats", type=int, default=30)
a = p.parse_args()

sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(a.socket)
reader = sock.makefile("rb")
next_id = 0


def call(method, params):
    global next_id
    next_id += 1
    sock.sendall((json.dumps({"jsonrpc": "2.0", "id": next_id, "method": method, "params": params}) + "\n").encode())
    answer = json.loads(reader.readline())
    if "error" in answer:
        sys.exit(f"{method}: {answer['error']}")
    return answer["result"]


call("session.authenticate", {"apiKey": os.environ["OFFERGATE_ADMIN_KEY"]})
if a.command == "setup":
    call("tenants.create", {"slug": a.tenant, "bundleId": "com.example.funnel"})
    products = [{"id": f"p{i}", "groupId": "g", "period": "P1M", "price": "4.99", "currency": "USD", "level": i + 1}
                for i in range(2)]
    offers = [{"id": f"offer-{n}", "type": "promotional", "productId": f"p{n % 2}", "paymentMode": "payAsYouGo",
               "period": "P1M", "periodCount": 2, "price": "1.99"} for n in range(20)]
    call("catalog.upsert", {"tenant": a.tenant, "groups": [{"id": "g", "name": "G"}], "products": products,
                            "offers": offers})
    print(json.dumps({"tenant": a.tenant}))
    sys.exit(0)

shapes = {
    "one offer, 30 days by day": {"offerId": "offer-7", "bucket": "day"},
    "one offer, 30 days by hour": {"offerId": "offer-7", "bucket": "hour"},
    "one product (10 offers), 30 days by day": {"productId": "p1", "bucket": "day"},
    "whole tenant (20 offers), 30 days by hour": {"bucket": "hour"},
}
out = {}
for name, shape in shapes.items():
    params = dict(shape, tenant=a.tenant, **{"from": a.start, "to": a.end})
    times = []
    result = None
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        result = call("analytics.funnel", params)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    total = sum(result["totals"][k] for k in ("impressions", "taps", "dismissals", "purchasesStarted",
                                               "purchasesFailed"))
    out[name] = {"median_ms": statistics.median(times), "p90_ms": times[int(len(times) * 0.9) - 1],
                 "max_ms": times[-1], "buckets": len(result["buckets"]), "events_counted": total}
print(json.dumps(out))
