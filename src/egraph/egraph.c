/* The e-graph proper (egg's design, docs/egraph.md): e-nodes are atoms of
 * the rule language over e-class ids; a hashcons maps each canonical e-node
 * to its one copy; union is cheap and defers congruence, which rebuild
 * restores in one batch (re-hash the parents of merged classes to a
 * fixpoint, then canonicalize every class's lists).  The workload is
 * saturation: thousands of adds, most of them of e-nodes that exist
 * already, so add looks the hashcons up before computing any shape. */
#include <stdlib.h>
#include <string.h>
#include "egraph/egraph_impl.h"
#include "util/hash.h"

#define EMPTY (-1)
#define TOMB (-2)

ts_egraph *ts_egraph_new(void)
{
    ts_egraph *eg = calloc(1, sizeof *eg);
    if (!eg) return NULL;
    eg->htcap = 256;
    eg->ht = malloc(sizeof *eg->ht * eg->htcap);
    if (!eg->ht) {
        ts_egraph_free(eg);
        return NULL;
    }
    for (size_t i = 0; i < eg->htcap; i++) eg->ht[i] = EMPTY;
    eg->clean = true;
    return eg;
}

void ts_egraph_free(ts_egraph *eg)
{
    if (!eg) return;
    for (int i = 0; i < eg->uf.n; i++) {
        ts_idvec_free(&eg->cls[i].nodes);
        ts_idvec_free(&eg->cls[i].parents);
    }
    for (int i = 0; i < eg->nleaves; i++) free(eg->leaves[i].name);
    free(eg->leaves);
    free(eg->cls);
    free(eg->nodes);
    free(eg->ht);
    ts_idvec_free(&eg->pending);
    ts_idvec_free(&eg->aqueue);
    ts_idvec_free(&eg->seeds);
    free(eg->sortkey);
    ts_uf_free(&eg->uf);
    free(eg);
}

ts_eclass_id ts_egraph_find(const ts_egraph *eg, ts_eclass_id id)
{
    if (id < 0 || id >= eg->uf.n) return -1;
    return ts_uf_find_const(&eg->uf, id);
}

const ts_shape *ts_egraph_shape(const ts_egraph *eg, ts_eclass_id id)
{
    ts_eclass_id c = ts_egraph_find(eg, id);
    return c < 0 ? NULL : &eg->cls[c].shape;
}

ts_dtype ts_egraph_dtype(const ts_egraph *eg, ts_eclass_id id)
{
    ts_eclass_id c = ts_egraph_find(eg, id);
    return c < 0 ? TS_UNDEFINED : eg->cls[c].dtype;
}

size_t ts_egraph_nodes(const ts_egraph *eg) { return eg->live_nodes; }
size_t ts_egraph_classes(const ts_egraph *eg) { return eg->live_classes; }

ts_rparams ts_egraph_norm_params(ts_rop op, const ts_rparams *p)
{
    ts_rparams q = {0};
    unsigned m = ts_rop_table[op].params;
    if (!p) return q;
    if (m & TS_RPARAM_KERNEL) q.kh = p->kh, q.kw = p->kw;
    if (m & TS_RPARAM_STRIDE) q.stride = p->stride;
    if (m & TS_RPARAM_PAD) q.pad = p->pad;
    if (m & TS_RPARAM_ACT) q.act = p->act;
    if (m & TS_RPARAM_AXIS) q.axis = p->axis;
    if (m & TS_RPARAM_MULT) q.mult = p->mult;
    return q;
}

/* ---- the hashcons */

static uint64_t node_hash(const ts_enode *n)
{
    uint64_t h = ts_hash_mix64((uint64_t)n->op * 31 + (uint64_t)n->nargs);
    const int *pp = (const int *)&n->p;
    for (size_t i = 0; i < sizeof n->p / sizeof(int); i++) h = ts_hash_mix64(h ^ (uint64_t)(uint32_t)pp[i]);
    h = ts_hash_mix64(h ^ (uint64_t)n->at);
    for (int i = 0; i < n->nargs; i++) h = ts_hash_mix64(h ^ (uint64_t)(uint32_t)n->arg[i]);
    return h;
}

static bool node_eq(const ts_enode *a, const ts_enode *b)
{
    if (a->op != b->op || a->nargs != b->nargs || a->at != b->at || memcmp(&a->p, &b->p, sizeof a->p)) return false;
    for (int i = 0; i < a->nargs; i++)
        if (a->arg[i] != b->arg[i]) return false;
    return true;
}

