#!/usr/bin/env python3
"""B5 baseline: Apple's app-store-server-library signing in one process, for a fixed time.

usage: apple_sign_bench.py --seconds S --format v1|jws
Prints: apple format=<f> seconds=<s> signatures=<n> rate=<per wall second> cpu_rate=<per CPU second>
The key is generated here (a throwaway P-256 key); inputs mirror offer-bench's.
"""
import argparse
import time
import uuid

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from appstoreserverlibrary.jws_signature_creator import PromotionalOfferV2SignatureCreator
from appstoreserverlibrary.promotional_offer import PromotionalOfferSignatureCreator


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--format", choices=["v1", "jws"], default="v1")
    args = parser.parse_args()

    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    if args.format == "v1":
        creator = PromotionalOfferSignatureCreator(pem, "BENCHKEY01", "com.example.bench")

        def sign():
            creator.create_signature("com.example.monthly.0", "PROMO", "4a1b7c2d-0000-4000-8000-00000000abcd",
                                     uuid.uuid4(), int(time.time() * 1000))
    else:
        creator = PromotionalOfferV2SignatureCreator(pem, "BENCHKEY01", "57246542-96fe-1a63-e053-0824d011072a",
                                                     "com.example.bench")

        def sign():
            creator.create_signature("com.example.monthly.0", "PROMO", "2000000123456789")

    count = 0
    start = time.perf_counter()
    cpu_start = time.process_time()
    deadline = start + args.seconds
    while True:
        for _ in range(64):
            sign()
        count += 64
        if time.perf_counter() >= deadline:
            break
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    print(f"apple format={args.format} seconds={elapsed:.2f} signatures={count} rate={round(count / elapsed)} "
          f"cpu_rate={round(count / cpu) if cpu > 0 else 0}")


if __name__ == "__main__":
    main()
