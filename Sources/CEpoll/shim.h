// epoll for the JSONRPC event loop. Swift's Glibc module does not export <sys/epoll.h>; this one-header module does
// (as swift-nio's CNIOLinux does), so the compiler checks the calls and `struct epoll_event` keeps the C layout
// (packed, 12 bytes, on x86_64; 16 bytes elsewhere) instead of hand-written offsets.
// Also the loop thread's kernel name: prctl(2) is variadic and pthread_setname_np needs _GNU_SOURCE, so neither
// reaches Swift from Glibc.
#ifndef OFFERGATE_CEPOLL_SHIM_H
#define OFFERGATE_CEPOLL_SHIM_H

#include <sys/epoll.h>
#include <sys/prctl.h>

/// Names the calling thread as `top -H`, `perf` and /proc/<pid>/task/*/comm show it (at most 15 bytes kept).
static inline int offergate_name_this_thread(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
}

#endif
