/* ping-epoll: the minimal closed-loop JSON-RPC client that B-harness (ops/bench/b-harness) measures offer-load
 * against. One thread, one epoll set, N connections × depth D pipelined `system.ping` requests over the gateway's
 * newline-delimited JSON-RPC (Unix socket or TCP). Each answer is matched to an outstanding id of its connection
 * and must be a result, not an error; the next request goes out on the same connection (writes coalesced per
 * wake-up). It counts answers after the warm-up and prints one line of key=value figures, with its own CPU time
 * (getrusage) per 1,000 answers; answers_total counts the warm-up's too.
 *
 *   ping-epoll --connect unix:/path|tcp:HOST:PORT [--connections 16] [--depth 8] [--duration 10] [--warmup 1]
 *
 * Exit status: 0 done, 1 an error answer, an unknown id, a lost connection or a system error, 64 usage.
 * Built by ops/bench/b-harness with `cc -O2`. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_DEPTH 256
#define IN_CAP (1 << 20)

struct conn {
    int fd;
    long long next_id;
    long long pending[MAX_DEPTH]; /* outstanding ids; -1 = free slot */
    int in_flight;
    char in[IN_CAP];
    size_t in_len;
    char out[MAX_DEPTH * 64];
    size_t out_len;
};

static int depth = 8;
static long long answered, answered_total, errors_seen;
static int sending = 1;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void die(const char *what) {
    fprintf(stderr, "ping-epoll: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int connect_to(const char *address) {
    int fd;
    if (strncmp(address, "unix:", 5) == 0) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(address + 5) >= sizeof sa.sun_path) { fprintf(stderr, "ping-epoll: path too long\n"); exit(64); }
        strcpy(sa.sun_path, address + 5);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) die("connect");
    } else if (strncmp(address, "tcp:", 4) == 0) {
        char host[256];
        const char *colon = strrchr(address + 4, ':');
        if (!colon || (size_t)(colon - address - 4) >= sizeof host) { fprintf(stderr, "ping-epoll: bad address\n"); exit(64); }
        memcpy(host, address + 4, colon - address - 4);
        host[colon - address - 4] = 0;
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
        if (getaddrinfo(host, colon + 1, &hints, &ai) != 0) { fprintf(stderr, "ping-epoll: cannot resolve %s\n", host); exit(1); }
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) die("connect");
        freeaddrinfo(ai);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    } else {
        fprintf(stderr, "ping-epoll: --connect wants unix:PATH or tcp:HOST:PORT\n");
        exit(64);
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static void queue_ping(struct conn *c) {
    int slot;
    for (slot = 0; slot < depth && c->pending[slot] >= 0; slot++) {}
    long long id = c->next_id++;
    c->pending[slot] = id;
    c->in_flight++;
    c->out_len += (size_t)sprintf(c->out + c->out_len, "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"method\":\"system.ping\"}\n", id);
}

static void flush_out(struct conn *c) {
    size_t off = 0;
    while (off < c->out_len) {
        ssize_t n = send(c->fd, c->out + off, c->out_len - off, MSG_NOSIGNAL);
        if (n > 0) { off += (size_t)n; continue; }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            /* At most depth × 64 bytes are ever queued: a full socket buffer means the peer stopped reading. */
            struct timespec pause = {0, 100000};
            nanosleep(&pause, NULL);
            continue;
        }
        die("send");
    }
    c->out_len = 0;
}

/* One answer line: its top-level "id" must be outstanding on this connection, and it must carry "result" and no
 * "error" member. Enough for system.ping's `{"jsonrpc":"2.0","result":{},"id":N}` in any member order. */
