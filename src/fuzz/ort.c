/* ONNX Runtime as a fuzzing target: one `node tools/ort/serve.js` process
 * per campaign, spoken to over a socket pair (its stdin and stdout), so
 * that a pair costs two session loads and runs, not two node start-ups
 * (about 150 ms each).  The protocol is one line each way, tab-separated:
 *
 *   request:  run <TAB> MODEL <TAB> INPUT_DIR <TAB> OUTPUT_DIR
 *   reply:    ok                         outputs written as OUTPUT_DIR/<name>.npy
 *             error <TAB> ONE LINE        ORT refused the model or failed to run it
 *
 * and the server says "ready <TAB> VERSION" once onnxruntime-node is
 * loaded.  A process that dies or does not answer within a minute is
 * killed and started again for the next request. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "fuzz/fuzz.h"
#include "util/clock.h"

extern char **environ;

#ifndef TSOPT_ORT_SERVE
#define TSOPT_ORT_SERVE "tools/ort/serve.js"
#endif

enum { REPLY_MAX = 4096, START_MS = 60000, RUN_MS = 60000 };

struct ts_fuzz_ort {
    pid_t pid;
    int fd;
    char *serve, *log;
    char buf[REPLY_MAX];
    size_t len; /* bytes read past the last line */
    char version[64];
};

const char *ts_fuzz_ort_default_serve(void)
{
    const char *e = getenv("TSOPT_ORT_SERVE");
    return e && *e ? e : TSOPT_ORT_SERVE;
}

/* Reads one line (without its newline) into line; false on EOF, error or
 * after timeout_ms. */
static bool read_line(ts_fuzz_ort *o, char *line, size_t n, int timeout_ms)
{
    double end = ts_clock_ms() + timeout_ms;
    for (;;) {
        char *nl = memchr(o->buf, '\n', o->len);
        if (nl) {
            size_t k = (size_t)(nl - o->buf);
            size_t c = k < n - 1 ? k : n - 1;
            memcpy(line, o->buf, c);
            line[c] = 0;
            memmove(o->buf, nl + 1, o->len - k - 1);
            o->len -= k + 1;
            return true;
        }
        if (o->len == sizeof o->buf) o->len = 0; /* an absurd line: drop it */
        int left = (int)(end - ts_clock_ms());
        if (left <= 0) return false;
        struct pollfd p = {.fd = o->fd, .events = POLLIN};
        int r = poll(&p, 1, left);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        ssize_t got = read(o->fd, o->buf + o->len, sizeof o->buf - o->len);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return false;
        o->len += (size_t)got;
    }
}

static bool write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL); /* a dead peer is an error, not SIGPIPE */
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        s += w;
        n -= (size_t)w;
    }
    return true;
}

static void stop_process(ts_fuzz_ort *o)
{
    if (o->fd >= 0) close(o->fd); /* EOF on its stdin: serve.js exits */
    o->fd = -1;
    if (o->pid > 0) {
        int status;
        for (int i = 0; i < 100 && waitpid(o->pid, &status, WNOHANG) == 0; i++) {
            if (i == 50) kill(o->pid, SIGKILL);
            usleep(10000);
        }
        if (waitpid(o->pid, &status, WNOHANG) == 0) {
            kill(o->pid, SIGKILL);
            waitpid(o->pid, &status, 0);
        }
    }
    o->pid = 0;
    o->len = 0;
}

static ts_status start_process(ts_fuzz_ort *o, ts_error *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
        return ts_error_set(err, TS_ERR_IO, "cannot make a socket pair for ONNX Runtime: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, o->log ? o->log : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0644);
    char *argv[] = {"node", o->serve, NULL};
    int rc = posix_spawnp(&o->pid, "node", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(sv[1]);
    if (rc) {
        close(sv[0]);
        o->pid = 0;
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "cannot start node for ONNX Runtime: %s", strerror(rc));
    }
    o->fd = sv[0];
    char line[REPLY_MAX] = "";
    if (!read_line(o, line, sizeof line, START_MS) || strncmp(line, "ready\t", 6)) {
        bool eof = !line[0];
        stop_process(o);
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "ONNX Runtime server %s did not start%s%s (see %s)", o->serve,
                            eof ? "" : ": ", eof ? "" : line, o->log ? o->log : "its stderr");
    }
    snprintf(o->version, sizeof o->version, "%.60s", line + 6);
    return TS_OK;
}

ts_status ts_fuzz_ort_open(const char *serve, const char *log, ts_fuzz_ort **out, ts_error *err)
{
    *out = NULL;
    struct stat sb;
    if (stat(serve, &sb) || !S_ISREG(sb.st_mode))
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "ONNX Runtime server '%s' not found (set TSOPT_ORT_SERVE to tools/ort/serve.js)", serve);
    ts_fuzz_ort *o = calloc(1, sizeof *o);
    if (!o) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    o->fd = -1;
    o->serve = strdup(serve);
    o->log = log ? strdup(log) : NULL;
    if (!o->serve || (log && !o->log)) {
        ts_fuzz_ort_close(o);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    if (start_process(o, err)) {
        ts_status st = err->code;
        ts_fuzz_ort_close(o);
        return st;
    }
    *out = o;
    return TS_OK;
}

ts_status ts_fuzz_ort_run(ts_fuzz_ort *o, const char *model, const char *in_dir, const char *out_dir, ts_error *err)
{
    if (strpbrk(model, "\t\n") || strpbrk(in_dir, "\t\n") || strpbrk(out_dir, "\t\n"))
        return ts_error_set(err, TS_ERR_INVALID, "path with a tab or newline: '%s'", model);
    if (o->pid <= 0 && start_process(o, err)) return TS_ERR_IO;
    size_t n = strlen(model) + strlen(in_dir) + strlen(out_dir) + 16;
    char *req = malloc(n);
    if (!req) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    snprintf(req, n, "run\t%s\t%s\t%s\n", model, in_dir, out_dir);
    char line[REPLY_MAX] = "";
    bool ok = write_all(o->fd, req, strlen(req)) && read_line(o, line, sizeof line, RUN_MS);
    free(req);
    if (!ok) {
        stop_process(o); /* dead or hung: the next request starts a new one */
        return ts_error_set(err, TS_ERR_IO, "ONNX Runtime process died or hung on %s", model);
    }
    if (!strcmp(line, "ok")) return TS_OK;
    if (!strncmp(line, "error\t", 6)) return ts_error_set(err, TS_ERR_UNSUPPORTED, "ORT: %s", line + 6);
    return ts_error_set(err, TS_ERR_IO, "ONNX Runtime server: unexpected reply '%.200s'", line);
}

void ts_fuzz_ort_close(ts_fuzz_ort *o)
{
    if (!o) return;
    stop_process(o);
    free(o->serve);
    free(o->log);
    free(o);
}
