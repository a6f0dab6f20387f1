import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Writing to the standard streams without Foundation's buffering surprises: stdout stays machine-readable,
/// diagnostics go to stderr.
public enum Console {
    /// Writes `text` to stdout as is.
    public static func out(_ text: String) { write(1, text) }

    /// Writes `text` and a newline to stderr.
    public static func error(_ text: String) { write(2, text + "\n") }

    /// Whether a file descriptor is a terminal (progress bars and colours only then).
    public static func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }

    static func write(_ fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                return
            }
            offset += n
        }
    }
}

/// A one-line progress bar for long operations, drawn on stderr only when it is a terminal.
public struct ProgressBar: Sendable {
    public let total: Int
    public let label: String
    private let enabled: Bool

    public init(total: Int, label: String, enabled: Bool = Console.isTerminal(2)) {
        self.total = max(total, 1)
        self.label = label
        self.enabled = enabled
    }

    /// The bar's text for `done` units (exposed for tests).
    public func render(_ done: Int) -> String {
        let clamped = min(max(done, 0), total)
        let width = 30
        let filled = clamped * width / total
        let percent = clamped * 100 / total
        return "\(label) [\(String(repeating: "#", count: filled))\(String(repeating: ".", count: width - filled))] "
            + "\(percent)% (\(clamped)/\(total))"
    }

    public func update(_ done: Int) {
        guard enabled else { return }
        Console.write(2, "\r" + render(done))
    }

    public func finish() {
        guard enabled else { return }
        Console.write(2, "\r" + render(total) + "\n")
    }
}
