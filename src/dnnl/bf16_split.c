/* Exact bfloat16 hi/lo splits of float16 values (bf16_split.h).  Why a
 * split: oneDNN 2.6 has no float16 convolution on CPUs, and running a
 * float16 model's convolutions in bfloat16 (weights and activations rounded
 * to 8 significant bits, float32 accumulation) puts ResNet-50's output
 * 0.177 from ONNX Runtime's float16 one against a tolerance of 0.053
 * (bfloat16 weights alone: 0.19).  With W = Wh + Wl and X = Xh + Xl exact,
 * W.X = Wh.Xh + Wh.Xl + Wl.Xh + Wl.Xl; the last term is below 2^-16 of the
 * product and is left out, the three others are bfloat16 products summed
 * in float32 by AMX: the float32 convolution's accuracy. */
#include <immintrin.h>
#include <omp.h>
#include <string.h>
#include <oneapi/dnnl/dnnl.h>
#include "dnnl/bf16_split.h"
#include "exec/half.h"

/* hi: x's top 16 bits (truncation: x - hi is then exact in float32 and, for
 * x with at most 16 significant bits, in bfloat16); lo: x - hi rounded to
 * nearest even.  Infinity and NaN: hi carries them, lo is 0. */
static inline void split_one(const float *x, uint16_t *hi, uint16_t *lo)
{
    uint32_t v, h, rb;
    memcpy(&v, x, sizeof v);
    h = v & 0xFFFF0000u;
    float hf, r;
    memcpy(&hf, &h, sizeof hf);
    r = *x - hf;
    memcpy(&rb, &r, sizeof rb);
    *hi = (uint16_t)(v >> 16);
    *lo = (v & 0x7F800000u) == 0x7F800000u ? 0 : (uint16_t)((rb + 0x7FFFu + ((rb >> 16) & 1u)) >> 16);
}

__attribute__((target("avx512f,avx512bw"))) static void split_avx512(const float *x, uint16_t *hi, uint16_t *lo,
                                                                     size_t n)
{
    const __m512i himask = _mm512_set1_epi32((int)0xFFFF0000u), expm = _mm512_set1_epi32(0x7F800000),
                  bias = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i v = _mm512_loadu_si512(x + i), h = _mm512_and_si512(v, himask);
        __m512i r = _mm512_castps_si512(_mm512_sub_ps(_mm512_castsi512_ps(v), _mm512_castsi512_ps(h)));
        r = _mm512_add_epi32(r, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(r, 16), one)));
        __mmask16 special = _mm512_cmpeq_epi32_mask(_mm512_and_si512(v, expm), expm);
        r = _mm512_maskz_srli_epi32((__mmask16)~special, r, 16);
        _mm256_storeu_si256((void *)(hi + i), _mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16)));
        _mm256_storeu_si256((void *)(lo + i), _mm512_cvtepi32_epi16(r));
    }
    for (; i < n; i++) split_one(x + i, hi + i, lo + i);
}

static void split_part(const float *x, uint16_t *hi, uint16_t *lo, size_t n)
{
    if (__builtin_cpu_supports("avx512bw")) {
        split_avx512(x, hi, lo, n);
        return;
    }
    for (size_t i = 0; i < n; i++) split_one(x + i, hi + i, lo + i);
}

#define SPLIT_PAR_MIN (1u << 15)

/* float16 in blocks widened on the stack (in L1), then split */
static void split_f16_part(const uint16_t *x, uint16_t *hi, uint16_t *lo, size_t n)
{
    float w[512];
    for (size_t i = 0; i < n; i += 512) {
        size_t k = n - i < 512 ? n - i : 512;
        xhalf_widen(TS_F16, x + i, w, k);
        split_part(w, hi + i, lo + i, k);
    }
}

/* n values of f32 (x32) or float16 (x16), over the threads from
 * SPLIT_PAR_MIN on, in parts of whole cache lines */
static void split_any(const float *x32, const uint16_t *x16, uint16_t *hi, uint16_t *lo, size_t n)
{
    if (n < SPLIT_PAR_MIN) {
        if (x32) split_part(x32, hi, lo, n);
        else split_f16_part(x16, hi, lo, n);
        return;
    }
#pragma omp parallel
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        size_t per = (n / (size_t)nt + 63) & ~(size_t)63, a = per * (size_t)t, b = a + per < n ? a + per : n;
        if (a < b && x32) split_part(x32 + a, hi + a, lo + a, b - a);
        else if (a < b) split_f16_part(x16 + a, hi + a, lo + a, b - a);
    }
}

void xd_bf16_split(const float *x, uint16_t *hi, uint16_t *lo, size_t n)
{
    split_any(x, NULL, hi, lo, n);
}

void xd_bf16_split_f16(const uint16_t *x, uint16_t *hi, uint16_t *lo, size_t n)
{
    split_any(NULL, x, hi, lo, n);
}

void xd_bf16_split_hi_inplace(float *a, uint16_t *lo, int64_t rows, int64_t k)
{
    uint16_t *hi = (uint16_t *)a;
    /* row 0's hi values overwrite its own first half: through a small
     * buffer, front to back (part c's hi lands on floats read by parts <= c) */
    for (int64_t i = 0; i < k; i += 512) {
        float t[512];
        size_t m = (size_t)(k - i < 512 ? k - i : 512);
        memcpy(t, a + i, m * sizeof(float));
        split_part(t, hi + i, lo + i, m);
    }
    /* row r's hi values land on floats of rows r/2 .. (r+1)/2 < r: rows
     * [w, 2w) in parallel once rows [0, w) are read */
    for (int64_t w = 1; w < rows; w *= 2) {
        int64_t end = 2 * w < rows ? 2 * w : rows;
#pragma omp parallel for schedule(static) if ((end - w) * k >= (int64_t)SPLIT_PAR_MIN)
        for (int64_t r = w; r < end; r++) split_part(a + r * k, hi + r * k, lo + r * k, (size_t)k);
    }
}