/* The id of the e-node equal to key, or -1. */
static int32_t ht_lookup(const ts_egraph *eg, const ts_enode *key)
{
    size_t mask = eg->htcap - 1, i = (size_t)node_hash(key) & mask;
    for (;; i = (i + 1) & mask) {
        int32_t e = eg->ht[i];
        if (e == EMPTY) return -1;
        if (e >= 0 && node_eq(&eg->nodes[e], key)) return e;
    }
}

static bool ht_grow(ts_egraph *eg)
{
    size_t ncap = eg->htcap * 2;
    /* mostly tombstones: rehash at the same size */
    if ((eg->live_nodes + 1) * 4 < eg->htcap) ncap = eg->htcap;
    int32_t *old = eg->ht, *nt = malloc(sizeof *nt * ncap);
    if (!nt) return false;
    for (size_t i = 0; i < ncap; i++) nt[i] = EMPTY;
    size_t oldcap = eg->htcap;
    eg->ht = nt;
    eg->htcap = ncap;
    eg->htused = 0;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i] >= 0) {
            size_t mask = ncap - 1, j = (size_t)node_hash(&eg->nodes[old[i]]) & mask;
            while (nt[j] != EMPTY) j = (j + 1) & mask;
            nt[j] = old[i];
            eg->htused++;
        }
    free(old);
    return true;
}

static bool ht_insert(ts_egraph *eg, int32_t id)
{
    if ((eg->htused + 1) * 2 > eg->htcap && !ht_grow(eg)) return false;
    size_t mask = eg->htcap - 1, i = (size_t)node_hash(&eg->nodes[id]) & mask;
    while (eg->ht[i] >= 0) i = (i + 1) & mask;
    if (eg->ht[i] == EMPTY) eg->htused++;
    eg->ht[i] = id;
    return true;
}

/* Removes e-node id, found under the hash of its current content. */
static void ht_remove(ts_egraph *eg, int32_t id)
{
    size_t mask = eg->htcap - 1, i = (size_t)node_hash(&eg->nodes[id]) & mask;
    for (;; i = (i + 1) & mask) {
        if (eg->ht[i] == EMPTY) return;
        if (eg->ht[i] == id) {
            eg->ht[i] = TOMB;
            return;
        }
    }
}

int32_t ts_egraph_live_node(const ts_egraph *eg, int32_t id)
{
    if (id < 0 || id >= eg->nnodes) return -1;
    if (!eg->nodes[id].dead) return id;
    ts_enode key = eg->nodes[id];
    for (int i = 0; i < key.nargs; i++) key.arg[i] = ts_uf_find_const(&eg->uf, key.arg[i]);
    return ht_lookup(eg, &key);
}

/* ---- adding */

static ts_eclass_id new_class(ts_egraph *eg, const ts_shape *s, ts_dtype dt, bool constant)
{
    if (eg->uf.n == eg->cap_cls) {
        int nc = eg->cap_cls ? eg->cap_cls * 2 : 64;
        ts_eclass *p = realloc(eg->cls, sizeof *p * (size_t)nc);
        if (!p) return -1;
        eg->cls = p;
        eg->cap_cls = nc;
    }
    int32_t id = ts_uf_make(&eg->uf);
    if (id < 0) return -1;
    ts_eclass *c = &eg->cls[id];
    memset(c, 0, sizeof *c);
    c->shape = *s;
    c->dtype = dt;
    c->constant = constant;
    eg->live_classes++;
    return id;
}

/* Appends key as a new e-node of a new class. */
static ts_eclass_id insert_new(ts_egraph *eg, const ts_enode *key, const ts_shape *s, ts_dtype dt, bool constant)
{
    if (eg->nnodes == eg->cap_nodes) {
        int nc = eg->cap_nodes ? eg->cap_nodes * 2 : 64;
        ts_enode *p = realloc(eg->nodes, sizeof *p * (size_t)nc);
        if (!p) return -1;
        eg->nodes = p;
        eg->cap_nodes = nc;
    }
    ts_eclass_id c = new_class(eg, s, dt, constant);
    if (c < 0) return -1;
    int32_t id = eg->nnodes++;
    eg->nodes[id] = *key;
    eg->nodes[id].cls = c;
    eg->nodes[id].dead = false;
    if (!ts_idvec_push(&eg->cls[c].nodes, id) || !ht_insert(eg, id)) return -1;
    for (int i = 0; i < key->nargs; i++)
        if (!ts_idvec_push(&eg->cls[key->arg[i]].parents, id)) return -1;
    eg->live_nodes++;
    return c;
}

