/* The one hash of the tree (issue 27, "one hash"): FNV-1a over bytes,
 * strings and words, and splitmix64's and MurmurHash3's finalizers for
 * mixing words.  On-disk keys depend on the exact values (the op-cost
 * cache's keys, EinNet's codegen cache, the function names EinNet writes
 * into models): changing a function here invalidates those caches and
 * renames those functions.  ts_rand_next is splitmix64's generator, the
 * seeded source of test data and fuzz inputs (same seed, same values). */
#ifndef TS_UTIL_HASH_H
#define TS_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>

#define TS_HASH_SEED 0xcbf29ce484222325ull /* FNV-1a's offset basis */
#define TS_HASH_PRIME 0x100000001b3ull

static inline uint64_t ts_hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * TS_HASH_PRIME;
    return h;
}

static inline uint64_t ts_hash_str(uint64_t h, const char *s)
{
    for (; *s; s++) h = (h ^ (unsigned char)*s) * TS_HASH_PRIME;
    return h;
}

/* One FNV step on a whole word (dims, dtypes): cheaper than its 8 bytes. */
static inline uint64_t ts_hash_word(uint64_t h, uint64_t w) { return (h ^ w) * TS_HASH_PRIME; }

/* splitmix64's finalizer of x + the golden ratio: every bit of x moves
 * about half of the result's bits. */
static inline uint64_t ts_hash_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* MurmurHash3's 64-bit finalizer (fmix64). */
static inline uint64_t ts_hash_fmix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

/* splitmix64: the next value of the sequence seeded by *state. */
static inline uint64_t ts_rand_next(uint64_t *state)
{
    uint64_t x = ts_hash_mix64(*state);
    *state += 0x9e3779b97f4a7c15ull;
    return x;
}

#endif
