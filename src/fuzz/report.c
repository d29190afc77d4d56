/* The fuzzer's folders (docs/fuzz.md): DIR/pairs/NNN holds a saved pair
 * (original.onnx, variant.onnx); DIR/findings/NNN holds everything needed
 * to see a finding again without the fuzzer's state -- the (minimized)
 * pair, its inputs as .npy, README.md with what was seen and the commands
 * that reproduce it, finding.json for scripts -- and replay reads such a
 * folder back and checks it on a target. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "fuzz/fuzz.h"
#include "ops/list.h"
#include "ops/op.h"

static ts_status make_dir(const char *path, ts_error *err)
{
    if (!mkdir(path, 0777) || errno == EEXIST) return TS_OK;
    return ts_error_set(err, TS_ERR_IO, "cannot create folder '%s': %s", path, strerror(errno));
}

static ts_status save_model(const char *dir, const char *name, const ts_graph *g, ts_error *err)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ts_onnx_save_opts so = {.static_dims = true};
    return ts_onnx_save_with(g, path, &so, err);
}

static ts_status save_inputs(const char *dir, const ts_graph *g, const ts_tensor *const *in, ts_error *err)
{
    char sub[1100], path[1500], stem[300];
    snprintf(sub, sizeof sub, "%s/inputs", dir);
    if (make_dir(sub, err)) return err->code;
    for (int i = 0; i < g->ninputs; i++) {
        ts_name_sanitize(g->values[g->inputs[i]].name, stem, sizeof stem);
        snprintf(path, sizeof path, "%s/%s.npy", sub, stem);
        if (ts_npy_save(path, in[i], err)) return err->code;
    }
    return TS_OK;
}

ts_status ts_fuzz_save_pair(const char *dir, long k, const ts_fuzz_pair *p, ts_error *err)
{
    char sub[1024];
    snprintf(sub, sizeof sub, "%s/pairs", dir);
    if (make_dir(sub, err)) return err->code;
    snprintf(sub, sizeof sub, "%s/pairs/%03ld", dir, k);
    if (make_dir(sub, err) || save_model(sub, "original.onnx", p->original, err) ||
        save_model(sub, "variant.onnx", p->variant, err))
        return err->code;
    return TS_OK;
}

/* s as a JSON string body (quotes and control characters escaped). */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static const char *target_name(const ts_fuzz_opts *o)
{
    return o->target.kind == TS_FUZZ_TARGET_ORT ? "ort" : "tsopt";
}

static const char *wrong_text(const char *w)
{
    if (!strcmp(w, "variant")) return "the variant's outputs are wrong (the original's match the float64 reference "
                                       "interpreter)";
    if (!strcmp(w, "original")) return "the original's outputs are wrong (the variant's match the float64 reference "
                                        "interpreter)";
    if (!strcmp(w, "both")) return "both differ from the float64 reference interpreter";
    if (!strcmp(w, "neither")) return "both match the float64 reference interpreter within the tolerance "
                                       "(a borderline numerical difference)";
    if (!strcmp(w, "optimized")) return "the runtime's outputs of the optimizer's result are wrong (that graph "
                                         "matches the original in the float64 reference interpreter)";
    if (!strcmp(w, "rewrite")) return "the optimizer's result computes something else than the variant in the "
                                       "float64 reference interpreter: a wrong rewrite of the optimizer";
    if (!strcmp(w, "pair")) return "the two graphs already differ in the float64 reference interpreter: the pair "
                                    "is not equivalent, so a rewrite rule is wrong (not the target)";
    return "";
}

