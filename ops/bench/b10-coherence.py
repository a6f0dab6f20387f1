#!/usr/bin/env python3
"""B10's cache-coherence check after a failover: a catalog change made through one gateway must reach the others.

usage: b10-coherence.py TENANT SOCKET1 SOCKET2 [SOCKET…]   (the admin key from OFFERGATE_ADMIN_KEY)

First every other gateway must hold the tenant's catalog in memory again (`catalog.get`, then `system.stats`
`cachedCatalogs` ≥ 1: a gateway keeps nothing while its change feed is disconnected, so this says its feed listens
on the new primary); then one offer is added through SOCKET1, and each other gateway is asked for the catalog until
it shows the offer. Prints the seconds from the change's acknowledgement until the last gateway showed it; exits 1
when a gateway did not cache again within 30 s or did not show the change within 10 s.
"""
import json
import os
import socket
import sys
import time


class Client:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.file = self.sock.makefile("rwb")
        self.next_id = 0

    def call(self, method, params):
        self.next_id += 1
        request = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.file.write(json.dumps(request).encode() + b"\n")
        self.file.flush()
        while True:
            line = self.file.readline()
            if not line:
                raise RuntimeError("connection closed")
            message = json.loads(line)
            if message.get("id") == self.next_id:
                break
        if "error" in message:
            raise RuntimeError(f"{method}: {message['error'].get('code')} {message['error'].get('message')}")
        return message["result"]


def until(deadline, probe):
    while time.monotonic() < deadline:
        try:
            if probe():
                return True
        except RuntimeError:
            pass  # -32050 while the database is still coming back
        time.sleep(0.01)
    return False


def main():
    tenant, sockets = sys.argv[1], sys.argv[2:]
    clients = [Client(path) for path in sockets]
    for client in clients:
        client.call("session.authenticate", {"apiKey": os.environ["OFFERGATE_ADMIN_KEY"]})
    writer, readers = clients[0], clients[1:]

    def caching(client):
        client.call("catalog.get", {"tenant": tenant})
        return client.call("system.stats", {}).get("cachedCatalogs", 0) >= 1

    for i, reader in enumerate(readers, start=2):
        if not until(time.monotonic() + 30, lambda: caching(reader)):
            print(f"gateway {i} does not keep the catalog in memory 30 s after the failover", file=sys.stderr)
            return 1
    catalog = writer.call("catalog.get", {"tenant": tenant})
    product = catalog["products"][0]["id"]
    offer = f"coherence-{int(time.time() * 1000)}"
    writer.call("catalog.upsert", {
        "tenant": tenant, "groups": [], "products": [],
        "offers": [{"id": offer, "type": "code", "productId": product, "paymentMode": "freeTrial", "period": "P1W"}],
    })
    changed = time.monotonic()
    slowest = 0.0
    for i, reader in enumerate(readers, start=2):
        def shows():
            offers = reader.call("catalog.get", {"tenant": tenant}).get("offers", [])
            return any(o.get("id") == offer for o in offers)
        if not until(changed + 10, shows):
            print(f"gateway {i} did not show the change within 10 s", file=sys.stderr)
            return 1
        slowest = max(slowest, time.monotonic() - changed)
    print(f"{slowest:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
