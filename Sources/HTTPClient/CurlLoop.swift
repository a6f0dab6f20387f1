// The one thread that runs every HTTPConnection's transfers: a libcurl multi handle, driven through libcurl's socket
// interface (`curl_multi_socket_action`) by an epoll loop of our own.
import CCurl
import CEpoll
import Glibc
import Synchronization
import Threads

/// Runs libcurl transfers for the whole process on one thread. libcurl tells the loop which sockets to watch
/// (`CURLMOPT_SOCKETFUNCTION`) and when to call it back without an event (`CURLMOPT_TIMERFUNCTION`); the loop waits in
/// `epoll_wait` and hands each ready socket to `curl_multi_socket_action`, so a wake-up costs in proportion to the
/// sockets that are ready, not to the transfers in flight (`curl_multi_perform` would visit all of them). Kept-alive
/// connections stay in the multi handle's connection cache between requests.
///
/// Work from other threads arrives through an inbox and an `eventfd`; work on the loop thread itself (a completion
/// that sends the next request) runs at once. Completions run on the loop thread: they must not block.
///
/// `@unchecked Sendable`: `multi`, `watched`, `generation` and `timerDeadline` are used on the loop thread only; the
/// inbox is a mutex.
final class CurlLoop: @unchecked Sendable {
    /// The process's loop, started on first use (or why it could not start).
    static let shared: Result<CurlLoop, HTTPClientError> = Result { () throws(HTTPClientError) in try CurlLoop() }

    private let multi: UnsafeMutableRawPointer
    private let epfd: Int32
    private let wakeFD: Int32
    private let loopThread = Atomic<UInt>(0)
    private let inbox = Mutex<[@Sendable () -> Void]>([])
    /// The sockets in the epoll set, each with the generation it was added under (loop thread). An event carries its
    /// socket's generation: one for a socket that libcurl closed, and whose number a new connection took within the
    /// same `epoll_wait` batch, is not handed to the new one.
    private var watched: [Int32: UInt32] = [:]
    private var generation: UInt32 = 0
    /// When libcurl wants `CURL_SOCKET_TIMEOUT` handled (CLOCK_MONOTONIC nanoseconds), if at all (loop thread).
    private var timerDeadline: UInt64?