static void readme_reproduce(FILE *f, const ts_fuzz_finding *x, const ts_fuzz_verdict *v, const char *plant)
{
    const ts_fuzz_opts *o = x->opts;
    fprintf(f, "## Reproduce\n\nIn this folder:\n\n```\n");
    if (plant)
        fprintf(f, "# a planted bug (tests only): the runtime itself is fine, the fuzzer's target plants it\n"
                   "TSOPT_FUZZ_PLANT=%s tsopt fuzz --replay . --target %s\n```\n\n",
                plant, target_name(o));
    else
        fprintf(f, "tsopt fuzz --replay . --target %s      # exit 1 while the finding holds\n```\n\n",
                target_name(o));
    if (plant) return;
    fprintf(f, "or by hand (the comparison of `tsopt compare` is numpy's allclose, close to the fuzzer's):\n\n```\n");
    if (!strcmp(v->stage, "ort")) {
        fprintf(f, "node $TSOPT_SRC/tools/ort/run.js original.onnx --inputs inputs --save-outputs out-original\n"
                   "node $TSOPT_SRC/tools/ort/run.js variant.onnx --inputs inputs --save-outputs out-variant\n");
    } else if (!strcmp(v->stage, "optimizer")) {
        fprintf(f,
                "tsopt optimize variant.onnx -o optimized.onnx --time-limit 0 --budget %d --cost-model roofline \\\n"
                "    --no-timing --min-gain 0 --seed %llu\n"
                "tsopt run original.onnx --inputs inputs --save-outputs out-original\n"
                "tsopt run optimized.onnx --inputs inputs --save-outputs out-variant\n",
                o->target.opt_budget > 0 ? o->target.opt_budget : 2, (unsigned long long)(x->pair_seed & 0x7fffffff));
    } else {
        fprintf(f, "tsopt run original.onnx --inputs inputs --save-outputs out-original\n"
                   "tsopt run variant.onnx --inputs inputs --save-outputs out-variant\n");
    }
    fprintf(f, "tsopt compare out-original out-variant --rtol %g --atol %g\n```\n\n", o->target.tol.rtol,
            o->target.tol.atol);
}

