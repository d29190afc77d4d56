/* libtcc as the in-process compiler for "tcc" (einnet/codegen.h's
 * ts_ein_jit): the fuzzer compiles about one eOperator per pair with tcc,
 * and starting a tcc process for each took a quarter of a campaign's CPU
 * time (2-core EPYC: 200 pairs 10.9-11.9 s of CPU with the process,
 * 7.5-8.6 s in memory).  Linked into the tsopt command only: Debian's
 * libtcc.a is not position-independent, so libtsopt.so cannot hold it. */
#include "cli/cli.h"
#include "ein/codegen.h"

#ifdef TSOPT_HAVE_LIBTCC
#include <libtcc.h>
#include <pthread.h>
#include <stdio.h>

/* libtcc 0.9.27 keeps compiler state in globals: one call at a time. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void message(void *opaque, const char *msg)
{
    ts_error *e = opaque;
    if (!e->code) ts_error_set(e, TS_ERR_UNSUPPORTED, "einnet codegen: libtcc: %s", msg);
}

static ts_status compile(const char *src, const char *symbol, void **fn, void **state, ts_error *err)
{
    ts_error e = {0};
    void *sym = NULL;
    pthread_mutex_lock(&lock);
    TCCState *s = tcc_new();
    if (s) {
        tcc_set_error_func(s, &e, message);
        tcc_set_output_type(s, TCC_OUTPUT_MEMORY);
        if (tcc_compile_string(s, src) == 0 && tcc_relocate(s, TCC_RELOCATE_AUTO) == 0) sym = tcc_get_symbol(s, symbol);
        if (!sym) tcc_delete(s);
    }
    pthread_mutex_unlock(&lock);
    if (!s) return ts_error_set(err, TS_ERR_NOMEM, "einnet codegen: out of memory starting libtcc");
    if (!sym) return e.code ? (*err = e, e.code) : ts_error_set(err, TS_ERR_UNSUPPORTED, "einnet codegen: libtcc made no %s", symbol);
    *fn = sym, *state = s;
    return TS_OK;
}

static void release(void *state)
{
    pthread_mutex_lock(&lock);
    tcc_delete(state);
    pthread_mutex_unlock(&lock);
}

static const ts_ein_jit TCC = {"tcc", compile, release};

void cli_jit_register(void) { ts_ein_set_jit(&TCC); }
#else
void cli_jit_register(void) {}
#endif