ts_eclass_id ts_egraph_add_leaf(ts_egraph *eg, const char *name, const ts_shape *shape, ts_dtype dt, bool is_weight,
                                ts_error *err)
{
    int li = -1;
    for (int i = 0; i < eg->nleaves && li < 0; i++)
        if (!strcmp(eg->leaves[i].name, name)) li = i;
    if (li >= 0) {
        const ts_eleaf *l = &eg->leaves[li];
        if (!ts_shape_eq(&l->shape, shape) || l->dtype != dt || l->weight != is_weight) {
            ts_error_set(err, TS_ERR_INVALID, "e-graph leaf '%s' added twice with different shape, type or kind",
                         name);
            return -1;
        }
    } else {
        if (eg->nleaves == eg->cap_leaves) {
            int nc = eg->cap_leaves ? eg->cap_leaves * 2 : 8;
            ts_eleaf *p = realloc(eg->leaves, sizeof *p * (size_t)nc);
            if (!p) goto nomem;
            eg->leaves = p;
            eg->cap_leaves = nc;
        }
        char *nm = malloc(strlen(name) + 1);
        if (!nm) goto nomem;
        strcpy(nm, name);
        li = eg->nleaves++;
        eg->leaves[li] = (ts_eleaf){.name = nm, .shape = *shape, .dtype = dt, .weight = is_weight};
    }
    ts_enode key = {.op = TS_ROP_VAR, .at = li};
    int32_t n = ht_lookup(eg, &key);
    if (n >= 0) return ts_uf_find(&eg->uf, eg->nodes[n].cls);
    ts_eclass_id c = insert_new(eg, &key, shape, dt, is_weight);
    if (c >= 0) return c;
nomem:
    ts_error_set(err, TS_ERR_NOMEM, "out of memory adding e-graph leaf '%s'", name);
    return -1;
}

ts_eclass_id ts_egraph_add_node(ts_egraph *eg, ts_rop op, const ts_rparams *p, int64_t at, int nargs,
                                const ts_eclass_id *args, ts_error *err)
{
    const ts_ropinfo *in = ts_rop_info(op);
    if (!in || op == TS_ROP_VAR || in->constant || !in->build || nargs != in->nargs) {
        ts_error_set(err, TS_ERR_INVALID, "e-graph: atom %d with %d arguments is not an operator the e-graph holds",
                     (int)op, nargs);
        return -1;
    }
    ts_enode key = {.op = op, .nargs = nargs, .p = ts_egraph_norm_params(op, p), .at = in->cuts ? at : 0};
    for (int i = 0; i < nargs; i++) {
        if (args[i] < 0 || args[i] >= eg->uf.n) {
            ts_error_set(err, TS_ERR_INVALID, "e-graph: %s argument %d is no e-class (%d)", in->atom, i, args[i]);
            return -1;
        }
        key.arg[i] = ts_uf_find(&eg->uf, args[i]);
    }
    int32_t n = ht_lookup(eg, &key);
    if (n >= 0) return ts_uf_find(&eg->uf, eg->nodes[n].cls);
    const ts_shape *sh[2] = {NULL, NULL};
    ts_dtype dt[2] = {TS_UNDEFINED, TS_UNDEFINED};
    bool constant = true;
    for (int i = 0; i < nargs; i++) {
        const ts_eclass *c = &eg->cls[key.arg[i]];
        sh[i] = &c->shape;
        dt[i] = c->dtype;
        constant &= c->constant;
    }
    ts_shape out;
    ts_dtype odt;
    ts_error e = {0};
    if (!ts_egraph_infer(op, &key.p, key.at, nargs, sh, dt, &out, &odt, &e)) {
        if (e.code == TS_ERR_NOMEM) {
            if (err) *err = e;
            return -1;
        }
        char s0[160], s1[160];
        ts_error_set(err, TS_ERR_INVALID, "e-graph: %s does not fit arguments of shape %s%s%s", in->atom,
                     ts_shape_str(sh[0], s0, sizeof s0), nargs > 1 ? " and " : "",
                     nargs > 1 ? ts_shape_str(sh[1], s1, sizeof s1) : "");
        return -1;
    }
    if (eg->max_elems > 0 && ts_shape_numel(&out) > eg->max_elems) {
        char s0[160];
        ts_error_set(err, TS_ERR_INVALID, "e-graph: %s would make a %s tensor, over the limit of %lld elements",
                     in->atom, ts_shape_str(&out, s0, sizeof s0), (long long)eg->max_elems);
        return -1;
    }
    ts_eclass_id c = insert_new(eg, &key, &out, odt, constant);
    if (c < 0) ts_error_set(err, TS_ERR_NOMEM, "out of memory adding an e-node");
    return c;
}

