/* stdio-pump: B8's timed part (ops/bench/stdio-feed.py does the set-up). Writes a file of pre-generated
 * newline-delimited requests to one descriptor from a thread of its own, then closes it, while the main thread
 * reads the answers from another and counts them (memchr) and the error answers among them (memmem on `"error"`,
 * a token split between two reads included), until it has the expected number or end of file. Timed from the first
 * byte written to the last answer read. Prints one line of key=value figures, with its own CPU time (getrusage) per
 * 1,000 answers: the Python loop it replaces cost ~5 us per best answer (two byte-by-byte scans of ~1.3 KB),
 * taken from the two cores the gateway runs on.
 *
 *   stdio-pump REQUESTS_FILE WRITE_FD READ_FD EXPECTED
 *
 * Exit status: 0 every answer read, 1 fewer (end of file) or a system error, 64 usage.
 * Built by ops/bench/b8 with `cc -O2 -pthread`. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *payload;
static size_t payload_len;
static int write_fd;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void *writer(void *unused) {
    (void)unused;
    size_t done = 0;
    while (done < payload_len) {
        ssize_t n = write(write_fd, payload + done, payload_len - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { perror("stdio-pump: write"); break; }
        done += (size_t)n;
    }
    close(write_fd);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: stdio-pump REQUESTS_FILE WRITE_FD READ_FD EXPECTED\n");
        return 64;
    }
    int file = open(argv[1], O_RDONLY);
    struct stat st;
    if (file < 0 || fstat(file, &st) != 0) { perror("stdio-pump: requests file"); return 1; }
    payload_len = (size_t)st.st_size;
    char *data = malloc(payload_len + 1);
    for (size_t got = 0; got < payload_len;) {
        ssize_t n = read(file, data + got, payload_len - got);
        if (n <= 0) { perror("stdio-pump: read requests"); return 1; }
        got += (size_t)n;
    }
    close(file);
    payload = data;
    write_fd = atoi(argv[2]);
    int read_fd = atoi(argv[3]);
    long long expected = atoll(argv[4]);

    static const char token[] = "\"error\"";
    const size_t token_len = sizeof token - 1;
    enum { CAP = 1 << 20, KEEP = sizeof token - 2 };
    /* The last KEEP bytes of the previous read sit before the new ones, so a split token is seen once. */
    char *buf = malloc(KEEP + CAP);
    size_t kept = 0;
    long long answers = 0, errors = 0;

    double start = now();
    pthread_t thread;
    if (pthread_create(&thread, NULL, writer, NULL) != 0) { perror("stdio-pump: thread"); return 1; }
    while (answers < expected) {
        ssize_t n = read(read_fd, buf + kept, CAP);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { perror("stdio-pump: read"); break; }
        if (n == 0) break;
        for (const char *p = buf + kept, *end = buf + kept + n; (p = memchr(p, '\n', (size_t)(end - p))); p++)
            answers++;
        size_t len = kept + (size_t)n;
        for (const char *p = buf; (p = memmem(p, (size_t)(buf + len - p), token, token_len)); p += token_len)
            errors++;
        kept = len < KEEP ? len : KEEP;
        memmove(buf, buf + len - kept, kept);
    }
    double elapsed = now() - start;
    pthread_join(thread, NULL);

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    printf("responses=%lld errors=%lld seconds=%.3f driver_cpu_ms_per_1000=%.1f\n", answers, errors, elapsed,
           1e6 * cpu / (answers > 0 ? answers : 1));
    return answers == expected ? 0 : 1;
}
