/* Packed weights shared by the plans of one owner (ts_pack_cache,
 * ts_plan_opts.pack_cache): pack_cache.c. */
#ifndef TS_EXEC_PACK_CACHE_H
#define TS_EXEC_PACK_CACHE_H

#include <stddef.h>
#include "tsopt.h"

typedef struct xpack_entry xpack_entry;

/* True when a packing of constant t may go through cache c: t is shared
 * with another graph (refcount > 1: the model's weights kept once by a
 * session, ts_onnx_kept), so a later plan can present the same tensor
 * again, and weights_once.c never empties it. */
bool xpack_cacheable(const ts_pack_cache *c, const ts_tensor *t);
/* The packing `tag` (a kernel's static layout string; everything the
 * packed form depends on besides t's contents, shape and dtype must be in
 * it or in `param`) of t, with a new reference for the caller: NULL when
 * not there. */
xpack_entry *xpack_find(ts_pack_cache *c, const ts_tensor *t, const char *tag, int64_t param);
/* Adds `data` (malloc'd, `bytes` long: the cache owns it from now on) as
 * t's `tag` packing; the caller holds one reference.  NULL when out of
 * memory (data is still the caller's). */
xpack_entry *xpack_add(ts_pack_cache *c, const ts_tensor *t, const char *tag, int64_t param, void *data, size_t bytes);
void *xpack_data(const xpack_entry *e);
/* Counts a shared weight a plan reads unpacked (ts_pack_cache_stats.plain). */
void xpack_note_plain(ts_pack_cache *c);
/* Drops a reference; the last one frees the packed copy. */
void xpack_unref(xpack_entry *e);

#endif
