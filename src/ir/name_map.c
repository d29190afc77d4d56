/* Name -> int hash map (name_map.h). */
#include "ir/name_map.h"
#include "util/hash.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

bool ts_name_map_find(const ts_name_map *m, const char *key, int *val)
{
    if (!m->cap) return false;
    for (size_t i = ts_hash_str(TS_HASH_SEED, key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i]) return false;
        if (!strcmp(m->keys[i], key)) {
            if (val) *val = m->vals[i];
            return true;
        }
    }
}

bool ts_name_map_put(ts_name_map *m, const char *key, int val)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 64;
        ts_name_map b = {calloc(nc, sizeof *b.keys), calloc(nc, sizeof *b.vals), nc, 0};
        if (!b.keys || !b.vals) {
            free(b.keys);
            free(b.vals);
            return false;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i]) ts_name_map_put(&b, m->keys[i], m->vals[i]);
        free(m->keys);
        free(m->vals);
        *m = b;
    }
    size_t i = ts_hash_str(TS_HASH_SEED, key) & (m->cap - 1);
    while (m->keys[i] && strcmp(m->keys[i], key)) i = (i + 1) & (m->cap - 1);
    if (!m->keys[i]) m->n++;
    m->keys[i] = key;
    m->vals[i] = val;
    return true;
}

void ts_name_map_free(ts_name_map *m)
{
    free(m->keys);
    free(m->vals);
    *m = (ts_name_map){0};
}
