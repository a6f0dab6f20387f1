// Thin, blocking-free wrappers over the socket system calls used by the event loop and the client.
import CEpoll

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension ListenAddress {
    /// Binds and listens on this address (non-blocking, close-on-exec; a stale Unix socket file is replaced, a live
    /// one refused; the file gets `permissions`): for listeners that take a ready socket, e.g. the HTTP one.
    /// Returns the descriptor and the bound address (with the real port for `tcp:…:0`).
    public func openListeningSocket(permissions: UInt32 = 0o660) throws(JSONRPCError) -> (
        fd: Int32, bound: ListenAddress
    ) {
        let (fd, bound) = try SocketAddress.listen(self, permissions: mode_t(permissions))
        return (fd, bound)
    }
}

enum SocketAddress {
    static func isIPLiteral(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    static func systemError(_ what: String) -> JSONRPCError {
        JSONRPCError(.system, "\(what) failed", errno: errno)
    }

    /// Calls `body` with a sockaddr for `address`.
    static func withSockaddr<R>(
        _ address: ListenAddress, _ body: (UnsafePointer<sockaddr>, socklen_t, Int32) throws(JSONRPCError) -> R
    )
        throws(JSONRPCError) -> R
    {
        switch address {
        case .unix(let path):
            var addr = sockaddr_un()
            addr.sun_family = sa_family_t(AF_UNIX)
            let bytes = Array(path.utf8)
            guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
                throw JSONRPCError(.invalidAddress, "unix socket path too long")
            }
            withUnsafeMutableBytes(of: &addr.sun_path) { raw in
                for (i, b) in bytes.enumerated() { raw[i] = b }
                raw[bytes.count] = 0
            }
            let result: Result<R, JSONRPCError> = withUnsafePointer(to: &addr) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sp in
                    do throws(JSONRPCError) {
                        return .success(try body(sp, socklen_t(MemoryLayout<sockaddr_un>.size), AF_UNIX))
                    } catch { return .failure(error) }
                }
            }
            return try result.get()
        case .tcp(let host, let port):
            var v4 = sockaddr_in()
            if inet_pton(AF_INET, host, &v4.sin_addr) == 1 {
                v4.sin_family = sa_family_t(AF_INET)
                v4.sin_port = port.bigEndian
                let result: Result<R, JSONRPCError> = withUnsafePointer(to: &v4) { p in
                    p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sp in
                        do throws(JSONRPCError) {
                            return .success(try body(sp, socklen_t(MemoryLayout<sockaddr_in>.size), AF_INET))
                        } catch { return .failure(error) }
                    }
                }
                return try result.get()
            }
            var v6 = sockaddr_in6()
            guard inet_pton(AF_INET6, host, &v6.sin6_addr) == 1 else {
                throw JSONRPCError(.invalidAddress, "host is not an IP literal")
            }
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = port.bigEndian
            let result: Result<R, JSONRPCError> = withUnsafePointer(to: &v6) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sp in
                    do throws(JSONRPCError) {
                        return .success(try body(sp, socklen_t(MemoryLayout<sockaddr_in6>.size), AF_INET6))
                    } catch { return .failure(error) }
                }
            }
            return try result.get()
        }
    }

    static func setNonBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL, 0)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
    }

    static func setCloseOnExec(_ fd: Int32) {
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    }

    /// Creates a non-blocking listening socket; returns the fd and the bound address (ephemeral port resolved).
    static func listen(_ address: ListenAddress, permissions: mode_t) throws(JSONRPCError) -> (Int32, ListenAddress) {
        return try withSockaddr(address) { (sa, len, family) throws(JSONRPCError) -> (Int32, ListenAddress) in
            let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw systemError("socket(2)") }
            var one: Int32 = 1
            if case .unix(let path) = address {
                // Remove a stale socket file (only if it is a socket, never a regular file).
                var st = stat()
                if lstat(path, &st) == 0 {
                    guard (st.st_mode & S_IFMT) == S_IFSOCK else {
                        close(fd)
                        throw JSONRPCError(.invalidAddress, "path exists and is not a socket")
                    }
                    // A live server still answers on it: refuse instead of stealing its address.
                    let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                    if probe >= 0 {
                        let live = Glibc.connect(probe, sa, len) == 0
                        close(probe)
                        if live {
                            close(fd)
                            throw JSONRPCError(
                                .invalidAddress, "socket is in use by a running server", errno: EADDRINUSE)
                        }
                    }
                    unlink(path)
                }
            } else {
                _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            }
            guard bind(fd, sa, len) == 0 else {
                let error = systemError("bind(2)")
                close(fd)
                throw error
            }
            var bound = address
            switch address {
            case .unix(let path):
                _ = chmod(path, permissions)
            case .tcp(let host, _):
                var storage = sockaddr_in6()
                var length = socklen_t(MemoryLayout<sockaddr_in6>.size)
                let ok = withUnsafeMutablePointer(to: &storage) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
                }
                if ok == 0 {
                    // sin_port and sin6_port share the same offset.
                    bound = .tcp(host: host, port: UInt16(bigEndian: storage.sin6_port))
                }
            }
            guard Glibc.listen(fd, 1024) == 0 else {
                let error = systemError("listen(2)")
                close(fd)
                throw error
            }
            setNonBlocking(fd)
            return (fd, bound)
        }
    }

    /// Connects a blocking socket (call from a dedicated thread), then makes it non-blocking.
    static func connect(_ address: ListenAddress) throws(JSONRPCError) -> Int32 {
        return try withSockaddr(address) { (sa, len, family) throws(JSONRPCError) -> Int32 in
            let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw systemError("socket(2)") }
            var result: Int32
            repeat { result = Glibc.connect(fd, sa, len) } while result != 0 && errno == EINTR
            guard result == 0 else {
                let error = systemError("connect(2)")
                close(fd)
                throw error
            }
            if family != AF_UNIX {
                var one: Int32 = 1
                _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            }
            setNonBlocking(fd)
            return fd
        }
    }

    /// "host:port" of a TCP peer, `nil` for other sockets.
    static func peerDescription(_ fd: Int32) -> String? {
        var storage = sockaddr_in6()
        var length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        guard ok == 0 else { return nil }
        var text = [CChar](repeating: 0, count: 64)
        switch Int32(storage.sin6_family) {
        case AF_INET:
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { p -> String? in
                    var a = p.pointee.sin_addr
                    guard inet_ntop(AF_INET, &a, &text, 64) != nil else { return nil }
                    return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                        + ":\(UInt16(bigEndian: p.pointee.sin_port))"
                }
            }
        case AF_INET6:
            var a = storage.sin6_addr
            guard inet_ntop(AF_INET6, &a, &text, 64) != nil else { return nil }
            return "[" + String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                + "]:\(UInt16(bigEndian: storage.sin6_port))"
        default:
            return nil
        }
    }
}

