#!/usr/bin/env python3
"""B11 helper: App Store Server Notifications signed by a test certificate authority, and a driver that sends them.

Run with the ops/pyenv virtualenv (Python `cryptography`; the CA code is the test suite's own,
Tests/OfferCryptoTests/Fixtures/AppleSignedData/test_ca_referee.py: a P-384 root, an intermediate with Apple's WWDR
OID, a P-256 leaf with the receipt-signing OID).

  b11-notify.py make  --out DIR --count N --customers C --bundle B --app-apple-id ID
      writes DIR/root.der (the root the gateway must trust: --apple-root-cert) and DIR/notifications.txt: N signed
      DID_RENEW notifications, one signedPayload per line, for C customers (each notification carries a new
      transaction of its customer's subscription chain, with the customer's appAccountToken, and its renewal
      info: three JWS, each verified by the gateway).
  b11-notify.py setup --socket PATH --admin-key-env VAR --slug S --bundle B --app-apple-id ID --key-file FILE
      creates the tenant (app Apple id set, a one-product catalog) and writes its API key to FILE (mode 0600).
  b11-notify.py run   --socket PATH --key-file FILE --file notifications.txt --skip K --count N
                      --connections C --depth D
      sends notifications K..K+N-1 as appstore.notification over C connections, D in flight on each, and prints
      one JSON line: {"sent", "ok", "errors", "seconds", "rate", "p50Ms", "p99Ms", "driverCpuSeconds", "firstError"}.
"""
import argparse
import asyncio
import base64
import json
import os
import resource
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../../Tests/OfferCryptoTests/Fixtures/AppleSignedData"))


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make(a):
    import test_ca_referee as ref  # the test suite's certificate authority
    from cryptography.hazmat.primitives import serialization

    ca = ref.CA("OfferGate Bench")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "root.der"), "wb") as fh:
        fh.write(ca.root.public_bytes(serialization.Encoding.DER))
    header = b64url(ref.compact_json({"alg": "ES256", "x5c": ca.x5c()}))

    def jws(payload):
        signing_input = header + "." + b64url(ref.compact_json(payload))
        return signing_input + "." + b64url(ref.raw_signature(ca.leaf_key, signing_input.encode()))

    now = int(time.time() * 1000)
    tokens = [str(uuid.UUID(int=(0x7B11 << 112) | c)) for c in range(a.customers)]
    day = 86_400_000
    with open(os.path.join(a.out, "notifications.txt"), "w") as out:
        for i in range(a.count):
            c = i % a.customers
            renewal_number = i // a.customers
            chain = str(3_000_000_000_000 + c)
            purchase = now - 30 * day + renewal_number * 1000
            signed = now - 1000
            transaction = {
                "transactionId": str(4_000_000_000_000 + i), "originalTransactionId": chain,
                "bundleId": a.bundle, "productId": "monthly", "subscriptionGroupIdentifier": "21000001",
                "purchaseDate": purchase, "originalPurchaseDate": now - 400 * day, "expiresDate": purchase + 30 * day,
                "quantity": 1, "type": "Auto-Renewable Subscription", "inAppOwnershipType": "PURCHASED",
                "signedDate": signed, "environment": "Production", "transactionReason": "RENEWAL",
                "storefront": "USA", "storefrontId": "143441", "price": 4990, "currency": "USD",
                "appAccountToken": tokens[c],
            }
            renewal = {
                "originalTransactionId": chain, "autoRenewProductId": "monthly", "productId": "monthly",
                "autoRenewStatus": 1, "isInBillingRetryPeriod": False, "signedDate": signed,
                "environment": "Production", "recentSubscriptionStartDate": now - 400 * day,
                "renewalDate": purchase + 30 * day,
            }
            notification = {
                "notificationType": "DID_RENEW", "notificationUUID": str(uuid.uuid4()), "version": "2.0",
                "signedDate": signed,
                "data": {"bundleId": a.bundle, "bundleVersion": "1", "environment": "Production",
                         "appAppleId": a.app_apple_id, "status": 1,
                         "signedTransactionInfo": jws(transaction), "signedRenewalInfo": jws(renewal)},
            }
            out.write(jws(notification) + "\n")


