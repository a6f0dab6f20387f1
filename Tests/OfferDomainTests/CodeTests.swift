import Foundation
import Testing

@testable import OfferDomain

@Suite("Offer codes: normalisation, generation, collision odds")
struct CodeTests {
    @Test(
        "normalisation: case-insensitive, spaces and hyphens ignored",
        arguments: [
            ("spring2026", "SPRING2026"), ("SPRING-2026", "SPRING2026"), (" Spring 2026 ", "SPRING2026"),
            ("ab-cd-ef", "ABCDEF"), ("a\tb\nc", "ABC"), ("--x--", "X"), ("0OIL1", "0OIL1"),
            (String(repeating: "A", count: 64), String(repeating: "A", count: 64)),
        ])
    func normalizes(raw: String, expected: String) throws {
        #expect(try CodeNormalizer.normalize(raw) == expected)
    }

    @Test(
        "rejects empty and non-alphanumeric codes without echoing them",
        arguments: [
            ("", "the code is empty"), ("   ", "the code is empty"), ("- -", "the code is empty"),
            ("SPRING_2026", "a code may contain only letters A-Z, digits, spaces and hyphens"),
            ("ÉTÉ2026", "a code may contain only letters A-Z, digits, spaces and hyphens"),
            ("SPRING!", "a code may contain only letters A-Z, digits, spaces and hyphens"),
            ("١٢٣", "a code may contain only letters A-Z, digits, spaces and hyphens"),
            (String(repeating: "A", count: 65), "a code has at most 64 letters and digits"),
        ])
    func rejects(raw: String, message: String) {
        do {
            _ = try CodeNormalizer.normalize(raw)
            Issue.record("accepted")
        } catch {
            #expect(error.code == .invalidCode)
            #expect(error.field == "code")
            #expect(error.message == message)
        }
    }

