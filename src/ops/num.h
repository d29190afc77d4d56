/* Number domains: the arithmetic a reference kernel is written over.
 *
 * Each reference kernel is written once against this interface and so runs
 * in float32 and float64 (results) and in exact integers mod p = 2^31-1
 * (PET's box tests, TASO/EinNet fingerprints).  Scalars are passed by
 * pointer to elements of the domain's storage type.  The bulk operations
 * (axpy, dot) carry the inner loops of heavy kernels (conv, matmul) so the
 * indirect call is paid per row, not per element. */
#ifndef TS_OPS_NUM_H
#define TS_OPS_NUM_H

#include <stddef.h>
#include <stdint.h>
#include "tsopt.h"

typedef struct ts_num {
    const char *name;   /* "f32", "f64", "modp" */
    ts_domain_kind kind;
    ts_dtype storage;   /* TS_F32, TS_F64, TS_MODP */
    size_t size;        /* bytes per element */
    bool exact;         /* integer arithmetic: non-polynomial ops unavailable */

    void (*zero)(void *d);
    void (*one)(void *d);
    void (*from_i64)(void *d, int64_t v);  /* exact small integers (counts) */
    void (*from_f64)(void *d, double v);   /* constants; modp rounds to an integer */
    double (*to_f64)(const void *a);       /* float domains; modp gives the residue */
    void (*add)(void *d, const void *a, const void *b);
    void (*sub)(void *d, const void *a, const void *b);
    void (*mul)(void *d, const void *a, const void *b);
    void (*neg)(void *d, const void *a);
    /* d = 1/a; false when a has no inverse (zero) */
    bool (*inv)(void *d, const void *a);
    /* y[i*incy] += alpha * x[i*incx], i < n */
    void (*axpy)(int64_t n, const void *alpha, const void *x, int64_t incx, void *y, int64_t incy);
    /* *acc += sum x[i*incx] * y[i*incy] */
    void (*dot)(int64_t n, const void *x, int64_t incx, const void *y, int64_t incy, void *acc);
} ts_num;

const ts_num *ts_num_get(ts_domain_kind kind);

/* Element i of a domain buffer. */
static inline void *ts_num_at(const ts_num *num, void *base, int64_t i)
{
    return (char *)base + (size_t)i * num->size;
}
static inline const void *ts_num_cat(const ts_num *num, const void *base, int64_t i)
{
    return (const char *)base + (size_t)i * num->size;
}

/* Largest scalar storage: use for stack temporaries. */
typedef union ts_scalar {
    float f32;
    double f64;
    uint32_t modp;
} ts_scalar;

#endif
