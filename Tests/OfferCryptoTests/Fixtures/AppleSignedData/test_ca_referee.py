#!/usr/bin/env python3
"""Test certificate authority and referee for Tests/OfferCryptoTests/AppleSignedDataRefereeTests.swift.

Run by the Swift tests with the ops/pyenv venv (Python `cryptography` and Apple's `app-store-server-library`).
Reads nothing; writes one JSON object on stdout:

  {"rootDER": b64,            the test CA's root (the Swift verifier pins it as an extra root)
   "leafKeyPKCS8": PEM,       the good leaf's private key (the Swift tests sign their own payloads with it)
   "x5c": [b64, b64, b64],    the good chain as it goes into a header
   "cases": [{"name", "kind", "jws", "expectation": {"bundleId", "appAppleId", "allowSandbox", "allowXcode"},
              "apple": {"accepted": bool, "results": {"<environment>": "OK" | "<why Apple refused>"}}}]}

The certificate authority mirrors Apple's: a P-384 root, a P-384 intermediate carrying the WWDR OID
1.2.840.113635.100.6.2.1, a P-256 leaf carrying the receipt-signing OID 1.2.840.113635.100.6.11.1 (both as
non-critical extensions holding DER NULL), every certificate with Subject and Authority Key Identifiers (OpenSSL 3
refuses a chain without them in strict mode, in Apple's library as in ours).

Apple's verdict for a case: Apple's SignedDataVerifier is configured with ONE environment, OfferGate's expectation
allows a SET (Production always, Sandbox and Xcode/LocalTesting per flag). So the case is run through one
SignedDataVerifier per allowed environment (online checks off, root = the test root) and Apple "accepts" when any
of them accepts. A Production verifier needs an app Apple id: the expectation's, or for transactions and renewal
info (for which Apple's library requires one but never compares it) 0, as the corpus' verify.py does; a Production
notification or realtime request with no expected app Apple id cannot be verified by Apple's library at all
(its constructor raises), which counts as a rejection.
"""
import base64
import datetime
import hashlib
import hmac
import json
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import NameOID

from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier, VerificationException

LEAF_OID = x509.ObjectIdentifier("1.2.840.113635.100.6.11.1")
WWDR_OID = x509.ObjectIdentifier("1.2.840.113635.100.6.2.1")
DER_NULL = b"\x05\x00"
BUNDLE = "com.example.offergate"
APP_APPLE_ID = 1234567890
SIGNED_DATE = 1748736000000  # 2025-06-01T00:00:00Z


def utc(year, month=1, day=1):
    return datetime.datetime(year, month, day, tzinfo=datetime.timezone.utc)


def ms(dt):
    return int(dt.timestamp() * 1000)


def name(common):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "OfferGate Test CA")])


def make_cert(subject, key, issuer_name, issuer_key, not_before, not_after, ca, oid=None, serial=None):
    builder = (x509.CertificateBuilder()
               .subject_name(name(subject))
               .issuer_name(name(issuer_name))
               .public_key(key.public_key())
               .serial_number(serial or x509.random_serial_number())
               .not_valid_before(not_before)
               .not_valid_after(not_after)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                              critical=False))
    if ca:
        builder = (builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                                key_encipherment=False, data_encipherment=False,
                                                key_agreement=False, key_cert_sign=True, crl_sign=True,
                                                encipher_only=False, decipher_only=False), critical=True))
    else:
        builder = (builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                                key_encipherment=False, data_encipherment=False,
                                                key_agreement=False, key_cert_sign=False, crl_sign=False,
                                                encipher_only=False, decipher_only=False), critical=True))
    if oid is not None:
        builder = builder.add_extension(x509.UnrecognizedExtension(oid, DER_NULL), critical=False)
    return builder.sign(issuer_key, hashes.SHA384() if isinstance(issuer_key, ec.EllipticCurvePrivateKey) else
                        hashes.SHA256())


def common_name(cert):
    return cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value


def der(cert):
    return cert.public_bytes(serialization.Encoding.DER)


