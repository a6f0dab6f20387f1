extension String {
    /// Whether the text has a control character: Unicode general category Cc, which is exactly U+0000-U+001F and
    /// U+007F-U+009F. Ids, codes and names refuse them (NUL above all: libpq would cut a value there).
    ///
    /// Read off the UTF-8 bytes (U+0080-U+009F are `C2 80`-`C2 9F`; `C2` is never a continuation byte), without a
    /// Unicode property lookup per character: this runs on every request's ids.
    public var hasControlCharacters: Bool {
        var previous: UInt8 = 0
        for byte in utf8 {
            if byte < 0x20 || byte == 0x7F || (previous == 0xC2 && byte < 0xA0) { return true }
            previous = byte
        }
        return false
    }
}