class Connection:
    """One newline-delimited JSON-RPC connection over a Unix socket."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, path):
        reader, writer = await asyncio.open_unix_connection(path, limit=16 * 1024 * 1024)
        return cls(reader, writer)

    async def call(self, method, params, rid=1):
        self.writer.write((json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n")
                          .encode())
        await self.writer.drain()
        reply = json.loads(await self.reader.readline())
        if "error" in reply:
            raise SystemExit(f"{method} failed: {reply['error']}")
        return reply["result"]

    def close(self):
        self.writer.close()


async def setup(a):
    admin = await Connection.open(a.socket)
    await admin.call("session.authenticate", {"apiKey": os.environ[a.admin_key_env]})
    created = await admin.call("tenants.create", {"slug": a.slug, "bundleId": a.bundle})
    await admin.call("tenants.update", {"tenant": a.slug, "appAppleId": a.app_apple_id})
    await admin.call("catalog.upsert", {
        "tenant": a.slug, "groups": [{"id": "21000001", "name": "Bench"}],
        "products": [{"id": "monthly", "groupId": "21000001", "period": "P1M", "price": "4.99", "currency": "USD",
                      "level": 1}]})
    admin.close()
    fd = os.open(a.key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(created["apiKey"])


async def run(a):
    with open(a.key_file) as fh:
        key = fh.read().strip()
    with open(a.file) as fh:
        payloads = [line.rstrip("\n") for _, line in zip(range(a.skip + a.count), fh)][a.skip:]
    if len(payloads) < a.count:
        raise SystemExit(f"{a.file} holds fewer than {a.skip + a.count} notifications")
    frames = [(json.dumps({"jsonrpc": "2.0", "id": i, "method": "appstore.notification",
                           "params": {"signedPayload": p}}, separators=(",", ":")) + "\n").encode()
              for i, p in enumerate(payloads)]
    connections = []
    for _ in range(a.connections):
        c = await Connection.open(a.socket)
        await c.call("session.authenticate", {"apiKey": key}, rid="auth")
        connections.append(c)
    next_index = 0
    latencies, errors, first_error = [], 0, None

    async def drive(c):
        nonlocal next_index, errors, first_error
        sent_at = {}
        in_flight = 0

        def fill():
            nonlocal next_index, in_flight
            while in_flight < a.depth and next_index < len(frames):
                i = next_index
                next_index += 1
                sent_at[i] = time.perf_counter()
                c.writer.write(frames[i])
                in_flight += 1

        fill()
        await c.writer.drain()
        while in_flight:
            reply = json.loads(await c.reader.readline())
            in_flight -= 1
            latencies.append(time.perf_counter() - sent_at.pop(reply["id"]))
            if "error" in reply or not reply["result"].get("applied"):
                errors += 1
                first_error = first_error or reply
            fill()
            await c.writer.drain()

    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    await asyncio.gather(*(drive(c) for c in connections))
    seconds = time.perf_counter() - start
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    for c in connections:
        c.close()
    latencies.sort()

    def pct(p):
        return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000, 2) if latencies else None

    print(json.dumps({
        "sent": len(frames), "ok": len(frames) - errors, "errors": errors, "seconds": round(seconds, 3),
        "rate": round((len(frames) - errors) / seconds, 1), "p50Ms": pct(0.5), "p99Ms": pct(0.99),
        "driverCpuSeconds": round(cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 3),
        "firstError": first_error}))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--out", required=True)
    m.add_argument("--count", type=int, required=True)
    m.add_argument("--customers", type=int, default=5000)
    m.add_argument("--bundle", required=True)
    m.add_argument("--app-apple-id", type=int, required=True)
    s = sub.add_parser("setup")
    s.add_argument("--socket", required=True)
    s.add_argument("--admin-key-env", default="OFFERGATE_ADMIN_KEY")
    s.add_argument("--slug", required=True)
    s.add_argument("--bundle", required=True)
    s.add_argument("--app-apple-id", type=int, required=True)
    s.add_argument("--key-file", required=True)
    r = sub.add_parser("run")
    r.add_argument("--socket", required=True)
    r.add_argument("--key-file", required=True)
    r.add_argument("--file", required=True)
    r.add_argument("--skip", type=int, default=0)
    r.add_argument("--count", type=int, required=True)
    r.add_argument("--connections", type=int, default=16)
    r.add_argument("--depth", type=int, default=4)
    a = p.parse_args()
    if a.command == "make":
        make(a)
    elif a.command == "setup":
        asyncio.run(setup(a))
    else:
        asyncio.run(run(a))


if __name__ == "__main__":
    main()
