import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Writing to the standard streams without Foundation's buffering surprises: stdout stays machine-readable,
/// diagnostics go to stderr.
public enum Console {
    /// Writes `text` to stdout as is.
    public static func out(_ text: String) { try? write(text, to: 1) }

    /// Writes `text` and a newline to stderr.
    public static func error(_ text: String) { try? write(text + "\n", to: 2) }

    /// Whether a file descriptor is a terminal (progress bars and colours only then).
    public static func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }

    /// Writes all of `text` to `fd` (retrying interrupted writes), or throws what went wrong.
    public static func write(_ text: String, to fd: Int32) throws(Failure) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { buffer in
                Glibc.write(fd, buffer.baseAddress.map { $0 + offset }, buffer.count - offset)
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure("cannot write the output: \(String(cString: strerror(errno)))")
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
        try? Console.write("\r" + render(done), to: 2)
    }

    public func finish() {
        guard enabled else { return }
        try? Console.write("\r" + render(total) + "\n", to: 2)
    }
}
