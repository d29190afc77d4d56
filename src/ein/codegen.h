/* eOperators: an expression compiled to native code (docs/einnet.md).
 *
 * ts_ein_codegen writes a C function for a one-scope expression over
 * float32 tensors; ts_ein_compile builds it with the system C compiler
 * ($CC, else cc) into a shared object cached under the tsopt cache
 * directory by the content hash of source and compiler command, and loads
 * it.  Either fails cleanly (TS_ERR_UNSUPPORTED with why): the caller then
 * does not use the eOperator. */
#ifndef TS_EIN_CODEGEN_H
#define TS_EIN_CODEGEN_H

#include "ein/expr.h"

/* The generated function: in[i] holds input i (plain row-major float32 of
 * e->in_shape[i]), out the output (e->out_shape), written whole; scratch
 * (scratch_floats floats) holds the intermediate scopes; its parallel
 * loops use nthreads OpenMP threads (< 2: none). */
typedef void (*ts_ein_fn)(const float *const *in, float *out, float *scratch, int nthreads);

typedef struct ts_ein_kernel {
    void *dl;         /* dlopen handle */
    void *jit_state;  /* or the in-process compiler's state holding the code */
    ts_ein_fn fn;
    size_t scratch_floats;
    char path[1024];  /* the cached shared object */
    bool was_cached;  /* loaded without compiling */
} ts_ein_kernel;

/* The C source of e (malloc'ed) and the scratch its intermediate scopes
 * need, or NULL with err set (TS_ERR_UNSUPPORTED) when e is outside what
 * the generator covers: a scope without traversal, intermediates over
 * 2^28 floats.  Each scope is its own loop nest (its own parallel loop),
 * run after the scopes it reads. */
char *ts_ein_codegen(const ts_ein *e, size_t *scratch_floats, ts_error *err);

/* Compiles (or finds in the cache) and loads the kernel of e.  Nothing
 * is printed unless TSOPT_DEBUG is set, then one line says why a kernel
 * could not be made. */
ts_status ts_ein_compile(const ts_ein *e, ts_ein_kernel **out, ts_error *err);
void ts_ein_kernel_free(ts_ein_kernel *k);

/* The compiler of the kernels compiled from now on, in place of $CC
 * (NULL: $CC again).  The fuzzer's (src/fuzz/target.c): tcc builds a
 * kernel from the same source about 20 times faster than gcc -O3, without
 * its optimizations.  Process-wide, not thread-safe: set it between
 * plans, not while one is built. */
void ts_ein_set_compiler(const char *cc);

/* A compiler in this process standing for the command `name`: compile
 * makes src's function `symbol` (*fn) in memory, kept alive by *state until
 * release.  The tsopt command registers libtcc's for "tcc"
 * (src/cli/tcc_jit.c): a fuzzing campaign's tcc processes took a quarter
 * of its CPU time.  The library never links libtcc itself: libtsopt.so
 * cannot hold its non-PIC objects.  Register before any compile. */
typedef struct ts_ein_jit {
    const char *name;
    ts_status (*compile)(const char *src, const char *symbol, void **fn, void **state, ts_error *err);
    void (*release)(void *state);
} ts_ein_jit;
void ts_ein_set_jit(const ts_ein_jit *jit);

#endif
