/* The three number domains behind ts_num (see num.h). */
#include <math.h>
#include "ops/num.h"

/* ---- float32 / float64: one body, two element types */
#define FLOAT_DOMAIN(T, N)                                                                        \
    static void N##_zero(void *d) { *(T *)d = 0; }                                                \
    static void N##_one(void *d) { *(T *)d = 1; }                                                 \
    static void N##_from_i64(void *d, int64_t v) { *(T *)d = (T)v; }                              \
    static void N##_from_f64(void *d, double v) { *(T *)d = (T)v; }                               \
    static double N##_to_f64(const void *a) { return (double)*(const T *)a; }                     \
    static void N##_add(void *d, const void *a, const void *b) { *(T *)d = *(const T *)a + *(const T *)b; } \
    static void N##_sub(void *d, const void *a, const void *b) { *(T *)d = *(const T *)a - *(const T *)b; } \
    static void N##_mul(void *d, const void *a, const void *b) { *(T *)d = *(const T *)a * *(const T *)b; } \
    static void N##_neg(void *d, const void *a) { *(T *)d = -*(const T *)a; }                     \
    static bool N##_inv(void *d, const void *a)                                                   \
    {                                                                                             \
        if (*(const T *)a == 0) return false;                                                     \
        *(T *)d = (T)1 / *(const T *)a;                                                           \
        return true;                                                                              \
    }                                                                                             \
    static void N##_axpy(int64_t n, const void *alpha, const void *xv, int64_t incx, void *yv,    \
                         int64_t incy)                                                            \
    {                                                                                             \
        const T a = *(const T *)alpha, *x = xv;                                                   \
        T *y = yv;                                                                                \
        if (incx == 1 && incy == 1)                                                               \
            for (int64_t i = 0; i < n; i++) y[i] += a * x[i];                                     \
        else                                                                                      \
            for (int64_t i = 0; i < n; i++) y[i * incy] += a * x[i * incx];                       \
    }                                                                                             \
    static void N##_dot(int64_t n, const void *xv, int64_t incx, const void *yv, int64_t incy,    \
                        void *acc)                                                                \
    {                                                                                             \
        const T *x = xv, *y = yv;                                                                 \
        T s = 0;                                                                                  \
        for (int64_t i = 0; i < n; i++) s += x[i * incx] * y[i * incy];                           \
        *(T *)acc += s;                                                                           \
    }

FLOAT_DOMAIN(float, f32)
FLOAT_DOMAIN(double, f64)

/* ---- integers mod p = 2^31-1: exact, so equal fingerprints mean equal
 * polynomials with high probability (Schwartz-Zippel, PET's Theorem 2). */
#define P ((uint64_t)TS_MODP_P)

static inline uint32_t mp_red(uint64_t x)
{
    /* x < 2^62: fold twice using 2^31 = 1 (mod p) */
    x = (x & P) + (x >> 31);
    x = (x & P) + (x >> 31);
    return (uint32_t)(x >= P ? x - P : x);
}
static void mp_zero(void *d) { *(uint32_t *)d = 0; }
static void mp_one(void *d) { *(uint32_t *)d = 1; }
static void mp_from_i64(void *d, int64_t v)
{
    int64_t r = v % (int64_t)P;
    *(uint32_t *)d = (uint32_t)(r < 0 ? r + (int64_t)P : r);
}
static void mp_from_f64(void *d, double v)
{
    double r = fmod(nearbyint(v), (double)P);
    mp_from_i64(d, isfinite(r) ? (int64_t)r : 0);
}
static double mp_to_f64(const void *a) { return (double)*(const uint32_t *)a; }
static void mp_add(void *d, const void *a, const void *b)
{
    *(uint32_t *)d = mp_red((uint64_t) * (const uint32_t *)a + *(const uint32_t *)b);
}
static void mp_sub(void *d, const void *a, const void *b)
{
    *(uint32_t *)d = mp_red((uint64_t) * (const uint32_t *)a + P - *(const uint32_t *)b);
}
static void mp_mul(void *d, const void *a, const void *b)
{
    *(uint32_t *)d = mp_red((uint64_t) * (const uint32_t *)a * *(const uint32_t *)b);
}
static void mp_neg(void *d, const void *a)
{
    uint32_t v = *(const uint32_t *)a;
    *(uint32_t *)d = v ? (uint32_t)(P - v) : 0;
}
static bool mp_inv(void *d, const void *a)
{
    uint64_t base = *(const uint32_t *)a, r = 1;
    if (base == 0) return false;
    for (uint64_t e = P - 2; e; e >>= 1) { /* Fermat: a^(p-2) */
        if (e & 1) r = mp_red(r * base);
        base = mp_red(base * base);
    }
    *(uint32_t *)d = (uint32_t)r;
    return true;
}
static void mp_axpy(int64_t n, const void *alpha, const void *xv, int64_t incx, void *yv, int64_t incy)
{
    const uint64_t a = *(const uint32_t *)alpha;
    const uint32_t *x = xv;
    uint32_t *y = yv;
    for (int64_t i = 0; i < n; i++) y[i * incy] = mp_red(y[i * incy] + a * x[i * incx]);
}
static void mp_dot(int64_t n, const void *xv, int64_t incx, const void *yv, int64_t incy, void *acc)
{
    const uint32_t *x = xv, *y = yv;
    uint64_t s = *(uint32_t *)acc;
    for (int64_t i = 0; i < n; i++) s = mp_red(s + (uint64_t)x[i * incx] * y[i * incy]);
    *(uint32_t *)acc = (uint32_t)s;
}

#define NAME_f32 "f32"
#define NAME_f64 "f64"
#define NAME_mp "modp"
#define DOMAIN(N, K, ST, T, EXACT)                                                               \
    {NAME_##N, K, ST, sizeof(T), EXACT, N##_zero, N##_one, N##_from_i64, N##_from_f64, N##_to_f64,    \
     N##_add, N##_sub, N##_mul, N##_neg, N##_inv, N##_axpy, N##_dot}

static const ts_num domains[] = {
    DOMAIN(f32, TS_DOMAIN_F32, TS_F32, float, false),
    DOMAIN(f64, TS_DOMAIN_F64, TS_F64, double, false),
    DOMAIN(mp, TS_DOMAIN_MODP, TS_MODP, uint32_t, true),
};

const ts_num *ts_num_get(ts_domain_kind kind) { return &domains[kind]; }
