/* Layout candidates for the oneDNN kernels; see dnnl_layout.h. */
#include <string.h>
#include "dnnl/dnnl_layout.h"

int xd_pd_rank(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl) return 1;
    if (strncmp(impl, "ref", 3) == 0) return 0;
    if (strstr(impl, "avx512") || strstr(impl, "amx")) return 3;
    if (strstr(impl, "avx2")) return 2;
    return 1;
}

/* The activation layouts, per rank (3-D, 4-D, 5-D). */
static const dnnl_format_tag_t layouts[3][4] = {
    {dnnl_acb, dnnl_aBc16b, dnnl_aBc8b, dnnl_aBc4b},
    {dnnl_acdb, dnnl_aBcd16b, dnnl_aBcd8b, dnnl_aBcd4b},
    {dnnl_acdeb, dnnl_aBcde16b, dnnl_aBcde8b, dnnl_aBcde4b},
};

static bool md_tag(dnnl_memory_desc_t *md, const ts_shape *s, dnnl_format_tag_t tag)
{
    dnnl_dims_t dims;
    for (int i = 0; i < s->rank; i++) dims[i] = s->dims[i];
    return dnnl_memory_desc_init_by_tag(md, s->rank, dims, dnnl_f32, tag) == dnnl_success;
}

bool xd_md_same_layout(const dnnl_memory_desc_t *like, const ts_shape *like_s, const ts_shape *s,
                       dnnl_memory_desc_t *out)
{
    if (like_s->rank != s->rank || s->rank < 3 || s->rank > 5) return false;
    const dnnl_format_tag_t *tags = layouts[s->rank - 3];
    for (int i = 0; i < 4; i++) {
        dnnl_memory_desc_t md;
        if (md_tag(&md, like_s, tags[i]) && dnnl_memory_desc_equal(&md, like)) return md_tag(out, s, tags[i]);
    }
    return false;
}

bool xd_md_same_bytes(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b)
{
    if (dnnl_memory_desc_equal(a, b)) return true;
    if (a->ndims != 4 || b->ndims != 4 || a->data_type != dnnl_f32 || b->data_type != dnnl_f32 ||
        memcmp(a->dims, b->dims, sizeof(dnnl_dim_t) * 4) || (a->dims[1] != 16 && a->dims[1] != 8))
        return false;
    dnnl_memory_desc_t cl, bl;
    dnnl_memory_desc_init_by_tag(&cl, 4, a->dims, dnnl_f32, dnnl_acdb);
    dnnl_memory_desc_init_by_tag(&bl, 4, a->dims, dnnl_f32, a->dims[1] == 16 ? dnnl_aBcd16b : dnnl_aBcd8b);
    return (dnnl_memory_desc_equal(a, &cl) && dnnl_memory_desc_equal(b, &bl)) ||
           (dnnl_memory_desc_equal(a, &bl) && dnnl_memory_desc_equal(b, &cl));
}

bool xd_conv_blocks_candidate(const dnnl_memory_desc_t *src, const ts_shape *xs, int block)
{
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    unsigned need = block == 16 ? dnnl_cpu_isa_avx512_core : block == 8 ? dnnl_cpu_isa_avx2 : 0;
    if (!need || ((unsigned)isa & need) != need || xs->rank != 4) return false;
    dnnl_memory_desc_t md;
    return (md_tag(&md, xs, block == 16 ? dnnl_aBcd16b : dnnl_aBcd8b) && xd_md_same_bytes(src, &md)) ||
           (md_tag(&md, xs, dnnl_abcd) && dnnl_memory_desc_equal(src, &md));
}
