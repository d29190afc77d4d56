/* libz3 by dlopen on the first prover (z3_load.h says why).
 *
 * The library is opened by the soname the build found (TSOPT_Z3_SONAME,
 * CMakeLists.txt), RTLD_LOCAL: its symbols serve only these pointers.  It
 * is never closed: provers on other threads may still run, and a second
 * load would cost the relocation again. */
#define XZ3_LOADER
#include "taso/z3_load.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TSOPT_Z3_SONAME
#define TSOPT_Z3_SONAME "libz3.so"
#endif

#define XZ3_DEFINE(f) __typeof__(&f) xz3_##f;
XZ3_FUNCS(XZ3_DEFINE)
#undef XZ3_DEFINE

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_error[256]; /* empty: loaded */

/* TSOPT_Z3_LIB names another libz3 (a path, or a soname the loader finds):
 * an installed tsopt whose Z3 is not where the build found it. */
static const char *z3_name(void)
{
    const char *e = getenv("TSOPT_Z3_LIB");
    return e && *e ? e : TSOPT_Z3_SONAME;
}

static void load(void)
{
    void *h = dlopen(z3_name(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(load_error, sizeof load_error, "%s", e ? e : "dlopen failed");
        return;
    }
    /* dlsym returns void *; a function pointer is read from it through
     * memcpy (ISO C has no void * to function pointer conversion; POSIX
     * guarantees the representation) */
#define XZ3_RESOLVE(f)                                                                                                 \
    do {                                                                                                               \
        void *s = dlsym(h, #f);                                                                                        \
        if (!s) {                                                                                                      \
            snprintf(load_error, sizeof load_error, "%s: no symbol %s", z3_name(), #f);                          \
            return;                                                                                                    \
        }                                                                                                              \
        memcpy(&xz3_##f, &s, sizeof s);                                                                                \
    } while (0);
    XZ3_FUNCS(XZ3_RESOLVE)
#undef XZ3_RESOLVE
}

bool xz3_load(ts_error *err)
{
    pthread_once(&once, load);
    if (!load_error[0]) return true;
    ts_error_set(err, TS_ERR_UNSUPPORTED, "Z3 (the rule verifier's prover) cannot be loaded: %s", load_error);
    return false;
}

bool xz3_mapped(void)
{
    void *h = dlopen(TSOPT_Z3_SONAME, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (h) dlclose(h); /* drops the reference RTLD_NOLOAD took */
    return h != NULL;
}