/// epoll from the `CEpoll` header module: the calls and `struct epoll_event` (packed on x86_64) as C declares them.
enum Epoll {
    static let readable = EPOLLIN.rawValue
    static let writable = EPOLLOUT.rawValue
    static let error = EPOLLERR.rawValue
    static let hangup = EPOLLHUP.rawValue
    static let readHangup = EPOLLRDHUP.rawValue
    static let ctlAdd = EPOLL_CTL_ADD
    static let ctlDel = EPOLL_CTL_DEL
    static let ctlMod = EPOLL_CTL_MOD
    /// Bytes per `struct epoll_event` as C lays it out (12 on x86_64, where the struct is packed; 16 elsewhere).
    static let eventStride = MemoryLayout<epoll_event>.stride

    /// A new close-on-exec epoll descriptor, or -1 (errno set).
    static func create() -> Int32 { epoll_create1(Int32(EPOLL_CLOEXEC)) }

    /// Adds, modifies or deletes `fd`'s registration with `events` and the 64-bit `data` tag.
    @discardableResult
    static func ctl(_ epfd: Int32, _ op: Int32, _ fd: Int32, events: UInt32, data: UInt64) -> Int32 {
        var event = epoll_event()
        event.events = events
        event.data.u64 = data
        return epoll_ctl(epfd, op, fd, &event)
    }
}

/// A one-shot monotonic timer descriptor (`timerfd`) that epoll reports readable when it expires.
enum TimerFD {
    /// A new non-blocking, close-on-exec timer on `CLOCK_MONOTONIC`, or -1 (errno set).
    static func create() -> Int32 {
        timerfd_create(CLOCK_MONOTONIC, Int32(TFD_NONBLOCK | TFD_CLOEXEC))
    }

    /// Arms `fd` to expire once, `nanoseconds` from now (at least 1: a zero would disarm it).
    static func arm(_ fd: Int32, after nanoseconds: UInt64) {
        let delay = max(nanoseconds, 1)
        var spec = itimerspec()
        spec.it_value = timespec(tv_sec: Int(delay / 1_000_000_000), tv_nsec: Int(delay % 1_000_000_000))
        _ = timerfd_settime(fd, 0, &spec, nil)
    }

    /// Consumes the expiration count, so that epoll stops reporting the descriptor until it expires again.
    static func clear(_ fd: Int32) {
        var expirations: UInt64 = 0
        _ = read(fd, &expirations, MemoryLayout<UInt64>.size)
    }
}