/* TASO's split tree in the e-graph: the split point of a class along TASO
 * axis `axis` is the size of the first part of a concat along it in the
 * class (the first such e-node), -1 when there is none. */
static int64_t class_split_point(const ts_egraph *eg, ts_eclass_id c, int axis)
{
    const ts_eclass *k = &eg->cls[ts_uf_find_const(&eg->uf, c)];
    for (int i = 0; i < k->nodes.n; i++) {
        const ts_enode *n = &eg->nodes[k->nodes.v[i]];
        if (n->dead || n->op != TS_ROP_CONCAT || n->p.axis != axis) continue;
        const ts_shape *a = ts_egraph_shape(eg, n->arg[0]);
        int ax = a->rank == 3 ? axis + 1 : axis;
        return ax < a->rank ? a->dims[ax] : -1;
    }
    return -1;
}

ts_eclass_id ts_egraph_add(ts_egraph *eg, ts_rop op, const ts_rparams *p, int nargs, const ts_eclass_id *args,
                           ts_error *err)
{
    int64_t at = 0;
    if (op > TS_ROP_VAR && op < TS_ROP_COUNT && ts_rop_table[op].cuts && nargs == 1 && args[0] >= 0 &&
        args[0] < eg->uf.n) {
        at = class_split_point(eg, args[0], p ? p->axis : 0);
        if (at < 0) {
            ts_error_set(err, TS_ERR_INVALID, "e-graph: %s of a class with no concat along axis %d to split at",
                         ts_rop_table[op].atom, p ? p->axis : 0);
            return -1;
        }
    }
    return ts_egraph_add_node(eg, op, p, at, nargs, args, err);
}

ts_eclass_id ts_egraph_add_split(ts_egraph *eg, ts_rop op, int axis, int64_t at, ts_eclass_id arg, ts_error *err)
{
    ts_rparams p = {.axis = axis};
    if (op != TS_ROP_SPLIT0 && op != TS_ROP_SPLIT1) {
        ts_error_set(err, TS_ERR_INVALID, "e-graph: ts_egraph_add_split takes split0 or split1");
        return -1;
    }
    return ts_egraph_add_node(eg, op, &p, at, 1, &arg, err);
}

/* ---- union and rebuild */

/* Out of memory while merging lists would lose congruence silently: the
 * flag makes saturation fail instead (ts_egraph_saturate). */
static void push(ts_egraph *eg, ts_idvec *v, int32_t x)
{
    if (!ts_idvec_push(v, x)) eg->oom = true;
}

bool ts_egraph_union(ts_egraph *eg, ts_eclass_id a, ts_eclass_id b)
{
    if (a < 0 || b < 0 || a >= eg->uf.n || b >= eg->uf.n) return false;
    a = ts_uf_find(&eg->uf, a);
    b = ts_uf_find(&eg->uf, b);
    if (a == b) return false;
    ts_eclass *ca = &eg->cls[a], *cb = &eg->cls[b];
    /* the analysis must agree: an unsound union is refused */
    if (!ts_shape_eq(&ca->shape, &cb->shape) || ca->dtype != cb->dtype) return false;
    /* the class with fewer parents folds in: fewer e-nodes to re-hash */
    if (ca->parents.n < cb->parents.n) {
        ts_eclass_id t = a;
        a = b, b = t;
        ca = &eg->cls[a], cb = &eg->cls[b];
    }
    ts_uf_link(&eg->uf, b, a);
    eg->live_classes--;
    eg->clean = false;
    for (int i = 0; i < cb->parents.n; i++) push(eg, &eg->pending, cb->parents.v[i]);
    for (int i = 0; i < cb->nodes.n; i++) push(eg, &ca->nodes, cb->nodes.v[i]);
    for (int i = 0; i < cb->parents.n; i++) push(eg, &ca->parents, cb->parents.v[i]);
    if (ca->constant != cb->constant) {
        /* the side that was not constant now is: its parents may become so */
        const ts_idvec *ps = ca->constant ? &cb->parents : &ca->parents;
        for (int i = 0; i < ps->n; i++) push(eg, &eg->aqueue, ps->v[i]);
        ca->constant = true;
    }
    ts_idvec_free(&cb->nodes);
    ts_idvec_free(&cb->parents);
    return true;
}

