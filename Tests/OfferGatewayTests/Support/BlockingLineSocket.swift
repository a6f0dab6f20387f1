import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A blocking connection to a Unix socket that writes and reads newline-framed lines on the calling thread, for
/// tests that must measure only the gateway's event loops: `RPCClient`s share one client event loop in the test
/// process, so a stall of that loop (dozens of tests starting at once) would look like the client's silence.
final class BlockingLineSocket: @unchecked Sendable {  // used by one thread at a time
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private let fd: Int32
    private var buffered: [UInt8] = []

    /// Connects to `path`; a read waits at most `readTimeout` seconds.
    init(path: String, readTimeout: Int = 30) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket(2): errno \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            close(fd)
            throw Failure(description: "socket path too long: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in bytes.enumerated() { raw[i] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            let code = errno
            close(fd)
            throw Failure(description: "connect(2) to \(path): errno \(code)")
        }
        var timeout = timeval(tv_sec: readTimeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    /// Writes `line` and a newline, all of it.
    func send(_ line: String) throws {
        let bytes = Array((line + "\n").utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw Failure(description: "write(2): errno \(errno)") }
            sent += n
        }
    }

    /// Whether the peer closes the connection within `timeout` (its end read, to the millisecond); false when it is
    /// still open then. Throws if a line arrives instead (nothing is expected on a connection watched for its end).
    func closed(within timeout: Duration) throws -> Bool {
        var watched = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&watched, 1, Int32(timeout / .milliseconds(1)))
        guard ready > 0 else {
            if ready < 0 && errno != EINTR { throw Failure(description: "poll(2): errno \(errno)") }
            return false
        }
        guard let line = try readLine() else { return true }
        throw Failure(description: "a line arrived on a connection watched for its end: \(line)")
    }

    /// The next line without its newline; nil when the peer closed the connection.
    func readLine() throws -> String? {
        while true {
            if let newline = buffered.firstIndex(of: 0x0A) {
                let line = String(decoding: buffered[..<newline], as: UTF8.self)
                buffered.removeSubrange(...newline)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n == 0 { return nil }
            guard n > 0 else { throw Failure(description: "read(2): errno \(errno) (timed out or reset)") }
            buffered += chunk[..<n]
        }
    }
}
