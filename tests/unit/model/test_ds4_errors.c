/* test_ds4_errors.c - bad deepseek4 files give a one-line error naming the
 * key or tensor, never a crash: a compress_ratios list shorter than the
 * blocks, an unsupported ratio, an indexer top_k larger than the compressed
 * rows the context can hold, top_k 0, a tid2eid table routing to an expert
 * that does not exist or stored as f32, a missing compressor / indexer
 * tensor of a compressed layer, a compressor positional bias of the wrong
 * shape, hash layers beyond the blocks, output groups that do not divide
 * the heads, a non-sqrt-softplus gating function, head_count_kv != 1.
 * Variants are a tiny mkmodel deepseek4 model rewritten with one edit. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/gguf.h"
#include "model/mkmodel.h"
#include "model/model.h"
#include "testutil.h"
#include "testutil_ds4.h"

typedef void (*edit_fn)(gguf_writer *w);
static char src_path[256];

/* Copies src_path with `edit` applied to the keys, tensor `skip` left out,
 * tensor `poke` given an out-of-range first id (tid2eid) or, for `refloat`,
 * stored as f32 of the same shape; loads it and expects `want` in the error. */
static void expect_error(const char *what, edit_fn edit, const char *skip, const char *poke, const char *refloat,
                         const char *want) {
    cf_err err = {0};
    gguf_file *src;
    char out[256];
    temp_path(out, sizeof out, "ds4-bad.gguf");
    if (gguf_open(src_path, &src, &err)) {
        CHECKF(0, "%s", err.msg);
        return;
    }
    gguf_writer *w = gguf_writer_create();
    int rc = gguf_writer_copy_kv(w, src, &err);
    for (int64_t i = 0; rc == 0 && i < gguf_tensor_count(src); i++) {
        const gguf_tensor *t = gguf_tensor_at(src, i);
        if (skip && !strcmp(t->name, skip)) continue;
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        if (poke && !strcmp(t->name, poke)) {
            int32_t *ids = malloc(t->nbytes);
            memcpy(ids, t->data, t->nbytes);
            ids[5] = 1000;
            rc = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne, ids, true, &err);
            free(ids);
        } else if (refloat && !strcmp(t->name, refloat)) {
            rc = gguf_writer_add_tensor(w, t->name, 0 /* f32 */, t->n_dims, ne, t->data, true, &err);
        } else if (skip && !strcmp(skip, "+ape") && strstr(t->name, "attn_compressor_ape")) {
            ne[1] = t->ne[1] / 2; /* half the rows of the group */
            ne[0] = t->ne[0] * 2;
            rc = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne, t->data, true, &err);
        } else {
            rc = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne, t->data, true, &err);
        }
    }
    if (rc == 0 && edit) edit(w);
    if (rc == 0) rc = gguf_writer_write(w, out, &err);
    gguf_writer_free(w);
    gguf_close(src);
    CHECKF(rc == 0, "%s: writing the variant: %s", what, err.msg);
    model *m = NULL;
    memset(&err, 0, sizeof err);
    rc = model_load(out, &m, &err);
    CHECKF(rc != 0 && m == NULL, "%s: loaded", what);
    CHECKF(strstr(err.msg, want) != NULL && !strchr(err.msg, '\n'), "%s: message '%s' lacks '%s'", what, err.msg, want);
    fprintf(stderr, "%-26s -> %s\n", what, err.msg);
    model_free(m);
    unlink(out);
}