static ts_status write_readme(const char *dir, const ts_fuzz_finding *x, ts_error *err)
{
    const ts_fuzz_opts *o = x->opts;
    const ts_fuzz_verdict *v = x->reduced ? &x->reduced->verdict : x->verdict_full;
    const ts_fuzz_pair *p = x->reduced ? &x->reduced->pair : x->pair_full;
    const char *plant = o->target.plant && *o->target.plant ? o->target.plant : NULL;
    char path[1200], tmp[1300];
    snprintf(path, sizeof path, "%s/README.md", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return ts_error_set(err, TS_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    fprintf(f, "# Finding %03ld: %s %s (target %s)\n\n", x->index, v->stage, ts_fuzz_kind_name(v->kind),
            target_name(o));
    fprintf(f, "Pair %ld of `%s` (campaign seed %llu, pair seed 0x%016llx).\n\n", x->pair,
            o->command ? o->command : "tsopt fuzz", (unsigned long long)o->seed, (unsigned long long)x->pair_seed);
    fprintf(f, "- `original.onnx`: the most simplified graph of the pair (%d nodes)\n", ts_fuzz_count_nodes(p->original));
    if (p->variant->noutputs > p->nroots)
        fprintf(f, "- `variant.onnx`: the most complex equivalent graph (%d nodes); its first %d output%s the "
                   "original's, the %d after them expose intermediate tensors\n",
                ts_fuzz_count_nodes(p->variant), p->nroots, p->nroots > 1 ? "s are" : " is",
                p->variant->noutputs - p->nroots);
    else
        fprintf(f, "- `variant.onnx`: the most complex equivalent graph (%d nodes)\n", ts_fuzz_count_nodes(p->variant));
    fprintf(f, "- `inputs/`: the inputs both were run on (.npy)\n");
    if (x->reduced)
        fprintf(f, "- `unminimized/`: the pair as found (%d and %d nodes), with its inputs; minimized by delta "
                   "debugging on the seed graph in %d trials\n",
                ts_fuzz_count_nodes(x->pair_full->original), ts_fuzz_count_nodes(x->pair_full->variant),
                x->reduced->trials);
    if (plant) fprintf(f, "- found with the planted bug `%s` (TSOPT_FUZZ_PLANT): a test of the fuzzer\n", plant);
    fprintf(f, "\n## Seen\n\n%s at stage `%s`: %s\n\n", ts_fuzz_kind_name(v->kind), v->stage, v->what);
    if (v->kind == TS_FUZZ_MISMATCH && v->output >= 0 && v->diff.at >= 0)
        fprintf(f, "Max difference: %.6g (output %d, element %lld: original %.6g, variant %.6g), %.3g times the "
                   "tolerance |a-b| <= %g + %g * max(|a|, |b|, %.4g).\n\n",
                v->diff.abs, v->output, (long long)v->diff.at, v->diff.a, v->diff.b, v->diff.scaled,
                o->target.tol.atol, o->target.tol.rtol, v->diff.scale);
    if (v->wrong[0] && strcmp(v->wrong, "unknown")) fprintf(f, "Which side: %s.\n\n", wrong_text(v->wrong));
    if (x->reduced && strcmp(x->verdict_full->what, v->what))
        fprintf(f, "As found (unminimized): %s\n\n", x->verdict_full->what);
    readme_reproduce(f, x, v, plant);
    bool bad = ferror(f);
    if (fclose(f) || bad || rename(tmp, path)) {
        remove(tmp);
        return ts_error_set(err, TS_ERR_IO, "cannot write '%s'", path);
    }
    return TS_OK;
}

static ts_status write_json(const char *dir, const ts_fuzz_finding *x, ts_error *err)
{
    const ts_fuzz_verdict *v = x->reduced ? &x->reduced->verdict : x->verdict_full;
    const ts_fuzz_pair *p = x->reduced ? &x->reduced->pair : x->pair_full;
    char path[1200];
    snprintf(path, sizeof path, "%s/finding.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return ts_error_set(err, TS_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    fprintf(f, "{\"index\": %ld, \"pair\": %ld, \"pair_seed\": %llu, \"seed\": %llu, \"target\": \"%s\", ", x->index,
            x->pair, (unsigned long long)x->pair_seed, (unsigned long long)x->opts->seed, target_name(x->opts));
    fprintf(f, "\"kind\": \"%s\", \"stage\": \"%s\", \"wrong\": \"%s\", \"output\": %d, ", ts_fuzz_kind_name(v->kind),
            v->stage, v->wrong, v->output);
    fprintf(f, "\"max_abs_diff\": %.9g, \"scaled\": %.9g, ", v->kind == TS_FUZZ_MISMATCH ? v->diff.abs : 0.0,
            v->kind == TS_FUZZ_MISMATCH && v->diff.scaled < 1e300 ? v->diff.scaled : 0.0);
    fprintf(f, "\"original_nodes\": %d, \"variant_nodes\": %d, \"found_original_nodes\": %d, "
               "\"found_variant_nodes\": %d, \"minimized\": %s, \"trials\": %d, \"plant\": ",
            ts_fuzz_count_nodes(p->original), ts_fuzz_count_nodes(p->variant),
            ts_fuzz_count_nodes(x->pair_full->original), ts_fuzz_count_nodes(x->pair_full->variant),
            x->reduced ? "true" : "false", x->reduced ? x->reduced->trials : 0);
    json_str(f, x->opts->target.plant ? x->opts->target.plant : "");
    fprintf(f, ", \"what\": ");
    json_str(f, v->what);
    fprintf(f, "}\n");
    bool bad = ferror(f);
    if (fclose(f) || bad) return ts_error_set(err, TS_ERR_IO, "cannot write '%s'", path);
    return TS_OK;
}

ts_status ts_fuzz_write_finding(const char *dir, const ts_fuzz_finding *x, ts_error *err)
{
    char sub[1024], un[1100];
    snprintf(sub, sizeof sub, "%s/findings", dir);
    if (make_dir(sub, err)) return err->code;
    snprintf(sub, sizeof sub, "%s/findings/%03ld", dir, x->index);
    if (make_dir(sub, err)) return err->code;
    const ts_fuzz_pair *p = x->reduced ? &x->reduced->pair : x->pair_full;
    const ts_tensor *const *in = x->reduced ? (const ts_tensor *const *)x->reduced->inputs : x->inputs_full;
    if (save_model(sub, "original.onnx", p->original, err) || save_model(sub, "variant.onnx", p->variant, err) ||
        save_inputs(sub, p->original, in, err))
        return err->code;
    if (x->reduced) {
        snprintf(un, sizeof un, "%s/unminimized", sub);
        if (make_dir(un, err) || save_model(un, "original.onnx", x->pair_full->original, err) ||
            save_model(un, "variant.onnx", x->pair_full->variant, err) ||
            save_inputs(un, x->pair_full->original, x->inputs_full, err))
            return err->code;
    }
    if (write_json(sub, x, err) || write_readme(sub, x, err)) return err->code;
    return TS_OK;
}

/* ------------------------------------------------------ graph findings */

static const char *oracle_text(const char *o)
{
    if (!strcmp(o, "reference"))
        return "the fast runtime's outputs against the float64 reference interpreter (src/ir/interp.c) on the "
               "same graph and inputs";
    if (!strcmp(o, "optimizer"))
        return "the fast runtime on the optimizer's result against the fast runtime on the graph it was given";
    if (!strcmp(o, "crash")) return "the fast runtime crashed (a signal caught while its plan was built or run)";
    return "the original against its variant on the target";
}

/* The operators of g, "Concat x1, Relu x2", into out. */
static void op_list(const ts_graph *g, char *out, size_t n)
{
    const char *seen[64];
    int cnt[64], ns = 0;
    for (int i = 0; i < g->nnodes; i++) {
        if (g->nodes[i].dead) continue;
        int k = 0;
        while (k < ns && strcmp(seen[k], g->nodes[i].op->name)) k++;
        if (k == ns && ns < 64) seen[ns] = g->nodes[i].op->name, cnt[ns++] = 0;
        if (k < ns) cnt[k]++;
    }
    size_t len = 0;
    out[0] = 0;
    for (int k = 0; k < ns && len < n; k++)
        len += (size_t)snprintf(out + len, n - len, "%s%s x%d", k ? ", " : "", seen[k], cnt[k]);
}

ts_status ts_fuzz_write_graph_finding(const char *dir, long index, long step, uint64_t seed, const char *family,
                                      const ts_fuzz_opts *o, const ts_graph *full, const ts_graph *red,
                                      ts_tensor *const *in, const ts_fuzz_verdict *v, ts_error *err)
{
    char sub[1024], un[1100], path[1200];
    snprintf(sub, sizeof sub, "%s/findings", dir);
    if (make_dir(sub, err)) return err->code;
    snprintf(sub, sizeof sub, "%s/findings/%03ld", dir, index);
    snprintf(un, sizeof un, "%s/unminimized", sub);
    if (make_dir(sub, err) || save_model(sub, "model.onnx", red, err) ||
        save_inputs(sub, red, (const ts_tensor *const *)in, err) || make_dir(un, err) ||
        save_model(un, "model.onnx", full, err))
        return err->code;
    const ts_value *out = v->output >= 0 && v->output < red->noutputs ? &red->values[red->outputs[v->output]] : NULL;
    const char *op = out && out->producer >= 0 ? red->nodes[out->producer].op->name : "?";
    for (int n = red->nnodes - 1; !out && n >= 0; n--) /* a crash: the graph's last operator */
        if (!red->nodes[n].dead && red->nodes[n].op != &ts_op_cast) {
            op = red->nodes[n].op->name;
            break;
        }
    char ops[512];
    op_list(red, ops, sizeof ops);
    snprintf(path, sizeof path, "%s/README.md", sub);
    FILE *f = fopen(path, "w");
    if (!f) return ts_error_set(err, TS_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    fprintf(f, "# Finding %03ld: %s, oracle `%s` (operator %s)\n\n", index, ts_fuzz_kind_name(v->kind), v->oracle, op);
    fprintf(f, "Runtime seed graph of step %ld of `%s` (campaign seed %llu, graph seed 0x%016llx, family %s).\n\n",
            step, o->command ? o->command : "tsopt fuzz", (unsigned long long)o->seed, (unsigned long long)seed,
            family);
    fprintf(f, "- Operator: **%s** (the output that differs is its result); the graph: %s\n", op, ops);
    fprintf(f, "- Oracle: **%s** -- %s\n", v->oracle, oracle_text(v->oracle));
    fprintf(f, "- `model.onnx`: minimized (%d nodes); `unminimized/model.onnx`: as found (%d nodes)\n",
            ts_fuzz_count_nodes(red), ts_fuzz_count_nodes(full));
    fprintf(f, "- `inputs/`: the inputs (.npy)\n");
    if (o->target.plant && *o->target.plant)
        fprintf(f, "- found with the planted bug `%s` (TSOPT_FUZZ_PLANT): a test of the fuzzer\n", o->target.plant);
    fprintf(f, "\n## Seen\n\n%s at stage `%s`: %s\n\n", ts_fuzz_kind_name(v->kind), v->stage, v->what);
    if (v->wrong[0]) fprintf(f, "Which side: %s.\n\n", !strcmp(v->wrong, "runtime") ? "the fast runtime (the reference "
                                                        "interpreter computes the graph's definition)" : wrong_text(v->wrong));
    fprintf(f, "## Reproduce\n\nIn this folder:\n\n```\ntsopt fuzz --replay . --target tsopt      # exit 1 while the "
               "finding holds\n");
    if (!strcmp(v->oracle, "reference"))
        fprintf(f, "tsopt run model.onnx --inputs inputs --save-outputs out-fast\n"
                   "tsopt run model.onnx --inputs inputs --save-outputs out-ref --reference\n"
                   "tsopt compare out-ref out-fast --rtol %g --atol %g\n",
                o->target.tol.rtol, o->target.tol.atol);
    fprintf(f, "```\n");
    bool bad = ferror(f);
    if (fclose(f) || bad) return ts_error_set(err, TS_ERR_IO, "cannot write '%s'", path);
    snprintf(path, sizeof path, "%s/finding.json", sub);
    if (!(f = fopen(path, "w"))) return ts_error_set(err, TS_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    fprintf(f, "{\"index\": %ld, \"step\": %ld, \"pair_seed\": %llu, \"seed\": %llu, \"target\": \"tsopt\", "
               "\"kind\": \"%s\", \"stage\": \"%s\", \"oracle\": \"%s\", \"operator\": \"%s\", \"family\": \"%s\", "
               "\"wrong\": \"%s\", \"output\": %d, \"nodes\": %d, \"found_nodes\": %d, \"what\": ",
            index, step, (unsigned long long)seed, (unsigned long long)o->seed, ts_fuzz_kind_name(v->kind), v->stage,
            v->oracle, op, family, v->wrong, v->output, ts_fuzz_count_nodes(red), ts_fuzz_count_nodes(full));
    json_str(f, v->what);
    fprintf(f, "}\n");
    bad = ferror(f);
    if (fclose(f) || bad) return ts_error_set(err, TS_ERR_IO, "cannot write '%s'", path);
    return TS_OK;
}

/* --------------------------------------------------------------- replay */

/* pair_seed from FOLDER/finding.json, 0 when absent. */
static uint64_t read_pair_seed(const char *folder)
{
    char path[1200], buf[4096];
    snprintf(path, sizeof path, "%s/finding.json", folder);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *k = strstr(buf, "\"pair_seed\":");
    return k ? strtoull(k + 12, NULL, 10) : 0;
}

ts_status ts_fuzz_replay(ts_fuzz_target *t, const char *folder, ts_fuzz_verdict *v, ts_error *err)
{
    char po[1200], pv[1200], dir_in[1200], path[1600], stem[300];
    struct stat sb;
    snprintf(po, sizeof po, "%s/model.onnx", folder);
    bool single = !stat(po, &sb); /* a runtime seed graph's finding */
    if (!single) snprintf(po, sizeof po, "%s/original.onnx", folder);
    snprintf(pv, sizeof pv, "%s/%s.onnx", folder, single ? "model" : "variant");
    snprintf(dir_in, sizeof dir_in, "%s/inputs", folder);
    ts_graph *go = NULL, *gv = NULL;
    ts_tensor **in = NULL;
    ts_status st = ts_onnx_load(po, NULL, 0, &go, err);
    if (!st) st = ts_onnx_load(pv, NULL, 0, &gv, err);
    uint64_t seed = read_pair_seed(folder);
    if (!st && !(in = calloc((size_t)go->ninputs + 1, sizeof *in))) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    if (!st && stat(dir_in, &sb)) {
        st = ts_fuzz_inputs(go, seed, in, err); /* a saved pair: the fuzzer's inputs */
    } else {
        for (int i = 0; !st && i < go->ninputs; i++) {
            const ts_value *val = &go->values[go->inputs[i]];
            ts_name_sanitize(val->name, stem, sizeof stem);
            snprintf(path, sizeof path, "%s/%s.npy", dir_in, stem);
            if ((st = ts_npy_load(path, &in[i], err))) break;
            if (in[i]->dtype != val->dtype || !ts_shape_eq(&in[i]->shape, &val->shape))
                st = ts_error_set(err, TS_ERR_INVALID, "input '%s' in %s has another dtype or shape than the model's",
                                  val->name, path);
        }
    }
    if (!st && gv->noutputs < go->noutputs)
        st = ts_error_set(err, TS_ERR_INVALID, "%s has fewer outputs (%d) than %s (%d)", pv, gv->noutputs, po,
                          go->noutputs);
    /* ORT gets the files themselves: loading them folds what the fuzzer
     * wrote (weight-only subgraphs), and ORT may fail on exactly that */
    ts_fuzz_target_set_files(t, po, pv);
    if (!st && single) st = ts_fuzz_target_check_graph(t, go, in, seed, v, err);
    else if (!st) st = ts_fuzz_target_check(t, go, gv, go->noutputs, in, seed, v, err);
    ts_fuzz_target_set_files(t, NULL, NULL);
    for (int i = 0; in && i < go->ninputs; i++) ts_tensor_unref(in[i]);
    free(in);
    ts_graph_free(go);
    ts_graph_free(gv);
    return st;
}
