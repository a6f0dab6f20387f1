import Foundation
import JSONRPC

#if canImport(Glibc)
    import Glibc
#endif

/// CPU time of processes on this host, from `/proc`: what `offer-load` itself and the gateway(s) it drives spend per
/// request, so a report shows whether the harness, not the gateway, was the bottleneck.
public enum ProcessCPU {
    /// User + system CPU time of this process so far, ns (getrusage: microsecond resolution).
    public static func ownNanoseconds() -> UInt64 {
        var usage = rusage()
        guard getrusage(Int32(RUSAGE_SELF.rawValue), &usage) == 0 else { return 0 }
        func ns(_ t: timeval) -> UInt64 { UInt64(max(0, t.tv_sec)) * 1_000_000_000 + UInt64(max(0, t.tv_usec)) * 1_000 }
        return ns(usage.ru_utime) + ns(usage.ru_stime)
    }

    /// User + system CPU time of process `pid` so far (its threads included), ns, from `/proc/PID/stat` (clock-tick
    /// resolution); nil once it is gone or unreadable.
    public static func nanoseconds(ofProcess pid: Int32) -> UInt64? {
        guard let text = readProcFile("/proc/\(pid)/stat") else { return nil }
        return ticks(statLine: text).map { $0 * 1_000_000_000 / ticksPerSecond }
    }

    /// utime + stime (fields 14 and 15) of a `/proc/PID/stat` line; the command name (field 2) may hold spaces and
    /// parentheses, so the fields are counted from its last `)`.
    static func ticks(statLine: String) -> UInt64? {
        guard let close = statLine.lastIndex(of: ")") else { return nil }
        let fields = statLine[statLine.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state): utime is field 14, stime field 15.
        guard fields.count > 12, let user = UInt64(fields[11]), let system = UInt64(fields[12]) else { return nil }
        return user + system
    }

    /// The whole of a `/proc` file: read until EOF (they report size 0, and a long table such as `/proc/net/tcp`
    /// comes a page per read).
    static func readProcFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { break }
            bytes.append(contentsOf: chunk[0..<n])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static let ticksPerSecond = UInt64(max(1, sysconf(Int32(_SC_CLK_TCK))))