static void short_ratios(gguf_writer *w) {
    const int32_t r[] = {4, 128};
    gguf_set_arr_i32(w, "deepseek4.attention.compress_ratios", r, 2);
}
static void ratio_8(gguf_writer *w) {
    const int32_t r[] = {4, 8, 0};
    gguf_set_arr_i32(w, "deepseek4.attention.compress_ratios", r, 3);
}
static void no_ratios(gguf_writer *w) { gguf_writer_remove_key(w, "deepseek4.attention.compress_ratios"); }
static void huge_topk(gguf_writer *w) { gguf_set_u32(w, "deepseek4.attention.indexer.top_k", 100000); }
static void zero_topk(gguf_writer *w) { gguf_set_u32(w, "deepseek4.attention.indexer.top_k", 0); }
static void many_hash(gguf_writer *w) { gguf_set_u32(w, "deepseek4.hash_layer_count", 7); }
static void bad_groups(gguf_writer *w) { gguf_set_u32(w, "deepseek4.attention.output_group_count", 3); }
static void softmax_gating(gguf_writer *w) { gguf_set_u32(w, "deepseek4.expert_gating_func", 1); }
static void two_kv_heads(gguf_writer *w) { gguf_set_u32(w, "deepseek4.attention.head_count_kv", 2); }
static void no_sinkhorn(gguf_writer *w) { gguf_writer_remove_key(w, "deepseek4.hyper_connection.sinkhorn_iterations"); }
static void short_clamp(gguf_writer *w) {
    const float c[] = {10.0f};
    gguf_set_arr_f32(w, "deepseek4.swiglu_clamp_exp", c, 1);
}

int main(void) {
    if (access(shared_path("models/stories260K.gguf"), R_OK)) return tu_missing_fixture("models/stories260K.gguf");
    mkmodel_opts o = tu_ds4_tiny(3, "4,128,0", 5);
    o.index_heads = 2;
    o.index_topk = 4;
    o.experts = 4;
    temp_path(src_path, sizeof src_path, "ds4-good.gguf");
    cf_err err = {0};
    CHECKF(mkmodel_write(&o, src_path, &err) == 0, "%s", err.msg);
    model *m = NULL;
    CHECKF(model_load(src_path, &m, &err) == 0, "the unedited model: %s", err.msg);
    model_free(m);
    expect_error("2 ratios for 3 blocks", short_ratios, NULL, NULL, NULL, "deepseek4.attention.compress_ratios");
    expect_error("ratio 8", ratio_8, NULL, NULL, NULL, "compress_ratios[1] = 8");
    expect_error("no ratios", no_ratios, NULL, NULL, NULL, "deepseek4.attention.compress_ratios");
    expect_error("top_k 100000", huge_topk, NULL, NULL, NULL, "deepseek4.attention.indexer.top_k");
    expect_error("top_k 0", zero_topk, NULL, NULL, NULL, "deepseek4.attention.indexer.top_k");
    expect_error("7 hash layers", many_hash, NULL, NULL, NULL, "deepseek4.hash_layer_count");
    expect_error("3 output groups", bad_groups, NULL, NULL, NULL, "deepseek4.attention.output_group_count");
    expect_error("softmax gating", softmax_gating, NULL, NULL, NULL, "deepseek4.expert_gating_func");
    expect_error("2 kv heads", two_kv_heads, NULL, NULL, NULL, "head_count");
    expect_error("no sinkhorn iterations", no_sinkhorn, NULL, NULL, NULL,
                 "deepseek4.hyper_connection.sinkhorn_iterations");
    expect_error("1 clamp for 3 blocks", short_clamp, NULL, NULL, NULL, "deepseek4.swiglu_clamp_exp");
    expect_error("tid2eid out of range", NULL, NULL, "blk.0.ffn_gate_tid2eid.weight", NULL,
                 "blk.0.ffn_gate_tid2eid.weight");
    expect_error("tid2eid as f32", NULL, NULL, NULL, "blk.0.ffn_gate_tid2eid.weight", "blk.0.ffn_gate_tid2eid.weight");
    expect_error("no compressor kv", NULL, "blk.1.attn_compressor_kv.weight", NULL, NULL,
                 "blk.1.attn_compressor_kv.weight");
    expect_error("no indexer compressor", NULL, "blk.0.indexer_compressor_gate.weight", NULL, NULL,
                 "blk.0.indexer_compressor_gate.weight");
    expect_error("no indexer q", NULL, "blk.0.indexer.attn_q_b.weight", NULL, NULL, "blk.0.indexer.attn_q_b.weight");
    expect_error("ape shape", NULL, "+ape", NULL, NULL, "attn_compressor_ape.weight");
    expect_error("no sinks", NULL, "blk.2.attn_sinks.weight", NULL, NULL, "blk.2.attn_sinks.weight");
    expect_error("no head hc", NULL, "output_hc_fn.weight", NULL, NULL, "output_hc_fn.weight");
    unlink(src_path);
    return test_finish();
}
