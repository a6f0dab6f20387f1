/// Base64url without padding (RFC 4648 §5), as JWS compact serialization uses it.
public enum Base64URL {
    private static let alphabet: [UInt8] = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

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
        let done: Void? = bytes.withContiguousStorageIfAvailable { encode(buffer: $0, into: &out) }
        if done == nil { Array(bytes).withUnsafeBufferPointer { encode(buffer: $0, into: &out) } }
    }

    private static func encode(buffer input: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        let count = input.count
        let outputCount = (count / 3) * 4 + [0, 2, 3][count % 3]
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: outputCount))
        alphabet.withUnsafeBufferPointer { table in
            out.withUnsafeMutableBufferPointer { whole in
                var o = start
                var i = 0
                while i + 3 <= count {
                    let chunk = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8 | UInt32(input[i + 2])
                    whole[o] = table[Int(chunk >> 18)]
                    whole[o + 1] = table[Int((chunk >> 12) & 0x3F)]
                    whole[o + 2] = table[Int((chunk >> 6) & 0x3F)]
                    whole[o + 3] = table[Int(chunk & 0x3F)]
                    i += 3
                    o += 4
                }
                switch count - i {
                case 1:
                    let chunk = UInt32(input[i]) << 16
                    whole[o] = table[Int(chunk >> 18)]
                    whole[o + 1] = table[Int((chunk >> 12) & 0x3F)]
                case 2:
                    let chunk = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8
                    whole[o] = table[Int(chunk >> 18)]
                    whole[o + 1] = table[Int((chunk >> 12) & 0x3F)]
                    whole[o + 2] = table[Int((chunk >> 6) & 0x3F)]
                default:
                    break
                }
            }
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
