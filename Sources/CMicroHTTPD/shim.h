// GNU libmicrohttpd (apt libmicrohttpd-dev) for the HTTPServer module. Swift cannot call C variadic functions, so
// the few variadic entry points we need (MHD_start_daemon, MHD_get_connection_info) get fixed-signature wrappers
// here; everything else is called directly. No logic beyond argument passing.
#ifndef OFFERGATE_CMICROHTTPD_SHIM_H
#define OFFERGATE_CMICROHTTPD_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>

/// Starts a daemon on an already bound, listening socket (`listen_fd`, TCP or Unix), with an internal epoll thread
/// pool of `threads`, suspend/resume allowed, `connection_limit` connections, `idle_timeout` seconds without
/// traffic, `memory_limit` bytes of per-connection memory (the request line and headers must fit), strict parsing
/// (`strict` > 0 rejects what RFC 7230 allows a server to reject), and the three callbacks sharing `cls`.
static inline struct MHD_Daemon *og_mhd_start(
    int listen_fd, unsigned int threads, unsigned int connection_limit, unsigned int idle_timeout,
    size_t memory_limit, int strict, MHD_AccessHandlerCallback handler, MHD_RequestCompletedCallback completed,
    MHD_NotifyConnectionCallback connection_events, void *cls)
{
    struct MHD_OptionItem options[] = {
        {MHD_OPTION_LISTEN_SOCKET, (intptr_t)listen_fd, NULL},
        {MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)threads, NULL},
        {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)connection_limit, NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)idle_timeout, NULL},
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)memory_limit, NULL},
        {MHD_OPTION_STRICT_FOR_CLIENT, (intptr_t)strict, NULL},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed, cls},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)connection_events, cls},
        {MHD_OPTION_END, 0, NULL},
    };
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC;
    return MHD_start_daemon(flags, 0, NULL, NULL, handler, cls, MHD_OPTION_ARRAY, options, MHD_OPTION_END);
}

// libmicrohttpd's enums are "fixed" (closed) enums, which Swift imports with renamed cases; these names are stable.
static const enum MHD_Result OG_MHD_YES = MHD_YES;
static const enum MHD_Result OG_MHD_NO = MHD_NO;
static const enum MHD_ValueKind OG_MHD_HEADER_KIND = MHD_HEADER_KIND;
static const enum MHD_ResponseMemoryMode OG_MHD_RESPMEM_MUST_COPY = MHD_RESPMEM_MUST_COPY;
static inline int og_mhd_is_connection_start(enum MHD_ConnectionNotificationCode code)
{
    return code == MHD_CONNECTION_NOTIFY_STARTED;
}

/// The socket of a connection (-1 when MHD does not say).
static inline int og_mhd_connection_fd(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : (int)info->connect_fd;
}

#endif
