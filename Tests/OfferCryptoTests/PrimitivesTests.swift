import Foundation
import Testing

@testable import OfferCrypto

@Suite("Primitives")
struct PrimitivesTests {
    @Test("SHA-256 known answers (FIPS 180-2)")
    func sha256() {
        #expect(SHA256.hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hash(Array("abc".utf8)).count == 32)
        #expect(SHA256.hex(Array("abc".utf8)[...]) == SHA256.hex("abc"))
    }

    @Test("HMAC-SHA256 known answer (RFC 4231 test case 2)")
    func hmac() throws {
        let mac = try HMACSHA256.authenticationCode(
            for: Array("what do ya want for nothing?".utf8), key: Array("Jefe".utf8))
        #expect(Hex.encode(mac) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test("Base64url: RFC 4648 vectors, no padding, round trips, strict decoding")
    func base64url() {
        let cases: [(String, String)] = [
            ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"),
            ("fooba", "Zm9vYmE"), ("foobar", "Zm9vYmFy"),
        ]
        for (plain, encoded) in cases {
            #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
            #expect(Base64URL.decode(encoded) == Array(plain.utf8))
        }
        #expect(Base64URL.encode([0xFB, 0xFF, 0xBF]) == "-_-_")
        var generator = SecureRandomGenerator()
        for length in 0..<70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let encoded = Base64URL.encode(bytes)
            #expect(Base64URL.decode(encoded) == bytes)
            #expect(
                encoded
                    == Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                    .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: ""))
        }
        for bad in ["Zg==", "Z", "Zh", "Zm9v+", "a b", "Zm9/"] { #expect(Base64URL.decode(bad) == nil, "\(bad)") }
    }

    @Test("Base64url encoding (two characters per table read): every 12-bit pair in both halves of a group")
    func base64urlEveryPair() {
        var bytes: [UInt8] = []
        for x in 0..<4096 {
            for chunk in [x << 12 | x, x << 12 | (4095 - x)] {
                bytes += [UInt8(chunk >> 16), UInt8(truncatingIfNeeded: chunk >> 8), UInt8(truncatingIfNeeded: chunk)]
            }
        }
        let standard = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
        #expect(Base64URL.encode(bytes) == standard)
        #expect(
            Base64URL.encode(bytes.dropFirst()) + "="
                == Data(bytes.dropFirst()).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_"))
    }

    @Test("Base64url decoding agrees with the character-at-a-time definition: every length, every bad character")
    func base64urlDecodeAgainstDefinition() {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        /// RFC 4648 §5 without padding, strict: one character at a time, leftover bits must be zero.
        func reference(_ text: [UInt8]) -> [UInt8]? {
            if text.count % 4 == 1 { return nil }
            var out: [UInt8] = []
            var accumulator: UInt32 = 0
            var bits = 0
            for char in text {
                guard let value = alphabet.firstIndex(of: char) else { return nil }
                accumulator = (accumulator << 6) | UInt32(value)
                bits += 6
                if bits >= 8 {
                    bits -= 8
                    out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                }
            }
            if bits > 0 && accumulator & ((1 << UInt32(bits)) - 1) != 0 { return nil }
            return out
        }
        var generator = SecureRandomGenerator()
        for length in 0..<40 {
            let text = (0..<length).map { _ in alphabet[Int.random(in: 0..<64, using: &generator)] }
            #expect(Base64URL.decode(bytes: text) == reference(text), "\(String(decoding: text, as: UTF8.self))")
            #expect(Base64URL.decode(bytes: text[...]) == reference(text))
            for position in text.indices {
                for bad: UInt8 in [0, 0x20, 0x2B, 0x2F, 0x3D, 0x7F, 0xC3, 0xFF] {
                    var broken = text
                    broken[position] = bad
                    #expect(Base64URL.decode(bytes: broken) == nil)
                }
            }
        }
    }

    @Test("Constant-time comparison")
    func constantTime() {
        #expect(ConstantTime.equals([1, 2, 3], [1, 2, 3]))
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2, 4]))
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2]))
        #expect(ConstantTime.equals([], []))
    }

    @Test("SecureRandom: requested length, distinct draws; generator covers its range")
    func randomness() throws {
        #expect(try SecureRandom.bytes(count: 0).isEmpty)
        let a = try SecureRandom.bytes(count: 32)
        let b = try SecureRandom.bytes(count: 32)
        #expect(a.count == 32 && a != b)
        var generator = SecureRandomGenerator()
        var copy = generator
        var values = Set<UInt64>()
        for _ in 0..<3000 { values.insert(generator.next()) }
        for _ in 0..<3000 { values.insert(copy.next()) }
        #expect(values.count == 6000)  // copies share the buffer: no repeated output
        var seen = Set<Int>()
        for _ in 0..<2000 { seen.insert(Int.random(in: 0..<31, using: &generator)) }
        #expect(seen.count == 31)
    }

    @Test("Hex decode")
    func hex() {
        #expect(Hex.decode("00ffAB") == [0, 255, 171])
        #expect(Hex.decode("0") == nil)
        #expect(Hex.decode("zz") == nil)
    }

    @Test("JSON integers are written exactly", arguments: [0, 7, -7, 1_698_148_900, Int64.max, Int64.min])
    func integers(_ number: Int64) {
        var out: [UInt8] = []
        JSONObjectWriter.appendInteger(number, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == String(number))
    }
}
