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

    /// The length of the base64url (no padding) encoding of `count` bytes.
    static func encodedCount(_ count: Int) -> Int { count / 3 * 4 + (count % 3 == 0 ? 0 : count % 3 + 1) }

    private static func encode(buffer input: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        let start = out.count
        let added = encodedCount(input.count)
        out.append(contentsOf: repeatElement(0, count: added))
        out.withUnsafeMutableBufferPointer { whole in _ = write(input, to: whole.baseAddress! + start) }
    }

    /// Every pair of characters for 12 bits, as the two ASCII bytes in memory order (first character first), so
    /// three input bytes become two table reads and two 2-byte stores: a JWS's claims and signature are encoded on
    /// every signature.
    private static let pairs: [UInt16] = (0..<4096).map { bits in
        UInt16(littleEndian: UInt16(alphabet[bits >> 6]) | UInt16(alphabet[bits & 0x3F]) << 8)
    }

    /// Writes the base64url (no padding) encoding of `input` at `out`, which must have room for
    /// `encodedCount(input.count)` bytes; returns that count.
    static func write(_ input: UnsafeBufferPointer<UInt8>, to out: UnsafeMutablePointer<UInt8>) -> Int {
        let count = input.count
        var o = 0
        var i = 0
        pairs.withUnsafeBufferPointer { pairs in
            let raw = UnsafeMutableRawPointer(out)
            while i + 3 <= count {
                let chunk = Int(input[i]) << 16 | Int(input[i + 1]) << 8 | Int(input[i + 2])
                raw.storeBytes(of: pairs[chunk >> 12], toByteOffset: o, as: UInt16.self)
                raw.storeBytes(of: pairs[chunk & 0xFFF], toByteOffset: o + 2, as: UInt16.self)
                i += 3
                o += 4
            }
        }
        alphabet.withUnsafeBufferPointer { table in
            switch count - i {
            case 1:
                let chunk = Int(input[i]) << 16
                out[o] = table[chunk >> 18]
                out[o + 1] = table[(chunk >> 12) & 0x3F]
                o += 2
            case 2:
                let chunk = Int(input[i]) << 16 | Int(input[i + 1]) << 8
                out[o] = table[chunk >> 18]
                out[o + 1] = table[(chunk >> 12) & 0x3F]
                out[o + 2] = table[(chunk >> 6) & 0x3F]
                o += 3
            default:
                break
            }
        }
        return o
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
