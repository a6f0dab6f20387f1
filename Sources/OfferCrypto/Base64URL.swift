/// Base64url without padding (RFC 4648 §5), as JWS compact serialization uses it.
public enum Base64URL {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    private static let reverse: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, char) in alphabet.enumerated() { table[Int(char)] = UInt8(index) }
        return table
    }()

    /// Encodes bytes as base64url without `=` padding.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        var out = [UInt8]()
        encode(bytes, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the base64url (no padding) encoding of `bytes` to `out`.
    public static func encode(_ bytes: some Collection<UInt8>, into out: inout [UInt8]) {
        out.reserveCapacity(out.count + (bytes.count * 4 + 2) / 3)
        var iterator = bytes.makeIterator()
        while let b0 = iterator.next() {
            let b1 = iterator.next()
            let b2 = iterator.next()
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int(((b0 & 0x03) << 4) | ((b1 ?? 0) >> 4))])
            guard let b1 else { break }
            out.append(alphabet[Int(((b1 & 0x0F) << 2) | ((b2 ?? 0) >> 6))])
            guard let b2 else { break }
            out.append(alphabet[Int(b2 & 0x3F)])
        }
    }

    /// Decodes strict base64url without padding; `nil` for any other character, `=` padding, or an impossible length.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        decode(bytes: Array(text.utf8))
    }

    /// Decodes strict base64url (no padding) from its ASCII bytes.
    public static func decode(bytes input: some Collection<UInt8>) -> [UInt8]? {
        if input.count % 4 == 1 { return nil }
        var out = [UInt8]()
        out.reserveCapacity(input.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for char in input {
            let value = reverse[Int(char)]
            if value == 0xFF { return nil }
            accumulator = (accumulator << 6) | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // Leftover bits must be zero (canonical encoding).
        if bits > 0 && accumulator & ((1 << UInt32(bits)) - 1) != 0 { return nil }
        return out
    }
}
