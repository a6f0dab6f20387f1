"""A Python backend asking OfferGate for a customer's best offer over HTTP, with the standard library only.

    OFFERGATE_URL=https://offers.example.com OFFERGATE_API_KEY=og_... python3 python_backend.py CUSTOMER_ID PRODUCT_ID
"""
import itertools
import json
import os
import sys
import urllib.error
import urllib.request

URL = os.environ.get("OFFERGATE_URL", "http://127.0.0.1:8080") + "/v1/rpc"
API_KEY = os.environ["OFFERGATE_API_KEY"]  # the tenant's key: from a secret store, never from source code
_ids = itertools.count(1)


class OfferGateError(Exception):
    def __init__(self, error):
        super().__init__(f"{error['code']} {error['message']}")
        self.code = error["code"]
        self.data = error.get("data", {})


def call(method, params=None, timeout=5):
    """One JSON-RPC call: its result, or OfferGateError with the JSON-RPC error (401 carries one too)."""
    body = json.dumps({"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params or {}}).encode()
    request = urllib.request.Request(URL, data=body, method="POST", headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer = json.load(response)
    except urllib.error.HTTPError as error:
        if error.headers.get_content_type() != "application/json":
            raise
        answer = json.load(error)
    if "error" in answer:
        raise OfferGateError(answer["error"])
    return answer["result"]


if __name__ == "__main__":
    customer, product = sys.argv[1], sys.argv[2]
    best = call("offers.best", {"customerId": customer, "productId": product})
    offer = best["offer"]
    if offer is None:
        print(json.dumps({"offer": None}))
    else:
        print(json.dumps({"offer": offer["offerId"], "displayText": offer["displayText"]}))
        if offer["type"] == "promotional":
            # StoreKit 2 needs a signature for a promotional offer.
            signed = call("offers.sign", {"customerId": customer, "productId": product,
                                          "offerId": offer["offerId"], "format": "jws"})
            print(json.dumps({"compactJWS": signed["compactJWS"][:16] + "..."}))
