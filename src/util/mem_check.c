/* Memory checks before allocation: a model or input whose tensors cannot
 * fit gets one clear error instead of an allocation that succeeds (Linux
 * overcommits) and then thrashes the machine until it is killed.
 *
 * Available memory is the smallest of what the kernel, the cgroup and the
 * resource limits allow this process, and of TSOPT_MEM_LIMIT less what
 * the process holds when the cap is set (a documented total for the
 * process: tests, shared machines).  The checks compare bytes not yet
 * allocated with it; what is already resident (the graph's weights, loaded
 * by the importer) has already left MemAvailable.
 *
 * Two checks, both exact rather than guessed: the commands that run a
 * model check its inputs and outputs before allocating them
 * (ts_graph_mem_check; intermediates are not counted there, since fusion
 * may never materialize them), and ts_plan_build checks its arena, the
 * intermediates after buffer reuse, before allocating it. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "util/mem_check.h"

/* The value of "KEY <n> kB"-style line `key` in a /proc file, in bytes;
 * false when absent. */
static bool proc_kb(const char *path, const char *key, uint64_t *out)
{
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char line[256];
    size_t kl = strlen(key);
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long long v;
        if (!strncmp(line, key, kl) && line[kl] == ':' && sscanf(line + kl + 1, "%llu", &v) == 1) {
            *out = (uint64_t)v * 1024;
            found = true;
        }
    }
    fclose(f);
    return found;
}

/* A number file such as cgroup v2 memory.max ("max" = no limit). */
static bool read_u64(const char *path, uint64_t *out)
{
    FILE *f = fopen(path, "r");
    if (!f) return false;
    unsigned long long v;
    bool ok = fscanf(f, "%llu", &v) == 1;
    fclose(f);
    if (ok) *out = (uint64_t)v;
    return ok;
}

/* "file N" of a cgroup's memory.stat: page cache, reclaimable, so usage
 * minus it is what the cgroup really holds. */
static uint64_t cgroup_file_bytes(const char *dir)
{
    char path[600], line[256];
    snprintf(path, sizeof path, "%s/memory.stat", dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    unsigned long long v = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "file %llu", &v) == 1 || sscanf(line, "total_cache %llu", &v) == 1) break;
    fclose(f);
    return (uint64_t)v;
}

/* Room left under this process's cgroup (v2, then v1) memory limit. */
static bool cgroup_room(uint64_t *out)
{
    char rel[512] = "", dir[600];
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "0::", 3)) {
                snprintf(rel, sizeof rel, "%s", line + 3);
                rel[strcspn(rel, "\n")] = 0;
            }
        fclose(f);
    }
    /* the process's own cgroup, else the root of the mount (containers
     * often see their cgroup there) */
    const char *cands[] = {rel, ""};
    for (int i = 0; i < 2; i++) {
        uint64_t max, cur;
        snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", cands[i]);
        char pmax[700], pcur[700];
        snprintf(pmax, sizeof pmax, "%s/memory.max", dir);
        snprintf(pcur, sizeof pcur, "%s/memory.current", dir);
        if (!read_u64(pmax, &max)) { /* "max" (no limit) or no such file */
            if (!i && rel[0]) continue;
            break;
        }
        if (!read_u64(pcur, &cur)) cur = 0;
        uint64_t file = cgroup_file_bytes(dir), used = cur > file ? cur - file : 0;
        *out = max > used ? max - used : 0;
        return true;
    }
    uint64_t lim, use;
    if (read_u64("/sys/fs/cgroup/memory/memory.limit_in_bytes", &lim) && lim < ((uint64_t)1 << 60)) {
        if (!read_u64("/sys/fs/cgroup/memory/memory.usage_in_bytes", &use)) use = 0;
        uint64_t file = cgroup_file_bytes("/sys/fs/cgroup/memory"), used = use > file ? use - file : 0;
        *out = lim > used ? lim - used : 0;
        return true;
    }
    return false;
}

bool xmem_parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    int shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (errno || end == s || *end || !(v >= 0) || v * (double)((uint64_t)1 << shift) > 1.8e19) return false;
    *out = (uint64_t)(v * (double)((uint64_t)1 << shift));
    return true;
}

size_t xmem_rss(void)
{
    uint64_t v = 0;
    proc_kb("/proc/self/status", "VmRSS", &v);
    return (size_t)v;
}

size_t xmem_peak_rss(void)
{
    uint64_t v = 0;
    proc_kb("/proc/self/status", "VmHWM", &v);
    return (size_t)v;
}

void xmem_trace(const char *where)
{
    static int on = -1;
    if (on < 0) on = getenv("TSOPT_MEM_TRACE") && *getenv("TSOPT_MEM_TRACE");
    if (!on) return;
    uint64_t rss = 0, hwm = 0;
    proc_kb("/proc/self/status", "VmRSS", &rss);
    proc_kb("/proc/self/status", "VmHWM", &hwm);
    fprintf(stderr, "mem: %-28s rss %7.1f MiB  peak %7.1f MiB\n", where, (double)rss / 1048576.0,
            (double)hwm / 1048576.0);
}

