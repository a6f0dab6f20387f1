#!/usr/bin/env python3
"""Cross-check helper for Tests/OfferCryptoTests (run by the Swift tests with the ops/pyenv venv).

Reads one JSON request on stdin, writes one JSON response on stdout. Sections (all optional):

  "verify": {"publicKeyPEM": str,
             "v1":  [{"payloadHex": str, "signature": base64-DER str}],
             "jws": [{"token": str, "audience": str}]}
      -> "verify": {"v1": [bool], "jws": [{"ok": bool, "error": str|None, "header": JSON str, "claims": JSON str}]}
      V1 signatures are verified with `cryptography`; JWS with PyJWT (ES256, audience checked).

  "apple": {"privateKeyPEM": str, "keyId": str, "issuerId": str, "bundleId": str,
            "v1": {"productId", "offerId", "appAccountToken", "nonce", "timestamp"},
            "promotional": {"productId", "offerId", "transactionId": str|None},
            "intro": {"productId", "allowIntroductoryOffer": bool, "transactionId"}}
      -> "apple": {"v1Signature": str, "promotional": str, "intro": str}
      Signatures and tokens made by Apple's app-store-server-library.
"""
import base64
import json
import sys
import uuid


def verify_section(req):
    import jwt
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    public_key = serialization.load_pem_public_key(req["publicKeyPEM"].encode())
    v1_results = []
    for item in req.get("v1", []):
        try:
            public_key.verify(base64.b64decode(item["signature"], validate=True),
                              bytes.fromhex(item["payloadHex"]), ec.ECDSA(hashes.SHA256()))
            v1_results.append(True)
        except (InvalidSignature, ValueError):
            v1_results.append(False)
    jws_results = []
    for item in req.get("jws", []):
        token = item["token"]
        entry = {"ok": False, "error": None, "header": None, "claims": None}
        try:
            entry["header"] = json.dumps(jwt.get_unverified_header(token))
            entry["claims"] = json.dumps(jwt.decode(token, public_key, algorithms=["ES256"],
                                                    audience=item["audience"], options={"verify_iat": False}))
            entry["ok"] = True
        except Exception as exc:  # report, the Swift side fails the test with the message
            entry["error"] = f"{type(exc).__name__}: {exc}"
        jws_results.append(entry)
    return {"v1": v1_results, "jws": jws_results}


def apple_section(req):
    from appstoreserverlibrary.jws_signature_creator import (IntroductoryOfferEligibilitySignatureCreator,
                                                             PromotionalOfferV2SignatureCreator)
    from appstoreserverlibrary.promotional_offer import PromotionalOfferSignatureCreator

    key = req["privateKeyPEM"].encode()
    out = {}
    if "v1" in req:
        v1 = req["v1"]
        creator = PromotionalOfferSignatureCreator(key, req["keyId"], req["bundleId"])
        out["v1Signature"] = creator.create_signature(v1["productId"], v1["offerId"], v1["appAccountToken"],
                                                      uuid.UUID(v1["nonce"]), int(v1["timestamp"]))
    if "promotional" in req:
        p = req["promotional"]
        creator = PromotionalOfferV2SignatureCreator(key, req["keyId"], req["issuerId"], req["bundleId"])
        out["promotional"] = creator.create_signature(p["productId"], p["offerId"], p.get("transactionId"))
    if "intro" in req:
        i = req["intro"]
        creator = IntroductoryOfferEligibilitySignatureCreator(key, req["keyId"], req["issuerId"], req["bundleId"])
        out["intro"] = creator.create_signature(i["productId"], i["allowIntroductoryOffer"], i["transactionId"])
    return out


def main():
    req = json.load(sys.stdin)
    resp = {}
    if "verify" in req:
        resp["verify"] = verify_section(req["verify"])
    if "apple" in req:
        resp["apple"] = apple_section(req["apple"])
    json.dump(resp, sys.stdout)


if __name__ == "__main__":
    main()
