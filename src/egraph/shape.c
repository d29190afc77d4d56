/* The e-class analysis's make: the shape and dtype of an atom over
 * arguments of given shapes.  The shape rules are the atoms' own: each
 * query builds the atom with its row's build function (src/rules/atom_*.c,
 * the models' reading, as the applier does) on a scratch graph whose inputs
 * have the arguments' shapes, and reads the result, so the e-graph accepts
 * exactly what the applier and the extraction can build.  Building is slow
 * next to a hash lookup, and saturation asks the same few questions
 * thousands of times, so answers are memoized by (atom, params, split
 * point, argument shapes and dtypes).  The answers depend on nothing else,
 * so one memo serves every e-graph of a thread (the fuzzer makes one per
 * pair, of the same few shapes): per thread, bounded (cleared when full),
 * freed when the thread ends. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "egraph/egraph_impl.h"
#include "rules/atom.h"
#include "util/hash.h"

typedef struct memo_key {
    int32_t op, nargs;
    ts_rparams p;
    int64_t at;
    ts_shape in[2];
    int32_t dt[2];
} memo_key;

typedef struct memo_entry {
    memo_key key;
    bool ok;
    ts_shape out;
    ts_dtype dt;
} memo_entry;

typedef struct ts_shape_memo {
    memo_entry *e;
    int n, cap;
    int32_t *ht; /* entry ids, -1 empty */
    size_t htcap;
} ts_shape_memo;

#define MEMO_MAX 16384 /* entries (about 300 bytes each) */

static void memo_free(void *p)
{
    ts_shape_memo *m = p;
    if (!m) return;
    free(m->e);
    free(m->ht);
    free(m);
}

static pthread_key_t memo_key_tls;
static pthread_once_t memo_once = PTHREAD_ONCE_INIT;
static bool memo_key_ok;

static void memo_key_init(void)
{
    memo_key_ok = pthread_key_create(&memo_key_tls, memo_free) == 0;
}

/* This thread's memo, made on first use; NULL out of memory. */
static ts_shape_memo *thread_memo(void)
{
    pthread_once(&memo_once, memo_key_init);
    if (!memo_key_ok) return NULL;
    ts_shape_memo *m = pthread_getspecific(memo_key_tls);
    if (m) return m;
    m = calloc(1, sizeof *m);
    if (m && pthread_setspecific(memo_key_tls, m)) {
        free(m);
        m = NULL;
    }
    return m;
}

static uint64_t key_hash(const memo_key *k)
{
    /* word by word (the key is zeroed, padding included, before filling) */
    const unsigned char *b = (const unsigned char *)k;
    uint64_t h = TS_HASH_SEED, w;
    size_t i = 0;
    for (; i + 8 <= sizeof *k; i += 8) {
        memcpy(&w, b + i, 8);
        h = ts_hash_mix64(h ^ w);
    }
    return ts_hash_bytes(h, b + i, sizeof *k - i);
}

static int32_t memo_find(const ts_shape_memo *m, const memo_key *k)
{
    if (!m->htcap) return -1;
    size_t mask = m->htcap - 1;
    for (size_t i = (size_t)key_hash(k) & mask;; i = (i + 1) & mask) {
        int32_t e = m->ht[i];
        if (e < 0) return -1;
        if (!memcmp(&m->e[e].key, k, sizeof *k)) return e;
    }
}

static bool memo_put(ts_shape_memo *m, const memo_entry *en)
{
    if (m->n >= MEMO_MAX) {
        m->n = 0;
        for (size_t i = 0; i < m->htcap; i++) m->ht[i] = -1;
    }
    if (m->n == m->cap) {
        int nc = m->cap ? m->cap * 2 : 32;
        memo_entry *p = realloc(m->e, sizeof *p * (size_t)nc);
        if (!p) return false;
        m->e = p;
        m->cap = nc;
    }
    if ((size_t)(m->n + 1) * 2 > m->htcap) {
        size_t nc = m->htcap ? m->htcap * 2 : 64;
        int32_t *t = malloc(sizeof *t * nc);
        if (!t) return false;
        for (size_t i = 0; i < nc; i++) t[i] = -1;
        for (int j = 0; j < m->n; j++) {
            size_t i = (size_t)key_hash(&m->e[j].key) & (nc - 1);
            while (t[i] >= 0) i = (i + 1) & (nc - 1);
            t[i] = j;
        }
        free(m->ht);
        m->ht = t;
        m->htcap = nc;
    }
    m->e[m->n] = *en;
    size_t i = (size_t)key_hash(&en->key) & (m->htcap - 1);
    while (m->ht[i] >= 0) i = (i + 1) & (m->htcap - 1);
    m->ht[i] = m->n++;
    return true;
}

/* Builds the atom on a scratch graph: the answer, or false. */
static bool build_scratch(const memo_key *k, memo_entry *en, ts_error *err)
{
    /* opset 11: Split's sizes are an attribute, not a constant to make
     * (shapes do not depend on the opset) */
    ts_graph *g = ts_graph_new("egraph-shape", 11);
    if (!g) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory inferring an e-node's shape");
        return false;
    }
    ts_rbuild b = {.g = g, .bias = -1, .split_at = k->at};
    int x[2] = {-1, -1};
    bool ok = true;
    for (int i = 0; i < k->nargs && ok; i++) {
        char name[8] = {'a', (char)('0' + i), 0};
        x[i] = ts_graph_add_input(g, name, (ts_dtype)k->dt[i], &k->in[i], &b.err);
        ok = x[i] >= 0;
    }
    int v = ok ? ts_rop_table[k->op].build(&b, (ts_rop)k->op, &k->p, x) : -1;
    en->ok = v >= 0;
    if (en->ok) {
        en->out = g->values[v].shape;
        en->dt = g->values[v].dtype;
    } else if (b.err.code == TS_ERR_NOMEM) {
        if (err) *err = b.err;
        ts_graph_free(g);
        return false;
    }
    ts_graph_free(g);
    return true;
}

bool ts_egraph_infer(ts_rop op, const ts_rparams *p, int64_t at, int nargs,
                     const ts_shape *const *in, const ts_dtype *dt, ts_shape *out, ts_dtype *odt, ts_error *err)
{
    memo_key k;
    memset(&k, 0, sizeof k); /* the key is hashed and compared bytewise, padding included */
    k.op = op;
    k.nargs = nargs;
    k.p = *p;
    k.at = at;
    for (int i = 0; i < nargs; i++) {
        /* dims past the rank are not part of a shape */
        k.in[i].rank = in[i]->rank;
        memcpy(k.in[i].dims, in[i]->dims, sizeof(int64_t) * (size_t)in[i]->rank);
        k.dt[i] = dt[i];
    }
    ts_shape_memo *m = thread_memo();
    int32_t e = m ? memo_find(m, &k) : -1;
    memo_entry en;
    if (e >= 0) {
        en = m->e[e];
    } else {
        memset(&en, 0, sizeof en);
        en.key = k;
        if (!build_scratch(&k, &en, err)) return false;
        if (!m || !memo_put(m, &en)) {
            ts_error_set(err, TS_ERR_NOMEM, "out of memory inferring an e-node's shape");
            return false;
        }
    }
    if (!en.ok) return false;
    *out = en.out;
    *odt = en.dt;
    return true;
}
