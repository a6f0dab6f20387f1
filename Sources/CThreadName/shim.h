// A thread's kernel name: prctl(2) is variadic and pthread_setname_np needs _GNU_SOURCE, so neither reaches Swift
// from Glibc. Header only (glibc has the function).
#ifndef OFFERGATE_CTHREADNAME_SHIM_H
#define OFFERGATE_CTHREADNAME_SHIM_H

#include <sys/prctl.h>

/// Names the calling thread as `top -H`, `perf` and /proc/<pid>/task/*/comm show it (at most 15 bytes kept).
static inline int offergate_name_this_thread(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
}

#endif
