/// Text for HTML documents, shared by every page the tools write (offer-load's report, offerctl's funnel report).
public enum HTMLText {
    /// Escapes text for HTML element content and attribute values (`&`, `<`, `>`, `"`, `'`).
    public static func escape(_ s: String) -> String {
        var out = ""
        out.reserveCapacity(s.count)
        for c in s {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(c)
            }
        }
        return out
    }
}
