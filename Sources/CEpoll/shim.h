// epoll, timerfd and eventfd for the event loops (JSONRPC's, and HTTPClient's around libcurl). Swift's Glibc module
// exports none of <sys/epoll.h>, <sys/timerfd.h> and <sys/eventfd.h>; this module does (as swift-nio's CNIOLinux
// does), so the compiler checks the calls and `struct epoll_event` keeps the C layout (packed, 12 bytes, on x86_64;
// 16 bytes elsewhere) instead of hand-written offsets.
#ifndef OFFERGATE_CEPOLL_SHIM_H
#define OFFERGATE_CEPOLL_SHIM_H

#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/eventfd.h>

#endif