size_t ts_mem_available(void)
{
    xmem_info m;
    xmem_probe(&m);
    return m.avail;
}

void xmem_probe(xmem_info *m)
{
    uint64_t v;
    m->avail = SIZE_MAX;
    m->source = "no limit known";
    if (proc_kb("/proc/meminfo", "MemAvailable", &v) && v < m->avail) {
        m->avail = (size_t)v;
        m->source = "MemAvailable in /proc/meminfo";
    }
    if (cgroup_room(&v) && v < m->avail) {
        m->avail = (size_t)v;
        m->source = "the cgroup's memory limit";
    }
    /* an address-space or data limit less what is already mapped */
    struct rlimit rl;
    uint64_t mapped = 0;
    proc_kb("/proc/self/status", "VmSize", &mapped);
    if (!getrlimit(RLIMIT_AS, &rl) && rl.rlim_cur != RLIM_INFINITY) {
        v = rl.rlim_cur > mapped ? rl.rlim_cur - mapped : 0;
        if (v < m->avail) {
            m->avail = (size_t)v;
            m->source = "the address-space limit (ulimit -v)";
        }
    }
    if (!getrlimit(RLIMIT_DATA, &rl) && rl.rlim_cur != RLIM_INFINITY) {
        uint64_t data = 0;
        proc_kb("/proc/self/status", "VmData", &data);
        v = rl.rlim_cur > data ? rl.rlim_cur - data : 0;
        if (v < m->avail) {
            m->avail = (size_t)v;
            m->source = "the data-segment limit (ulimit -d)";
        }
    }
    const char *cap = getenv("TSOPT_MEM_LIMIT");
    m->bad_env = cap && *cap && !xmem_parse_size(cap, &v);
    if (cap && *cap && !m->bad_env) {
        size_t rss = xmem_rss();
        v = v > rss ? v - rss : 0;
        if (v < m->avail) {
            m->avail = (size_t)v;
            m->source = "TSOPT_MEM_LIMIT less what this process holds";
        }
    }
}

const char *xmem_str(size_t bytes, char *buf, size_t n)
{
    static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 6) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, n, "%zu bytes", bytes);
    else
        snprintf(buf, n, "%.1f %s", v, unit[u]);
    return buf;
}

/* Below this a request is not probed: the probe reads /proc and cgroup
 * files (3 % of a fuzz campaign's time, several plans a pair), and a
 * request this small that still fails is the allocator's NOMEM error. */
#define MEM_CHECK_UNPROBED ((size_t)16 << 20)

ts_status ts_mem_check(size_t bytes, const char *what, ts_error *err)
{
    const char *cap = getenv("TSOPT_MEM_LIMIT");
    if (bytes <= MEM_CHECK_UNPROBED && !(cap && *cap)) return TS_OK;
    xmem_info m;
    xmem_probe(&m);
    if (m.bad_env)
        return ts_error_set(err, TS_ERR_INVALID, "TSOPT_MEM_LIMIT='%s' is not a size (bytes, or a number with K, M, G "
                            "or T)", getenv("TSOPT_MEM_LIMIT"));
    if (bytes <= m.avail) return TS_OK;
    char a[32], b[32];
    return ts_error_set(err, TS_ERR_NOMEM, "%s needs %s, but only %s of memory is available (%s)", what,
                        xmem_str(bytes, a, sizeof a), xmem_str(m.avail, b, sizeof b), m.source);
}

static size_t add_sat(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

static size_t value_bytes(const ts_value *v)
{
    int64_t n = ts_shape_numel(&v->shape);
    size_t es = ts_dtype_size(v->dtype);
    if (n < 0) return 0;
    if (es && (uint64_t)n > SIZE_MAX / es) return SIZE_MAX;
    return (size_t)n * es;
}

size_t xmem_io_bytes(const ts_graph *g)
{
    size_t iob = 0;
    for (int i = 0; i < g->ninputs; i++) iob = add_sat(iob, value_bytes(&g->values[g->inputs[i]]));
    for (int i = 0; i < g->noutputs; i++) {
        bool dup = false; /* an input passed through, or an output listed twice */
        for (int j = 0; j < g->ninputs && !dup; j++) dup = g->inputs[j] == g->outputs[i];
        for (int j = 0; j < i && !dup; j++) dup = g->outputs[j] == g->outputs[i];
        if (!dup) iob = add_sat(iob, value_bytes(&g->values[g->outputs[i]]));
    }
    return iob;
}

ts_status ts_graph_mem_check(const ts_graph *g, ts_error *err)
{
    char what[400];
    snprintf(what, sizeof what, "running graph '%s' (its inputs and outputs)", g->name);
    return ts_mem_check(xmem_io_bytes(g), what, err);
}
