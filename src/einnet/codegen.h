/* eOperators: an expression compiled to native code (docs/einnet.md).
 *
 * ts_ein_codegen writes a C function for a one-scope expression over
 * float32 tensors; ts_ein_compile builds it with the system C compiler
 * ($CC, else cc) into a shared object cached under the tsopt cache
 * directory by the content hash of source and compiler command, and loads
 * it.  Either fails cleanly (TS_ERR_UNSUPPORTED with why): the caller then
 * does not use the eOperator. */
#ifndef TS_EINNET_CODEGEN_H
#define TS_EINNET_CODEGEN_H

#include "einnet/expr.h"

/* The generated function: in[i] holds input i (plain row-major float32 of
 * e->in_shape[i]), out the output (e->out_shape); out is written whole. */
typedef void (*ts_ein_fn)(const float *const *in, float *out);

typedef struct ts_ein_kernel {
    void *dl;         /* dlopen handle */
    ts_ein_fn fn;
    char path[1024];  /* the cached shared object */
    bool was_cached;  /* loaded without compiling */
} ts_ein_kernel;

/* The C source of e (malloc'ed), or NULL with err set (TS_ERR_UNSUPPORTED)
 * when e is outside what the generator covers: more than one scope (a
 * scope read needs an intermediate tensor), a root without traversal. */
char *ts_ein_codegen(const ts_ein *e, ts_error *err);

/* Compiles (or finds in the cache) and loads the kernel of e.  Nothing
 * is printed unless TSOPT_DEBUG is set, then one line says why a kernel
 * could not be made. */
ts_status ts_ein_compile(const ts_ein *e, ts_ein_kernel **out, ts_error *err);
void ts_ein_kernel_free(ts_ein_kernel *k);

#endif