static int cmp_key(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Sorted by (atom, id) -- the matcher finds an atom's e-nodes as one run
 * -- without duplicates or dead e-nodes. */
static void canon_list(ts_egraph *eg, ts_idvec *l)
{
    int k = 0;
    for (int i = 0; i < l->n; i++)
        if (!eg->nodes[l->v[i]].dead) l->v[k++] = l->v[i];
    l->n = k;
    if (l->n < 2) return;
    if (eg->cap_sortkey < l->n) {
        uint64_t *p = realloc(eg->sortkey, sizeof *p * (size_t)l->n);
        if (!p) {
            eg->oom = true;
            return;
        }
        eg->sortkey = p;
        eg->cap_sortkey = l->n;
    }
    uint64_t *key = eg->sortkey;
    for (int i = 0; i < l->n; i++) key[i] = (uint64_t)(uint32_t)eg->nodes[l->v[i]].op << 32 | (uint32_t)l->v[i];
    qsort(key, (size_t)l->n, sizeof *key, cmp_key);
    k = 0;
    for (int i = 0; i < l->n; i++)
        if (i == 0 || key[i] != key[i - 1]) l->v[k++] = (int32_t)(uint32_t)key[i];
    l->n = k;
}

/* Re-hashes e-node id under canonical children; merges it into an equal
 * one (congruence) when there is one. */
static void repair(ts_egraph *eg, int32_t id)
{
    ts_enode *n = &eg->nodes[id];
    if (n->dead) return;
    ht_remove(eg, id);
    for (int i = 0; i < n->nargs; i++) n->arg[i] = ts_uf_find(&eg->uf, n->arg[i]);
    int32_t twin = ht_lookup(eg, n);
    if (twin >= 0 && twin != id) {
        n->dead = true;
        eg->live_nodes--;
        ts_egraph_union(eg, n->cls, eg->nodes[twin].cls);
    } else if (twin < 0 && !ht_insert(eg, id)) {
        eg->oom = true;
    }
}

/* Constant propagation: e-node id makes its class constant when all its
 * children are. */
static void analyse(ts_egraph *eg, int32_t id)
{
    const ts_enode *n = &eg->nodes[id];
    if (n->dead || n->op == TS_ROP_VAR) return;
    ts_eclass_id c = ts_uf_find(&eg->uf, n->cls);
    if (eg->cls[c].constant) return;
    for (int i = 0; i < n->nargs; i++)
        if (!eg->cls[ts_uf_find(&eg->uf, n->arg[i])].constant) return;
    eg->cls[c].constant = true;
    const ts_idvec *ps = &eg->cls[c].parents;
    for (int i = 0; i < ps->n; i++) push(eg, &eg->aqueue, ps->v[i]);
}

void ts_egraph_rebuild(ts_egraph *eg)
{
    if (eg->clean) return;
    ts_idvec todo = {0};
    while (eg->pending.n || eg->aqueue.n) {
        /* take the batch: repairs push more onto pending */
        ts_idvec t = eg->pending;
        eg->pending = todo;
        eg->pending.n = 0;
        for (int i = 0; i < t.n; i++) repair(eg, t.v[i]);
        todo = t;
        while (eg->aqueue.n) {
            int32_t id = eg->aqueue.v[--eg->aqueue.n];
            analyse(eg, id);
        }
    }
    ts_idvec_free(&todo);
    for (int c = 0; c < eg->uf.n; c++) {
        if (ts_uf_find(&eg->uf, c) != c) continue;
        canon_list(eg, &eg->cls[c].nodes);
        /* parents: each live one once (a dead parent's twin is a parent too) */
        ts_idvec *ps = &eg->cls[c].parents;
        canon_list(eg, ps);
    }
    eg->clean = true;
}