    @Test("each character is kept, dropped or refused by the rule: letters, digits; hyphens, whitespace; the rest")
    func everyCharacter() {
        // The rule, one scalar at a time, as the API states it (the implementation orders its checks for speed).
        func expected(_ scalar: Unicode.Scalar) -> String?? {
            if scalar == "-" || scalar.properties.isWhitespace { return .some(nil) }  // dropped
            if scalar.isASCII, scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) {
                return .some(String(scalar).uppercased())
            }
            return .none  // refused
        }
        var checked = 0
        for value in UInt32(0)..<0x3100 {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let outcome = try? CodeNormalizer.normalize("A\(scalar)9")
            switch expected(scalar) {
            case .some(.some(let kept)): #expect(outcome == "A\(kept)9", "U+\(String(value, radix: 16))")
            case .some(.none): #expect(outcome == "A9", "U+\(String(value, radix: 16))")
            case .none: #expect(outcome == nil, "U+\(String(value, radix: 16))")
            }
            checked += 1
        }
        #expect(checked > 12_000)
    }

    @Test("the alphabet: A-Z and 2-9 without 0 O 1 I L")
    func alphabet() {
        let alphabet = String(decoding: CodeGenerator.alphabet, as: UTF8.self)
        #expect(alphabet.count == 31)
        #expect(Set(alphabet).count == 31)
        for banned in "0O1IL" { #expect(!alphabet.contains(banned)) }
        let expected = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZ23456789").subtracting("OIL")
        #expect(Set(alphabet) == expected)
    }

    @Test(
        "patterns keep literals and replace each # with one alphabet character",
        arguments: [
            (String?.none, "############", 12, 12),
            ("SPRING-####-####", "SPRING-####-####", 8, 14),
            ("spring ####", "SPRING ####", 4, 10),
            ("####", "####", 4, 4),
        ])
    func patterns(pattern: String?, normalisedPattern: String, random: Int, stored: Int) throws {
        let generator = try CodeGenerator(pattern: pattern)
        #expect(generator.pattern == normalisedPattern)
        #expect(generator.randomLength == random)
        var rng = SplitMix64(state: 42)
        for _ in 0..<50 {
            let code = generator.generate(using: &rng)
            #expect(code.count == normalisedPattern.count)
            for (p, c) in zip(normalisedPattern, code) {
                if p == "#" {
                    #expect(CodeGenerator.alphabet.contains(UInt8(ascii: c.unicodeScalars.first ?? "?")))
                } else {
                    #expect(p == c)
                }
            }
            #expect(try CodeNormalizer.normalize(code).count == stored)
        }
    }

    @Test("generation is a function of the random source")
    func deterministic() throws {
        let generator = try CodeGenerator(pattern: "SPRING-####-####")
        var a = SplitMix64(state: 7)
        var b = SplitMix64(state: 7)
        var c = SplitMix64(state: 8)
        let first = generator.generateNormalized(count: 20, using: &a)
        #expect(first == generator.generateNormalized(count: 20, using: &b))
        #expect(first != generator.generateNormalized(count: 20, using: &c))
        #expect(first.allSatisfy { $0.hasPrefix("SPRING") && $0.count == 14 && !$0.contains("-") })
        #expect(generator.generateNormalized(count: -1, using: &a).isEmpty)
    }

    @Test("every alphabet character is drawn (uniform index per #)")
    func coverage() throws {
        let generator = try CodeGenerator()
        var rng = SplitMix64(state: 1)
        var seen = Set<Character>()
        for code in generator.generateNormalized(count: 200, using: &rng) { seen.formUnion(code) }
        #expect(seen == Set(String(decoding: CodeGenerator.alphabet, as: UTF8.self)))
    }

    @Test(
        "invalid patterns",
        arguments: [
            ("SPRING-###", "a pattern needs at least 4 # (random characters)"),
            ("", "a pattern needs at least 4 # (random characters)"),
            ("SPRING_####", "a pattern may contain only #, letters, digits, - and spaces"),
            ("ÉTÉ-####", "a pattern may contain only #, letters, digits, - and spaces"),
            (String(repeating: "#", count: 65), "codes may have at most 64 characters"),
        ])
    func invalidPatterns(pattern: String, message: String) {
        do {
            _ = try CodeGenerator(pattern: pattern)
            Issue.record("accepted \(pattern)")
        } catch {
            #expect(error.code == .invalidPattern)
            #expect(error.field == "pattern")
            #expect(error.message == message)
        }
    }

    @Test("capacity is 31^n")
    func capacity() throws {
        #expect(try CodeGenerator(pattern: "####").capacity == 923_521)
        #expect(try CodeGenerator().capacity == pow(31, 12))
    }

    @Test(
        "birthday bound",
        arguments: [
            (0, 4, 0.0), (1, 4, 0.0), (2, 4, 1.0 / 923_521),
            (1_000, 4, 0.41781),  // 1 − exp(−999000 / 1847042)
            (10_000, 4, 0.99999999),
            (1_000_000, 12, 0.0000006345),  // n²/2N with N = 31^12 ≈ 7.87e17
            (923_522, 4, 1.0),  // more codes than the space
        ])
    func birthday(count: Int, length: Int, expected: Double) {
        let p = CollisionOdds.probability(count: count, length: length)
        #expect(abs(p - expected) <= max(expected * 1e-3, 1e-12), "\(p)")
        #expect(p >= 0 && p <= 1)
    }

    @Test("expected collisions and minimum length")
    func expected() {
        #expect(CollisionOdds.expectedCollisions(count: 1, length: 4) == 0)
        #expect(abs(CollisionOdds.expectedCollisions(count: 1_000, length: 4) - 999_000.0 / 1_847_042) < 1e-12)
        #expect(CollisionOdds.probability(count: 10, space: 0) == 0)
        // 1M codes with odds ≤ 1e-6: 31^12 gives 6.3e-7, 31^11 gives 2e-5.
        #expect(CollisionOdds.minimumLength(count: 1_000_000, maxProbability: 1e-6) == 12)
        #expect(CollisionOdds.minimumLength(count: 2, maxProbability: 0.5) == 1)
        #expect(CollisionOdds.minimumLength(count: 1_000, maxProbability: 0) == CodeNormalizer.maxLength)
    }
}