    /// The pid of the local process serving `address` (`unix:/path`, `tcp:HOST:PORT`, `http://HOST:PORT`), or nil
    /// when it cannot be told (another host, another user's process, nothing listening).
    /// A Unix socket says who accepted it (SO_PEERCRED); a TCP port is traced to the process holding its
    /// listening socket (`/proc/net/tcp{,6}` → the socket's inode → `/proc/*/fd`).
    public static func serverPID(of address: String) -> Int32? {
        if address.hasPrefix("unix:") { return peerPID(unixPath: String(address.dropFirst(5))) }
        var rest = Substring(address)
        for prefix in ["tcp:", "http://"] where rest.hasPrefix(prefix) { rest = rest.dropFirst(prefix.count) }
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        guard rest.count < address.count, let colon = rest.lastIndex(of: ":"),
            let port = UInt16(rest[rest.index(after: colon)...])
        else { return nil }
        var host = String(rest[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard ["127.0.0.1", "localhost", "::1", "0.0.0.0", "::"].contains(host) || host.hasPrefix("127.") else {
            return nil
        }
        return listenerPID(port: port)
    }

    /// The pids of the local processes serving `addresses`, each once, in order.
    public static func serverPIDs(of addresses: [String]) -> [Int32] {
        var pids: [Int32] = []
        for address in addresses {
            if let pid = serverPID(of: address), !pids.contains(pid) { pids.append(pid) }
        }
        return pids
    }

    static func peerPID(unixPath: String) -> Int32? {
        guard let address = try? ListenAddress(parsing: "unix:" + unixPath), case .unix(let path) = address else {
            return nil
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
            raw[bytes.count] = 0
        }
        let connected = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else { return nil }
        // struct ucred {pid_t pid; uid_t uid; gid_t gid;} (Linux ABI); Glibc's module hides it behind _GNU_SOURCE.
        var credentials: (pid: Int32, uid: UInt32, gid: UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout<(Int32, UInt32, UInt32)>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0, credentials.pid > 0 else {
            return nil
        }
        return credentials.pid
    }

    static func listenerPID(port: UInt16) -> Int32? {
        var inodes: Set<String> = []
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            guard let text = readProcFile(table) else { continue }
            inodes.formUnion(listeningInodes(table: text, port: port))
        }
        guard !inodes.isEmpty,
            let processes = try? FileManager.default.contentsOfDirectory(atPath: "/proc")
        else { return nil }
        let targets = Set(inodes.map { "socket:[\($0)]" })
        var link = [CChar](repeating: 0, count: 64)
        for entry in processes {
            guard let pid = Int32(entry),
                let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(entry)/fd")
            else { continue }
            for fd in fds {
                let n = readlink("/proc/\(entry)/fd/\(fd)", &link, link.count - 1)
                guard n > 0 else { continue }
                let target = String(decoding: link[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if targets.contains(target) { return pid }
            }
        }
        return nil
    }

    /// The inodes of the sockets listening (state 0A) on `port` in a `/proc/net/tcp`-format table.
    static func listeningInodes(table: String, port: UInt16) -> [String] {
        let hexPort = String(port, radix: 16, uppercase: true)
        let wanted = String(repeating: "0", count: max(0, 4 - hexPort.count)) + hexPort
        var inodes: [String] = []
        for line in table.split(separator: "\n").dropFirst() {
            let f = line.split(separator: " ")
            // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
            guard f.count > 9, f[3] == "0A", f[1].hasSuffix(":" + wanted) else { continue }
            inodes.append(String(f[9]))
        }
        return inodes
    }
}

/// CPU time spent during a load run by `offer-load` and by the gateway process(es) it drove, and the requests it
/// is spread over (warm-up included: the CPU is sampled around the whole run).
public struct CPUFigures: Sendable, Equatable, Codable {
    /// Completed requests during the sampled window (warm-up and measured).
    public var requests: UInt64
    /// `offer-load`'s own CPU time in the window, ns.
    public var offerLoadNanoseconds: UInt64
    /// The gateways' CPU time in the window, ns; nil when no gateway process could be found on this host.
    public var gatewayNanoseconds: UInt64?
    /// The gateway processes sampled.
    public var gatewayPIDs: [Int32]

    public init(requests: UInt64, offerLoadNanoseconds: UInt64, gatewayNanoseconds: UInt64?, gatewayPIDs: [Int32]) {
        self.requests = requests
        self.offerLoadNanoseconds = offerLoadNanoseconds
        self.gatewayNanoseconds = gatewayNanoseconds
        self.gatewayPIDs = gatewayPIDs
    }

    /// CPU milliseconds per 1,000 requests of `nanoseconds` (0 when nothing completed).
    func perThousand(_ nanoseconds: UInt64) -> Double {
        requests == 0 ? 0 : Double(nanoseconds) / 1e6 / Double(requests) * 1_000
    }
}

/// Samples the CPU of this process and of the gateway pids at the start and end of a run.
struct CPUSampler: Sendable {
    let gatewayPIDs: [Int32]
    let ownStart: UInt64
    let gatewayStart: UInt64?

    init(gatewayPIDs: [Int32]) {
        self.gatewayPIDs = gatewayPIDs
        ownStart = ProcessCPU.ownNanoseconds()
        gatewayStart = Self.gateways(gatewayPIDs)
    }

    static func gateways(_ pids: [Int32]) -> UInt64? {
        guard !pids.isEmpty else { return nil }
        var total: UInt64 = 0
        for pid in pids {
            guard let ns = ProcessCPU.nanoseconds(ofProcess: pid) else { return nil }
            total += ns
        }
        return total
    }

    func finish(requests: UInt64) -> CPUFigures {
        let own = ProcessCPU.ownNanoseconds()
        let gateway = Self.gateways(gatewayPIDs)
        var gatewayDelta: UInt64?
        if let gatewayStart, let gateway, gateway >= gatewayStart { gatewayDelta = gateway - gatewayStart }
        return CPUFigures(
            requests: requests, offerLoadNanoseconds: own >= ownStart ? own - ownStart : 0,
            gatewayNanoseconds: gatewayDelta, gatewayPIDs: gatewayPIDs)
    }
}