static int amx_forced = -1;

void xd_cpu_amx_bf16_force(int v) { amx_forced = v; }

bool xd_cpu_amx_bf16(void)
{
    if (amx_forced >= 0) return amx_forced;
    const unsigned amx = (unsigned)dnnl_cpu_isa_avx512_core_amx;
    return ((unsigned)dnnl_get_effective_cpu_isa() & amx) == amx;
}

bool xd_pd_is_amx(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    return pd && dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
           strstr(impl, "amx");
}

bool xd_x3_post_ok(const xd_fuse *f)
{
    for (int i = f->npo && f->po[0].kind == XD_PO_SUM ? 1 : 0; i < f->npo; i++)
        if (f->po[i].kind == XD_PO_SUM) return false;
    return true;
}

bool xd_on_f16_grid(const float *w, size_t n)
{
    float r[512];
    for (size_t i = 0; i < n; i += 512) {
        size_t k = n - i < 512 ? n - i : 512;
        xhalf_round_into(TS_F16, w + i, r, k);
        if (memcmp(r, w + i, k * sizeof(float))) return false;
    }
    return true;
}

/* tmp's parts: two slot buffers (k values) per thread (phase 1 uses one
 * per thread), the cycles' first slots (int64 each), a bit per slot */
static size_t tmp_rows_bytes(int64_t k, int threads)
{
    return ((size_t)(threads > 1 ? threads : 1) * 2 * (size_t)k * sizeof(uint16_t) + 63) & ~(size_t)63;
}

size_t xd_bf16_split_inplace_tmp(int64_t rows, int64_t k, int threads)
{
    return tmp_rows_bytes(k, threads) + (size_t)(2 * rows) * sizeof(int64_t) + ((size_t)(2 * rows) + 63) / 64 * 8;
}

/* Slot s of 2 x rows slots after the row-local split: row s/2's hi (s
 * even) or lo values; where they belong: hi rows first, then lo rows. */
static inline int64_t slot_dest(int64_t s, int64_t rows) { return s % 2 ? rows + s / 2 : s / 2; }

void xd_bf16_split_inplace(float *a, int64_t rows, int64_t k, void *tmp, int threads)
{
    uint16_t *u = (uint16_t *)a, *rowtmp = tmp;
    const size_t slot = (size_t)k * sizeof(uint16_t);
    if (threads < 1) threads = 1;
    const bool par = rows * k >= (int64_t)SPLIT_PAR_MIN;
    /* 1. each row in place, independently: its hi values over its first
     * half (part by part through the stack, each landing on floats read
     * already), its lo values through the thread's row buffer into its
     * second half (they land on floats not read yet) */
#pragma omp parallel for schedule(static) num_threads(threads) if (par)
    for (int64_t r = 0; r < rows; r++) {
        float *x = a + r * k;
        uint16_t *h = u + 2 * r * k, *l = rowtmp + (size_t)omp_get_thread_num() * 2 * (size_t)k;
        for (int64_t i = 0; i < k; i += 512) {
            uint16_t th[512];
            size_t m = (size_t)(k - i < 512 ? k - i : 512);
            split_part(x + i, th, l + i, m);
            memcpy(h + i, th, m * sizeof(uint16_t));
        }
        memcpy(h + k, l, slot);
    }
    /* 2. the slots (hi row r at 2r, lo row r at 2r + 1) to hi rows 0..rows-1
     * then lo rows: the permutation's cycles found first (indices only, a
     * bit per slot), then moved in parallel, each slot once, through the
     * thread's two slot buffers.  (The cycles are the orbits of doubling
     * modulo 2 rows - 1: ViT's 788 rows give 1575 = 9 x 25 x 7, cycles of
     * at most 60 slots.) */
    int64_t *lead = (int64_t *)((char *)tmp + tmp_rows_bytes(k, threads)), nlead = 0;
    uint64_t *seen = (uint64_t *)(lead + 2 * rows);
    memset(seen, 0, ((size_t)(2 * rows) + 63) / 64 * 8);
    for (int64_t s0 = 0; s0 < 2 * rows; s0++) {
        if (seen[s0 / 64] >> (s0 % 64) & 1) continue;
        int64_t s = s0;
        do {
            seen[s / 64] |= 1ull << (s % 64);
            s = slot_dest(s, rows);
        } while (s != s0);
        if (slot_dest(s0, rows) != s0) lead[nlead++] = s0;
    }
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (par && nlead > 1)
    for (int64_t c = 0; c < nlead; c++) {
        uint16_t *hand = rowtmp + (size_t)omp_get_thread_num() * 2 * (size_t)k, *next = hand + k;
        int64_t s0 = lead[c], s = s0;
        memcpy(hand, u + s0 * k, slot);
        do {
            int64_t d = slot_dest(s, rows);
            memcpy(next, u + d * k, slot);
            memcpy(u + d * k, hand, slot);
            uint16_t *t = hand;
            hand = next;
            next = t;
            s = d;
        } while (s != s0);
    }
}
