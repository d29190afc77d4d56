/* The client of tools/ort/serve.js for the ort target (ort_peer.h).  Same
 * process handling as the fuzzer's client (src/fuzz/ort.c): socket pair as
 * stdin and stdout, stderr to a log, EOF on stdin ends the server. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
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
#include "opt/ort_peer.h"
#include "util/clock.h"

extern char **environ;

#ifndef TSOPT_ORT_SERVE
#define TSOPT_ORT_SERVE "tools/ort/serve.js"
#endif

#define INSTALL_HINT "install it with 'npm ci --ignore-scripts' in %s (make deps does it in the source tree), or set " \
                     "TSOPT_ORT_SERVE to a serve.js that has it"

enum { LINE_MAX_ = 8192, START_MS = 60000 };

struct ts_ort_peer {
    pid_t pid;
    int fd;
    char buf[LINE_MAX_];
    size_t len;
    char version[64];
    char log[64]; /* the server's stderr: the first line of it explains a failed start */
};

const char *ts_ort_peer_path(void)
{
    const char *e = getenv("TSOPT_ORT_SERVE");
    if (e && *e) return e;
    /* installed: PREFIX/share/tsopt/ort beside PREFIX/bin or PREFIX/lib,
     * wherever this code was loaded from (the tsopt command, libtsopt.so) */
    static char installed[PATH_MAX + 64];
    Dl_info di;
    char real[PATH_MAX];
    if (dladdr((void *)ts_ort_peer_path, &di) && di.dli_fname && realpath(di.dli_fname, real)) {
        snprintf(installed, sizeof installed, "%s/../share/tsopt/ort/serve.js", dirname(real));
        if (!access(installed, R_OK)) return installed;
    }
    return TSOPT_ORT_SERVE;
}

/* The folder of the server (for the install hint). */
static const char *peer_dir(char *buf, size_t n)
{
    snprintf(buf, n, "%s", ts_ort_peer_path());
    return dirname(buf);
}

const char *ts_ort_peer_version(const ts_ort_peer *p) { return p->version; }

static bool read_line(ts_ort_peer *p, char *line, size_t n, int timeout_ms)
{
    double end = ts_clock_ms() + timeout_ms;
    for (;;) {
        char *nl = memchr(p->buf, '\n', p->len);
        if (nl) {
            size_t k = (size_t)(nl - p->buf), c = k < n - 1 ? k : n - 1;
            memcpy(line, p->buf, c);
            line[c] = 0;
            memmove(p->buf, nl + 1, p->len - k - 1);
            p->len -= k + 1;
            return true;
        }
        if (p->len == sizeof p->buf) p->len = 0; /* an absurd line: dropped */
        int left = (int)(end - ts_clock_ms());
        if (left <= 0) return false;
        struct pollfd pf = {.fd = p->fd, .events = POLLIN};
        int r = poll(&pf, 1, left);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        ssize_t got = read(p->fd, p->buf + p->len, sizeof p->buf - p->len);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return false;
        p->len += (size_t)got;
    }
}

static void stop(ts_ort_peer *p)
{
    if (p->fd >= 0) close(p->fd);
    p->fd = -1;
    if (p->pid > 0) {
        int status;
        for (int i = 0; i < 100 && waitpid(p->pid, &status, WNOHANG) == 0; i++) {
            if (i == 50) kill(p->pid, SIGKILL);
            usleep(10000);
        }
        if (waitpid(p->pid, &status, WNOHANG) == 0) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &status, 0);
        }
    }
    p->pid = 0;
    p->len = 0;
}

/* The server's first stderr line (why it did not start), or "". */
static void first_log_line(const ts_ort_peer *p, char *out, size_t n)
{
    out[0] = 0;
    FILE *f = fopen(p->log, "r");
    if (!f) return;
    if (fgets(out, (int)n, f)) out[strcspn(out, "\n")] = 0;
    fclose(f);
}

static ts_status start(ts_ort_peer *p, ts_error *err)
{
    const char *serve = ts_ort_peer_path();
    struct stat sb;
    char dir[PATH_MAX];
    if (stat(serve, &sb) || !S_ISREG(sb.st_mode))
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "--target ort: the ONNX Runtime peer %s is missing; " INSTALL_HINT,
                            serve, peer_dir(dir, sizeof dir));
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
        return ts_error_set(err, TS_ERR_IO, "--target ort: cannot make a socket pair: %s", strerror(errno));
    int lfd = mkstemp(p->log);
    if (lfd >= 0) close(lfd);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, lfd >= 0 ? p->log : "/dev/null", O_WRONLY | O_TRUNC, 0600);
    char *argv[] = {"node", (char *)serve, NULL};
    int rc = posix_spawnp(&p->pid, "node", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(sv[1]);
    if (rc) {
        close(sv[0]);
        p->pid = 0;
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "--target ort: cannot start node (%s); install Node.js 18+ and "
                            "onnxruntime-node: " INSTALL_HINT, strerror(rc), peer_dir(dir, sizeof dir));
    }
    p->fd = sv[0];
    char line[LINE_MAX_] = "";
    if (!read_line(p, line, sizeof line, START_MS) || strncmp(line, "ready\t", 6)) {
        stop(p);
        char why[300];
        first_log_line(p, why, sizeof why);
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "--target ort: the ONNX Runtime peer %s did not start (%s); "
                            INSTALL_HINT, serve, why[0] ? why : line[0] ? line : "no reply", peer_dir(dir, sizeof dir));
    }
    snprintf(p->version, sizeof p->version, "%.60s", line + 6);
    return TS_OK;
}

ts_status ts_ort_peer_open(ts_ort_peer **out, ts_error *err)
{
    *out = NULL;
    ts_ort_peer *p = calloc(1, sizeof *p);
    if (!p) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    p->fd = -1;
    snprintf(p->log, sizeof p->log, "/tmp/tsopt-ort-XXXXXX");
    if (start(p, err)) {
        ts_status st = err->code;
        ts_ort_peer_close(p);
        return st;
    }
    *out = p;
    return TS_OK;
}

static bool write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        s += w;
        n -= (size_t)w;
    }
    return true;
}

ts_status ts_ort_peer_ask(ts_ort_peer *p, const char *request, char *reply, size_t n, int timeout_ms, ts_error *err)
{
    if (p->pid <= 0 && start(p, err)) return TS_ERR_IO;
    char line[LINE_MAX_] = "";
    bool ok = write_all(p->fd, request, strlen(request)) && write_all(p->fd, "\n", 1) &&
              read_line(p, line, sizeof line, timeout_ms);
    if (!ok) {
        stop(p);
        return ts_error_set(err, TS_ERR_IO, "ONNX Runtime peer died or did not answer within %d s: %.200s",
                            timeout_ms / 1000, request);
    }
    if (!strcmp(line, "ok") || !strncmp(line, "ok\t", 3)) {
        snprintf(reply, n, "%s", line[2] ? line + 3 : "");
        return TS_OK;
    }
    if (!strncmp(line, "error\t", 6)) return ts_error_set(err, TS_ERR_UNSUPPORTED, "ONNX Runtime: %.400s", line + 6);
    return ts_error_set(err, TS_ERR_IO, "ONNX Runtime peer: unexpected reply '%.200s'", line);
}

void ts_ort_peer_close(ts_ort_peer *p)
{
    if (!p) return;
    stop(p);
    if (strcmp(p->log, "/tmp/tsopt-ort-XXXXXX")) unlink(p->log);
    free(p);
}
