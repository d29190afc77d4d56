/* Name -> int hash map (open addressing, FNV-1a), shared by the ONNX
 * importer's scopes and the graph's value-name index (ts_graph_find_value).
 * Keys are not copied: they must outlive the map. */
#ifndef TS_IR_NAME_MAP_H
#define TS_IR_NAME_MAP_H

#include <stdbool.h>
#include <stddef.h>

typedef struct ts_name_map {
    const char **keys;
    int *vals;
    size_t cap, n;
} ts_name_map;

/* True when key is present (its value to *val when val is given). */
bool ts_name_map_find(const ts_name_map *m, const char *key, int *val);
/* Inserts or overwrites; false when out of memory. */
bool ts_name_map_put(ts_name_map *m, const char *key, int val);
void ts_name_map_free(ts_name_map *m);

#endif
