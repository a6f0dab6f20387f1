// OfferCrypto: the signing layer over OpenSSL's libcrypto (through the CCrypto shim).
//
// What it offers (every C handle stays inside this module):
// - `SigningKey` (App Store Connect `.p8`, PKCS#8 P-256; tolerant PEM normalisation) and `PublicKey` (SPKI PEM,
//   DER / raw / compact-JWS verification).
// - `OfferSigner`: Apple promotional offer V1 signatures (`PromotionalOfferV1Payload`, `V1Signature`) and ES256
//   compact JWS for any `JWSAudience` (`promotionalOfferJWS`, `introductoryOfferEligibilityJWS`), with header and
//   claims written as exact bytes. Clock and nonces are injected.
// - Keys at rest: `MasterKey`, `MasterKeyring`, `KeySealer`, `SealedKey` (AES-256-GCM, tenant and key id bound).
// - Primitives: `SHA256`, `HMACSHA256`, `SecureRandom`, `SecureRandomGenerator`, `ConstantTime`, `Base64URL`, `Hex`.
// - One error type: `CryptoError` (code, context, OpenSSL error queue; redacted description).
//
// Concurrency: keys are parsed once and shared; each signature takes a pooled OpenSSL context (the pool's lock
// never covers an OpenSSL call), so one `OfferSigner` signs on every core at once.