def b64(data):
    return base64.b64encode(data).decode()


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def compact_json(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


def raw_signature(key, message):
    r, s = decode_dss_signature(key.sign(message, ec.ECDSA(hashes.SHA256())))
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


def jws(header, payload_bytes, sign):
    signing_input = (b64url(compact_json(header)) + "." + b64url(payload_bytes)).encode()
    return signing_input.decode() + "." + b64url(sign(signing_input))


class CA:
    def __init__(self, label):
        self.root_key = ec.generate_private_key(ec.SECP384R1())
        self.root = make_cert(f"{label} Root", self.root_key, f"{label} Root", self.root_key, utc(2015), utc(2045),
                              ca=True)
        self.int_key = ec.generate_private_key(ec.SECP384R1())
        self.intermediate = self.issue_intermediate(f"{label} WWDR", WWDR_OID)
        self.leaf_key = ec.generate_private_key(ec.SECP256R1())
        self.leaf = self.issue_leaf(self.leaf_key, utc(2022), utc(2034), LEAF_OID)

    def issue_intermediate(self, subject, oid, key=None):
        return make_cert(subject, key or self.int_key, common_name(self.root), self.root_key, utc(2016), utc(2042),
                         ca=True, oid=oid)

    def issue_leaf(self, key, not_before, not_after, oid, issuer=None, issuer_key=None):
        issuer = issuer or self.intermediate
        issuer_key = issuer_key or self.int_key
        return make_cert("Receipt Signing", key, common_name(issuer), issuer_key, not_before, not_after, ca=False,
                         oid=oid)

    def x5c(self, leaf=None, intermediate=None):
        return [b64(der(leaf or self.leaf)), b64(der(intermediate or self.intermediate)), b64(der(self.root))]


def transaction(environment="Production", bundle=BUNDLE, signed_date=SIGNED_DATE):
    drop_signed_date = signed_date is None
    signed_date = SIGNED_DATE if drop_signed_date else signed_date
    body = {"transactionId": "2000000123456789", "originalTransactionId": "2000000123456789",
            "bundleId": bundle, "productId": "com.example.monthly", "subscriptionGroupIdentifier": "21000001",
            "purchaseDate": signed_date - 1000, "originalPurchaseDate": signed_date - 1000,
            "expiresDate": signed_date + 30 * 86400000, "quantity": 1, "type": "Auto-Renewable Subscription",
            "inAppOwnershipType": "PURCHASED", "signedDate": signed_date, "environment": environment,
            "transactionReason": "PURCHASE", "storefront": "USA", "storefrontId": "143441", "price": 9990,
            "currency": "USD", "offerType": 2, "offerIdentifier": "PROMO_50", "offerDiscountType": "PAY_AS_YOU_GO"}
    if drop_signed_date:
        del body["signedDate"]
    return body


def renewal(environment="Production"):
    return {"originalTransactionId": "2000000123456789", "autoRenewProductId": "com.example.monthly",
            "productId": "com.example.monthly", "autoRenewStatus": 1, "signedDate": SIGNED_DATE,
            "environment": environment, "recentSubscriptionStartDate": SIGNED_DATE - 1000,
            "renewalDate": SIGNED_DATE + 30 * 86400000, "eligibleWinBackOfferIds": ["WINBACK_1"]}


def notification(environment="Production", app_apple_id=APP_APPLE_ID, section="data"):
    data = {"bundleId": BUNDLE, "bundleVersion": "42", "environment": environment, "status": 1}
    if app_apple_id is not None:
        data["appAppleId"] = app_apple_id
    if section == "summary":
        data = {"bundleId": BUNDLE, "environment": environment, "appAppleId": app_apple_id,
                "requestIdentifier": "5f6a2c1e-0000-4000-8000-000000000001", "productId": "com.example.monthly",
                "storefrontCountryCodes": ["USA"], "succeededCount": 3, "failedCount": 0}
    return {"notificationType": "SUBSCRIBED", "subtype": "RESUBSCRIBE",
            "notificationUUID": "0b8f5c1e-1d2a-4b5c-8d9e-0f1a2b3c4d5e", "version": "2.0",
            "signedDate": SIGNED_DATE, section: data}


def realtime(environment="Production", app_apple_id=APP_APPLE_ID):
    return {"originalTransactionId": "2000000123456789", "appAppleId": app_apple_id,
            "productId": "com.example.monthly", "userLocale": "en-US",
            "requestIdentifier": "7c1d2e3f-0000-4000-8000-000000000002", "signedDate": SIGNED_DATE,
            "environment": environment}


ENVIRONMENTS = {"Production": Environment.PRODUCTION, "Sandbox": Environment.SANDBOX, "Xcode": Environment.XCODE,
                "LocalTesting": Environment.LOCAL_TESTING}


def apple_verdict(kind, token, expectation, root_der):
    environments = ["Production"]
    if expectation["allowSandbox"]:
        environments.append("Sandbox")
    if expectation["allowXcode"]:
        environments += ["Xcode", "LocalTesting"]
    results = {}
    for env_name in environments:
        env = ENVIRONMENTS[env_name]
        app_apple_id = expectation["appAppleId"]
        if env == Environment.PRODUCTION and app_apple_id is None and kind in ("transaction", "renewalInfo"):
            app_apple_id = 0
        try:
            verifier = SignedDataVerifier([root_der], False, env, expectation["bundleId"], app_apple_id)
            if kind == "transaction":
                verifier.verify_and_decode_signed_transaction(token)
            elif kind == "renewalInfo":
                verifier.verify_and_decode_renewal_info(token)
            elif kind == "notification":
                verifier.verify_and_decode_notification(token)
            else:
                verifier.verify_and_decode_realtime_request(token)
            results[env_name] = "OK"
        except VerificationException as e:
            cause = f" ({type(e.__cause__).__name__}: {e.__cause__})" if e.__cause__ is not None else ""
            results[env_name] = f"{e.status.name}{cause}"[:300]
        except Exception as e:  # the constructor's ValueError, a model that does not structure, ...
            results[env_name] = f"{type(e).__name__}: {e}"[:300]
    return {"accepted": any(v == "OK" for v in results.values()), "results": results}


def main():
    good = CA("OfferGate Test")
    other = CA("Stranger")  # a complete, well-formed CA nobody pins
    header = {"alg": "ES256", "x5c": good.x5c()}
    sign = lambda m: raw_signature(good.leaf_key, m)

    def expect(allow_sandbox=False, allow_xcode=False, app_apple_id=APP_APPLE_ID, bundle=BUNDLE):
        return {"bundleId": bundle, "appAppleId": app_apple_id, "allowSandbox": allow_sandbox,
                "allowXcode": allow_xcode}

    cases = []

    def case(case_name, kind, token, expectation):
        cases.append({"name": case_name, "kind": kind, "jws": token, "expectation": expectation})

    tx = compact_json(transaction())
    # Good data of every kind.
    case("good_transaction_production", "transaction", jws(header, tx, sign), expect())
    case("good_transaction_sandbox", "transaction", jws(header, compact_json(transaction("Sandbox")), sign),
         expect(allow_sandbox=True))
    case("good_transaction_production_no_app_apple_id", "transaction", jws(header, tx, sign),
         expect(app_apple_id=None))
    case("good_renewal_production", "renewalInfo", jws(header, compact_json(renewal()), sign), expect())
    case("good_renewal_sandbox", "renewalInfo", jws(header, compact_json(renewal("Sandbox")), sign),
         expect(allow_sandbox=True))
    case("good_notification_production", "notification", jws(header, compact_json(notification()), sign), expect())
    case("good_notification_sandbox", "notification",
         jws(header, compact_json(notification("Sandbox", app_apple_id=None)), sign),
         expect(allow_sandbox=True, app_apple_id=None))
    case("good_notification_summary", "notification",
         jws(header, compact_json(notification(section="summary")), sign), expect())
    case("good_realtime_production", "retentionMessagingRequest", jws(header, compact_json(realtime()), sign),
         expect())

    # The chain.
    stranger_sign = lambda m: raw_signature(other.leaf_key, m)
    case("wrong_root", "transaction", jws({"alg": "ES256", "x5c": other.x5c()}, tx, stranger_sign), expect())
    leaf_without_oid = good.issue_leaf(good.leaf_key, utc(2022), utc(2034), None)
    case("leaf_missing_oid", "transaction", jws({"alg": "ES256", "x5c": good.x5c(leaf=leaf_without_oid)}, tx, sign),
         expect())
    int_key2 = ec.generate_private_key(ec.SECP384R1())
    intermediate_without_oid = good.issue_intermediate("OfferGate Test Plain CA", None, key=int_key2)
    leaf_under_plain = good.issue_leaf(good.leaf_key, utc(2022), utc(2034), LEAF_OID, issuer=intermediate_without_oid,
                                       issuer_key=int_key2)
    case("intermediate_missing_oid", "transaction",
         jws({"alg": "ES256", "x5c": good.x5c(leaf=leaf_under_plain, intermediate=intermediate_without_oid)}, tx, sign),
         expect())
    # Validity at signedDate, not now: the good leaf is valid 2022-2034.
    case("expired_at_signed_date_valid_now", "transaction",
         jws(header, compact_json(transaction(signed_date=ms(utc(2035, 3, 1)))), sign), expect())
    case("not_yet_valid_at_signed_date", "transaction",
         jws(header, compact_json(transaction(signed_date=ms(utc(2021, 6, 1)))), sign), expect())
    old_leaf = good.issue_leaf(good.leaf_key, utc(2018), utc(2020), LEAF_OID)
    case("valid_at_signed_date_expired_now", "transaction",
         jws({"alg": "ES256", "x5c": good.x5c(leaf=old_leaf)}, compact_json(transaction(signed_date=ms(utc(2019, 6, 1)))),
             sign), expect())
    case("two_certificates", "transaction", jws({"alg": "ES256", "x5c": good.x5c()[:2]}, tx, sign), expect())
    case("four_certificates", "transaction", jws({"alg": "ES256", "x5c": good.x5c() + [good.x5c()[2]]}, tx, sign),
         expect())
    x = good.x5c()
    case("x5c_reordered", "transaction", jws({"alg": "ES256", "x5c": [x[1], x[0], x[2]]}, tx, sign), expect())
    leaf_under_root = make_cert("Receipt Signing", good.leaf_key, "OfferGate Test Root", good.root_key, utc(2022),
                                utc(2034), ca=False, oid=LEAF_OID)
    case("leaf_issued_by_root", "transaction",
         jws({"alg": "ES256", "x5c": [b64(der(leaf_under_root)), x[2], x[2]]}, tx, sign), expect())
    case("x5c_last_is_not_the_root", "transaction", jws({"alg": "ES256", "x5c": [x[0], x[1], x[1]]}, tx, sign),
         expect())
    trailing = good.x5c()
    trailing[0] = b64(base64.b64decode(trailing[0]) + b"\x00\x00")
    case("leaf_der_with_trailing_bytes", "transaction", jws({"alg": "ES256", "x5c": trailing}, tx, sign), expect())
    case("x5c_entry_not_base64", "transaction", jws({"alg": "ES256", "x5c": [x[0], x[1], "not base64!"]}, tx, sign),
         expect())

    # The signature.
    good_token = jws(header, tx, sign)
    h, p, s = good_token.split(".")
    tampered_payload = compact_json(transaction()).replace(b'"price":9990', b'"price":9991')
    case("tampered_payload", "transaction", f"{h}.{b64url(tampered_payload)}.{s}", expect())
    sig = bytearray(base64.urlsafe_b64decode(s + "=="))
    sig[10] ^= 0x01
    case("tampered_signature", "transaction", f"{h}.{p}.{b64url(bytes(sig))}", expect())
    case("der_signature", "transaction",
         jws(header, tx, lambda m: good.leaf_key.sign(m, ec.ECDSA(hashes.SHA256()))), expect())
    case("signature_segment_padded", "transaction", f"{h}.{p}.{s}==", expect())
    case("alg_none", "transaction", jws({"alg": "none", "x5c": good.x5c()}, tx, lambda m: b""), expect())
    case("alg_hs256", "transaction",
         jws({"alg": "HS256", "x5c": good.x5c()}, tx, lambda m: hmac.new(der(good.leaf), m, hashlib.sha256).digest()),
         expect())
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    case("alg_rs256", "transaction",
         jws({"alg": "RS256", "x5c": good.x5c()}, tx, lambda m: rsa_key.sign(m, padding.PKCS1v15(), hashes.SHA256())),
         expect())

    # The payload against the tenant.
    case("wrong_bundle_id", "transaction", jws(header, compact_json(transaction(bundle="com.example.other")), sign),
         expect())
    case("wrong_environment", "transaction", jws(header, compact_json(transaction("Sandbox")), sign), expect())
    case("renewal_wrong_environment", "renewalInfo", jws(header, compact_json(renewal("Sandbox")), sign), expect())
    case("unknown_environment", "transaction", jws(header, compact_json(transaction("Staging")), sign),
         expect(allow_sandbox=True))
    case("notification_production_without_app_apple_id", "notification",
         jws(header, compact_json(notification()), sign), expect(app_apple_id=None))
    case("notification_wrong_app_apple_id", "notification",
         jws(header, compact_json(notification(app_apple_id=987)), sign), expect())
    case("notification_wrong_bundle_id", "notification", jws(header, compact_json(notification()), sign),
         expect(bundle="com.example.other"))
    case("realtime_wrong_app_apple_id", "retentionMessagingRequest",
         jws(header, compact_json(realtime(app_apple_id=987)), sign), expect())
    def other_section(section, body):
        return compact_json({"notificationType": "EXTERNAL_PURCHASE_TOKEN", "subtype": "UNREPORTED",
                             "notificationUUID": "1c2d3e4f-0000-4000-8000-000000000003", "version": "2.0",
                             "signedDate": SIGNED_DATE, section: body})

    token = {"externalPurchaseId": "SANDBOX_7f0c1a2b", "tokenCreationDate": SIGNED_DATE, "appAppleId": APP_APPLE_ID,
             "bundleId": BUNDLE}
    case("good_notification_external_purchase_token_sandbox", "notification",
         jws(header, other_section("externalPurchaseToken", token), sign), expect(allow_sandbox=True))
    case("notification_external_purchase_token_sandbox_not_allowed", "notification",
         jws(header, other_section("externalPurchaseToken", token), sign), expect())
    case("good_notification_external_purchase_token_production", "notification",
         jws(header, other_section("externalPurchaseToken", dict(token, externalPurchaseId="7f0c1a2b")), sign),
         expect())
    case("good_notification_app_data", "notification",
         jws(header, other_section("appData", {"appAppleId": APP_APPLE_ID, "bundleId": BUNDLE,
                                               "environment": "Production"}), sign), expect())
    case("payload_not_an_object", "transaction", jws(header, b"[1,2,3]", sign), expect())
    as_string = dict(transaction(), signedDate=str(SIGNED_DATE))
    case("signed_date_as_string", "transaction", jws(header, compact_json(as_string), sign), expect())
    case("payload_with_past_exp", "transaction", jws(header, compact_json(dict(transaction(), exp=1)), sign), expect())
    case("payload_with_aud", "transaction", jws(header, compact_json(dict(transaction(), aud="x")), sign), expect())
    case("payload_without_signed_date", "transaction", jws(header, compact_json(transaction(signed_date=None)), sign),
         expect())

    # Xcode data: signed by a local StoreKit certificate (here a self-signed one), never by Apple.
    xcode_key = ec.generate_private_key(ec.SECP256R1())
    xcode_cert = make_cert("StoreKit Testing in Xcode", xcode_key, "StoreKit Testing in Xcode", xcode_key, utc(2024),
                           utc(2044), ca=False)
    xcode_token = jws({"alg": "ES256", "kid": "Apple_Xcode_Key", "x5c": [b64(der(xcode_cert))]},
                      compact_json(transaction("Xcode")), lambda m: raw_signature(xcode_key, m))
    case("xcode_transaction_allowed", "transaction", xcode_token, expect(allow_xcode=True))
    case("xcode_transaction_not_allowed", "transaction", xcode_token, expect(allow_sandbox=True))
    local_token = jws({"alg": "ES256", "x5c": [b64(der(xcode_cert))]}, compact_json(renewal("LocalTesting")),
                      lambda m: raw_signature(xcode_key, m))
    case("local_testing_renewal_allowed", "renewalInfo", local_token, expect(allow_xcode=True))
    case("local_testing_renewal_not_allowed", "renewalInfo", local_token, expect())

    root_der = der(good.root)
    for c in cases:
        c["apple"] = apple_verdict(c["kind"], c["jws"], c["expectation"], root_der)
    out = {
        "rootDER": b64(root_der),
        "strangerRootDER": b64(der(other.root)),
        "leafKeyPKCS8": good.leaf_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                    serialization.NoEncryption()).decode(),
        "x5c": good.x5c(),
        "cases": cases,
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