    private init() throws(HTTPClientError) {
        _ = curl_global_init(Int(CURL_GLOBAL_DEFAULT))
        guard let multi = curl_multi_init() else { throw HTTPClientError(code: -1, message: "curl_multi_init failed") }
        let epfd = epoll_create1(Int32(EPOLL_CLOEXEC))
        let wakeFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard epfd >= 0, wakeFD >= 0 else {
            let why = String(cString: strerror(errno))
            if epfd >= 0 { close(epfd) }
            if wakeFD >= 0 { close(wakeFD) }
            curl_multi_cleanup(multi)
            throw HTTPClientError(code: -1, message: "the HTTP client's event loop could not start: \(why)")
        }
        self.multi = multi
        self.epfd = epfd
        self.wakeFD = wakeFD
        var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(u64: Self.wakeData))
        _ = epoll_ctl(epfd, EPOLL_CTL_ADD, wakeFD, &event)
        // Idle kept-alive connections kept for reuse; libcurl's default (4 per transfer in flight) would close
        // connections that a closed loop is about to use again each time few transfers are running.
        _ = og_curl_multi_set_long(multi, CURLMOPT_MAXCONNECTS, 4096)
        // The loop lives as long as the process (it is `shared`), so it may be handed to libcurl unretained.
        _ = og_curl_multi_set_callbacks(
            multi, onSocket, onTimer, Unmanaged.passUnretained(self).toOpaque())
        // No SIGPIPE handling here: every handle has CURLOPT_NOSIGNAL, and libcurl sends with MSG_NOSIGNAL.
        startThread(named: "http-client", stackSize: 1 << 20) { [self] in self.run() }
    }

    /// Runs `work` on the loop thread: at once when called there, otherwise soon.
    func execute(_ work: @escaping @Sendable () -> Void) {
        if pthread_equal(pthread_self(), pthread_t(loopThread.load(ordering: .relaxed))) != 0 {
            work()
            return
        }
        let wasEmpty = inbox.withLock { jobs in
            jobs.append(work)
            return jobs.count == 1
        }
        // One wake-up per batch: the loop takes everything queued once it reads the eventfd.
        if wasEmpty { _ = eventfd_write(wakeFD, 1) }
    }

    /// Starts `easy`'s transfer (loop thread); false when libcurl refused it.
    func add(_ easy: UnsafeMutableRawPointer) -> Bool {
        curl_multi_add_handle(multi, easy) == CURLM_OK
    }

    // MARK: Loop thread

    private func run() {
        loopThread.store(UInt(pthread_self()), ordering: .relaxed)
        let capacity = 64
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        defer { events.deallocate() }
        while true {
            actOnDueTimer()
            let n = epoll_wait(epfd, events, Int32(capacity), waitMilliseconds())
            for i in 0..<max(Int(n), 0) {
                let data = events[i].data.u64
                if data == Self.wakeData {
                    var count: eventfd_t = 0
                    _ = eventfd_read(wakeFD, &count)
                    let jobs = inbox.withLock { jobs in
                        defer { jobs = [] }
                        return jobs
                    }
                    for job in jobs { job() }
                } else {
                    let fd = Int32(truncatingIfNeeded: data & 0xFFFF_FFFF)
                    guard watched[fd] == UInt32(truncatingIfNeeded: data >> 32) else { continue }
                    let ready = events[i].events
                    var flags: Int32 = 0
                    if ready & EPOLLIN.rawValue != 0 { flags |= CURL_CSELECT_IN }
                    if ready & EPOLLOUT.rawValue != 0 { flags |= CURL_CSELECT_OUT }
                    if ready & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 { flags |= CURL_CSELECT_ERR }
                    act(on: fd, flags: flags)
                }
                actOnDueTimer()
            }
        }
    }

    /// Handles libcurl's timer if it is due. A transfer that a completion started wants `CURL_SOCKET_TIMEOUT` at once
    /// (its timer is 0): its request then leaves before the next ready socket is handled, not after the whole turn.
    private func actOnDueTimer() {
        while let deadline = timerDeadline, deadline <= Self.now() {
            timerDeadline = nil
            act(on: CURL_SOCKET_TIMEOUT, flags: 0)
        }
    }

    /// Lets libcurl work on `socket` (or on its timeouts), then completes the transfers that finished.
    private func act(on socket: curl_socket_t, flags: Int32) {
        var running: Int32 = 0
        _ = curl_multi_socket_action(multi, socket, flags, &running)
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi, &left) {
            var result = CURLE_OK
            guard let easy = og_curl_multi_done(message, &result) else { continue }
            curl_multi_remove_handle(multi, easy)
            // The reference `HTTPConnection.begin` took for the transfer, given back here.
            guard let context = og_curl_private(easy) else { continue }
            Unmanaged<HTTPConnection>.fromOpaque(context).takeRetainedValue().finished(result)
        }
    }

    /// epoll_wait's timeout for libcurl's timer: -1 without one, else the milliseconds left, rounded up.
    private func waitMilliseconds() -> Int32 {
        guard let deadline = timerDeadline else { return -1 }
        let now = Self.now()
        guard deadline > now else { return 0 }
        return Int32(clamping: (deadline - now + 999_999) / 1_000_000)
    }

    /// libcurl's socket callback: watch `socket` for what it asks, or no longer. False when epoll refused (libcurl
    /// then fails the transfers on that socket, rather than leaving them to their timeout).
    fileprivate func watch(_ socket: curl_socket_t, what: Int32) -> Bool {
        if what == CURL_POLL_REMOVE {
            // libcurl may already have closed it, which took it out of the set.
            if watched.removeValue(forKey: socket) != nil { _ = epoll_ctl(epfd, EPOLL_CTL_DEL, socket, nil) }
            return true
        }
        var interest: UInt32 = 0
        if what & CURL_POLL_IN != 0 { interest |= EPOLLIN.rawValue }
        if what & CURL_POLL_OUT != 0 { interest |= EPOLLOUT.rawValue }
        let known = watched[socket]
        let tag: UInt32
        if let known {
            tag = known
        } else {
            generation &+= 1
            tag = generation
        }
        var event = epoll_event(events: interest, data: epoll_data_t(u64: UInt64(tag) << 32 | UInt64(UInt32(socket))))
        // Our set and the kernel's can differ only if a socket was closed without a removal: then do the other.
        var status = epoll_ctl(epfd, known == nil ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, socket, &event)
        if status != 0 && (errno == EEXIST || errno == ENOENT) {
            status = epoll_ctl(epfd, errno == EEXIST ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, socket, &event)
        }
        guard status == 0 else {
            watched.removeValue(forKey: socket)
            return false
        }
        watched[socket] = tag
        return true
    }

    fileprivate func setTimer(milliseconds: Int) {
        guard milliseconds >= 0 else {
            timerDeadline = nil
            return
        }
        let (delay, tooLong) = UInt64(milliseconds).multipliedReportingOverflow(by: 1_000_000)
        let (deadline, tooLate) = Self.now().addingReportingOverflow(delay)
        timerDeadline = tooLong || tooLate ? UInt64.max : deadline
    }

    /// The wake-up eventfd's tag in the epoll set (a socket's is its generation and number, never all ones).
    private static let wakeData = UInt64.max

    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}

private let onSocket:
    @convention(c) (
        UnsafeMutableRawPointer?, curl_socket_t, Int32, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?
    ) -> Int32 = { _, socket, what, context, _ in
        guard let context else { return -1 }
        return Unmanaged<CurlLoop>.fromOpaque(context).takeUnretainedValue().watch(socket, what: what) ? 0 : -1
    }

private let onTimer: @convention(c) (UnsafeMutableRawPointer?, Int, UnsafeMutableRawPointer?) -> Int32 = {
    _, milliseconds, context in
    guard let context else { return -1 }
    Unmanaged<CurlLoop>.fromOpaque(context).takeUnretainedValue().setTimer(milliseconds: milliseconds)
    return 0
}
