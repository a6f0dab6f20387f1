import Foundation
import JSONRPC
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Log levels, least to most severe.
public enum LogLevel: Int, Sendable, Comparable, CaseIterable {
    case debug, info, warning, error

    public init?(name: String) {
        switch name.lowercased() {
        case "debug": self = .debug
        case "info": self = .info
        case "warning", "warn": self = .warning
        case "error": self = .error
        default: return nil
        }
    }

    public var name: String {
        switch self {
        case .debug: "debug"
        case .info: "info"
        case .warning: "warning"
        case .error: "error"
        }
    }

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// Where log lines go. The default writes one JSON object per line to stderr (stdout may carry JSON-RPC).
public protocol LogSink: Sendable {
    func write(_ line: String)
}

/// Writes whole lines to a file descriptor (stderr by default) under a lock, so lines never interleave.
public final class FileDescriptorLogSink: LogSink {
    private let fd: Int32
    private let lock = Mutex(())

    public init(fd: Int32 = 2) { self.fd = fd }

    public func write(_ line: String) {
        var bytes = Array(line.utf8)
        bytes.append(0x0A)
        lock.withLock { _ in
            var offset = 0
            while offset < bytes.count {
                let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }
                offset += n
            }
        }
    }
}

/// Keeps lines in memory (tests).
public final class MemoryLogSink: LogSink {
    private let lines = Mutex<[String]>([])
    public init() {}
    public func write(_ line: String) { lines.withLock { $0.append(line) } }
    public var all: [String] { lines.withLock { $0 } }
}

/// A structured logger passed around as a value (swift-log style): dotted metadata keys, JSON lines.
///
/// Callers must never put secrets in messages or metadata: API keys, private keys, codes in bulk, signatures
/// and bound SQL values stay out of logs.
public struct Logger: Sendable {
    public var level: LogLevel
    public var metadata: [String: String]
    private let sink: any LogSink

    public init(level: LogLevel = .info, sink: any LogSink = FileDescriptorLogSink(), metadata: [String: String] = [:])
    {
        self.level = level
        self.sink = sink
        self.metadata = metadata
    }

    /// A logger with extra metadata.
    public func with(_ extra: [String: String]) -> Logger {
        var copy = self
        copy.metadata.merge(extra) { _, new in new }
        return copy
    }

    public func debug(_ message: @autoclosure () -> String, _ extra: [String: String] = [:]) {
        log(.debug, message(), extra)
    }
    public func info(_ message: @autoclosure () -> String, _ extra: [String: String] = [:]) {
        log(.info, message(), extra)
    }
    public func warning(_ message: @autoclosure () -> String, _ extra: [String: String] = [:]) {
        log(.warning, message(), extra)
    }
    public func error(_ message: @autoclosure () -> String, _ extra: [String: String] = [:]) {
        log(.error, message(), extra)
    }

    public func isEnabled(_ level: LogLevel) -> Bool { level >= self.level }

    public func log(_ level: LogLevel, _ message: String, _ extra: [String: String] = [:]) {
        guard level >= self.level else { return }
        var line = "{\"ts\":\"\(Self.timestamp())\",\"level\":\"\(level.name)\",\"msg\":"
        Self.appendQuoted(message, to: &line)
        let merged = metadata.merging(extra) { _, new in new }
        for key in merged.keys.sorted() {
            line += ","
            Self.appendQuoted(key, to: &line)
            line += ":"
            Self.appendQuoted(merged[key] ?? "", to: &line)
        }
        line += "}"
        sink.write(line)
    }

    static func timestamp(_ date: Date = Date()) -> String {
        let seconds = date.timeIntervalSince1970
        var whole = time_t(seconds.rounded(.down))
        let millis = Int((seconds - Double(whole)) * 1000)
        var parts = tm()
        gmtime_r(&whole, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(millis), 3))Z"
    }

    /// `text` as a JSON string literal (the JSON-RPC serializer's escaping).
    static func appendQuoted(_ text: String, to out: inout String) {
        var bytes: [UInt8] = []
        JSONSerializer.appendString(text, to: &bytes)
        out += String(decoding: bytes, as: UTF8.self)
    }
}
