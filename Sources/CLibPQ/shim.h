#ifndef OFFERGATE_CLIBPQ_SHIM_H
#define OFFERGATE_CLIBPQ_SHIM_H
// SwiftPM drops the -I flag when pkg-config is missing; fall back to Debian's header location.
#if __has_include(<libpq-fe.h>)
#include <libpq-fe.h>
#else
#include <postgresql/libpq-fe.h>
#endif
#endif