static void answer(struct conn *c, char *line, int counting) {
    char *idp = strstr(line, "\"id\":");
    int ok = idp && strstr(line, "\"result\":") && !strstr(line, "\"error\":");
    long long id = idp ? strtoll(idp + 5, NULL, 10) : -1;
    int slot;
    for (slot = 0; slot < depth && c->pending[slot] != id; slot++) {}
    if (slot == depth) {
        fprintf(stderr, "ping-epoll: answer with an id nobody asked for: %.200s\n", line);
        exit(1);
    }
    c->pending[slot] = -1;
    c->in_flight--;
    if (!ok) {
        errors_seen++;
        fprintf(stderr, "ping-epoll: not a result: %.200s\n", line);
    } else {
        answered_total++;
        if (counting) answered++;
    }
    if (sending) queue_ping(c);
}

static void readable(struct conn *c, int counting) {
    for (;;) {
        ssize_t n = read(c->fd, c->in + c->in_len, IN_CAP - 1 - c->in_len);
        if (n == 0) { fprintf(stderr, "ping-epoll: the gateway closed a connection\n"); exit(1); }
        if (n < 0) {
            if (errno == EAGAIN) break;
            if (errno == EINTR) continue;
            die("read");
        }
        c->in_len += (size_t)n;
        c->in[c->in_len] = 0;
        char *start = c->in, *nl;
        while ((nl = memchr(start, '\n', c->in + c->in_len - start))) {
            *nl = 0;
            answer(c, start, counting);
            start = nl + 1;
        }
        c->in_len -= (size_t)(start - c->in);
        memmove(c->in, start, c->in_len);
        if (c->in_len >= IN_CAP - 1) { fprintf(stderr, "ping-epoll: line too long\n"); exit(1); }
    }
    flush_out(c);
}

int main(int argc, char **argv) {
    const char *address = NULL;
    int connections = 16;
    double duration = 10, warmup = 1;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) { fprintf(stderr, "ping-epoll: %s needs a value\n", argv[i]); return 64; }
        if (!strcmp(argv[i], "--connect")) address = argv[++i];
        else if (!strcmp(argv[i], "--connections")) connections = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--depth")) depth = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--duration")) duration = atof(argv[++i]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atof(argv[++i]);
        else { fprintf(stderr, "ping-epoll: unknown option %s\n", argv[i]); return 64; }
    }
    if (!address || connections < 1 || depth < 1 || depth > MAX_DEPTH || duration <= 0 || warmup < 0) {
        fprintf(stderr, "usage: ping-epoll --connect unix:PATH|tcp:HOST:PORT [--connections N] [--depth D (1-%d)] "
                        "[--duration S] [--warmup S]\n", MAX_DEPTH);
        return 64;
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    struct conn *conns = calloc((size_t)connections, sizeof *conns);
    if (!conns) die("calloc");
    for (int k = 0; k < connections; k++) {
        struct conn *c = &conns[k];
        c->fd = connect_to(address);
        c->next_id = 1;
        for (int s = 0; s < MAX_DEPTH; s++) c->pending[s] = -1;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) die("epoll_ctl");
    }
    for (int k = 0; k < connections; k++) {
        for (int d = 0; d < depth; d++) queue_ping(&conns[k]);
        flush_out(&conns[k]);
    }
    double t0 = now_s(), measure_at = t0 + warmup, stop_at = measure_at + duration;
    double measured_from = 0, cpu_from = 0;
    int counting = 0;
    struct epoll_event events[256];
    for (;;) {
        double t = now_s();
        if (!counting && t >= measure_at) {
            counting = 1;
            measured_from = t;
            cpu_from = cpu_s();
        }
        if (counting && t >= stop_at) break;
        int n = epoll_wait(ep, events, 256, 100);
        if (n < 0 && errno != EINTR) die("epoll_wait");
        for (int i = 0; i < n; i++) readable(events[i].data.ptr, counting);
    }
    double seconds = now_s() - measured_from, cpu = cpu_s() - cpu_from;
    sending = 0;
    printf("requests=%lld answers_total=%lld seconds=%.3f throughput=%.0f errors=%lld cpu_ms_per_1000=%.2f\n",
           answered, answered_total, seconds, answered / seconds, errors_seen,
           answered ? 1e6 * cpu / (double)answered : 0.0);
    return errors_seen ? 1 : 0;
}
