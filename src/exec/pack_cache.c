/* ts_pack_cache: weights packed by one plan, reused by the next plans of
 * the same owner instead of packing them again.
 *
 * Why: a session re-plans a model at each new set of input sizes (a
 * decoder, at each token: its past grows by one), and every weight-bearing
 * step of the new plan has the geometry of the last one's.  Packing the
 * weights again was half of a decoder re-plan's CPU (docs/decoder.md).
 *
 * An entry is keyed by the constant tensor itself (the object, which it
 * holds a reference to, so its address cannot be reused by another tensor
 * while the entry lives), the kernel's packing tag and one integer
 * parameter.  Only tensors shared with another graph are cached
 * (xpack_cacheable): a session's graphs loaded at new sizes share their
 * constants with the model kept once (ts_onnx_kept); a constant a rewrite
 * made for one graph (a folded scale) could never be found again.
 *
 * Entries live while a plan holds them: the last plan using one frees it,
 * so the cache holds exactly the packed weights of the live plans, once.
 * The cache itself is freed when both its owner has freed it and its last
 * entry has gone (plans may outlive it). */
#include <pthread.h>
#include <stdlib.h>
#include "exec/pack_cache.h"

struct xpack_entry {
    ts_pack_cache *cache;
    xpack_entry *next;
    ts_tensor *t; /* referenced */
    const char *tag;
    int64_t param;
    void *data;
    size_t bytes;
    int refs;
};

struct ts_pack_cache {
    pthread_mutex_t lock;
    xpack_entry *head;
    int refs; /* the owner's, plus one per entry */
    ts_pack_cache_stats stats;
};

ts_pack_cache *ts_pack_cache_new(void)
{
    ts_pack_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    pthread_mutex_init(&c->lock, NULL);
    c->refs = 1;
    return c;
}

/* With c->lock held; true when c is to be freed (after unlocking). */
static bool cache_drop(ts_pack_cache *c) { return --c->refs == 0; }

static void cache_destroy(ts_pack_cache *c)
{
    pthread_mutex_destroy(&c->lock);
    free(c);
}

void ts_pack_cache_free(ts_pack_cache *c)
{
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    bool last = cache_drop(c);
    pthread_mutex_unlock(&c->lock);
    if (last) cache_destroy(c);
}

ts_pack_cache_stats ts_pack_cache_get_stats(ts_pack_cache *c)
{
    ts_pack_cache_stats s = {0};
    if (!c) return s;
    pthread_mutex_lock(&c->lock);
    s = c->stats;
    pthread_mutex_unlock(&c->lock);
    return s;
}

void xpack_note_plain(ts_pack_cache *c)
{
    pthread_mutex_lock(&c->lock);
    c->stats.plain++;
    pthread_mutex_unlock(&c->lock);
}

bool xpack_cacheable(const ts_pack_cache *c, const ts_tensor *t)
{
    return c && t && t->data && t->refcount > 1;
}

xpack_entry *xpack_find(ts_pack_cache *c, const ts_tensor *t, const char *tag, int64_t param)
{
    pthread_mutex_lock(&c->lock);
    xpack_entry *e = c->head;
    while (e && !(e->t == t && e->tag == tag && e->param == param)) e = e->next;
    if (e) {
        e->refs++;
        c->stats.hits++;
        c->stats.hit_bytes += (int64_t)e->bytes;
    } else {
        c->stats.misses++;
    }
    pthread_mutex_unlock(&c->lock);
    return e;
}

xpack_entry *xpack_add(ts_pack_cache *c, const ts_tensor *t, const char *tag, int64_t param, void *data, size_t bytes)
{
    xpack_entry *e = malloc(sizeof *e);
    if (!e) return NULL;
    *e = (xpack_entry){.cache = c, .t = ts_tensor_ref((ts_tensor *)t), .tag = tag, .param = param, .data = data,
                       .bytes = bytes, .refs = 1};
    pthread_mutex_lock(&c->lock);
    e->next = c->head;
    c->head = e;
    c->refs++;
    c->stats.entries++;
    c->stats.bytes += (int64_t)bytes;
    pthread_mutex_unlock(&c->lock);
    return e;
}

void *xpack_data(const xpack_entry *e) { return e->data; }

void xpack_unref(xpack_entry *e)
{
    if (!e) return;
    ts_pack_cache *c = e->cache;
    pthread_mutex_lock(&c->lock);
    bool gone = --e->refs == 0, last = false;
    if (gone) {
        xpack_entry **pp = &c->head;
        while (*pp != e) pp = &(*pp)->next;
        *pp = e->next;
        c->stats.entries--;
        c->stats.bytes -= (int64_t)e->bytes;
        last = cache_drop(c);
    }
    pthread_mutex_unlock(&c->lock);
    if (!gone) return;
    free(e->data);
    ts_tensor_unref(e->t);
    free(e);
    if (last) cache_destroy(c);
}
