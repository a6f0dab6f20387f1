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
        if let done = input.withContiguousStorageIfAvailable({ decode(buffer: $0) }) { return done }
        return Array(input).withUnsafeBufferPointer { decode(buffer: $0) }
    }

    /// Four characters to three bytes at a time, into an array of the exact size (every JWS the gateway verifies
    /// passes through here: B11's profile had the byte-at-a-time loop as its hottest function of ours).
    private static func decode(buffer input: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        let count = input.count
        let remainder = count % 4
        if remainder == 1 { return nil }
        let outputCount = count / 4 * 3 + (remainder == 0 ? 0 : remainder - 1)
        var valid = true
        let out = reverse.withUnsafeBufferPointer { table in
            [UInt8](unsafeUninitializedCapacity: outputCount) { out, initialized in
                // A value of 0xFF marks a character outside the alphabet: any of them sets the top bits of an OR.
                func value(_ index: Int) -> UInt32 { UInt32(table[Int(input[index])]) }
                var i = 0
                var o = 0
                while i + 4 <= count {
                    let a = value(i)
                    let b = value(i + 1)
                    let c = value(i + 2)
                    let d = value(i + 3)
                    guard (a | b | c | d) & 0xC0 == 0 else {
                        valid = false
                        break
                    }
                    let chunk = a << 18 | b << 12 | c << 6 | d
                    out[o] = UInt8(truncatingIfNeeded: chunk >> 16)
                    out[o + 1] = UInt8(truncatingIfNeeded: chunk >> 8)
                    out[o + 2] = UInt8(truncatingIfNeeded: chunk)
                    i += 4
                    o += 3
                }
                if valid && remainder >= 2 {
                    let a = value(i)
                    let b = value(i + 1)
                    let c = remainder == 3 ? value(i + 2) : 0
                    // Leftover bits must be zero (canonical encoding).
                    if (a | b | c) & 0xC0 != 0 || (remainder == 2 ? b & 0x0F : c & 0x03) != 0 {
                        valid = false
                    } else {
                        out[o] = UInt8(truncatingIfNeeded: a << 2 | b >> 4)
                        o += 1
                        if remainder == 3 {
                            out[o] = UInt8(truncatingIfNeeded: (b & 0x0F) << 4 | c >> 2)
                            o += 1
                        }
                    }
                }
                initialized = o
            }
        }
        return valid ? out : nil
    }
}
