/* test_deepseek_errors.c - bad deepseek2 files give a one-line error naming
 * the key or tensor, never a crash: missing kv_lora_rank, expert_used_count
 * above expert_count, groups that do not divide the experts, an unknown
 * gating function, a missing expert stack, an expert stack of the wrong
 * shape, key_length not above the rope dims, every block a next-n layer. Variants are tiny-deepseek2
 * rewritten with one edit. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/gguf.h"
#include "model/model.h"
#include "testutil.h"

typedef void (*edit_fn)(gguf_writer *w);

static void expect_error(const char *what, edit_fn edit, const char *skip, const char *reshape, const char *want) {
    cf_err err = {0};
    gguf_file *src;
    char out[256];
    temp_path(out, sizeof out, "ds2-bad.gguf");
    if (gguf_open(shared_path("models/tiny/tiny-deepseek2.gguf"), &src, &err)) {
        CHECKF(0, "%s", err.msg);
        return;
    }
    gguf_writer *w = gguf_writer_create();
    int rc = gguf_writer_copy_kv(w, src, &err);
    for (int64_t i = 0; rc == 0 && i < gguf_tensor_count(src); i++) {
        const gguf_tensor *t = gguf_tensor_at(src, i);
        if (skip && !strcmp(t->name, skip)) continue;
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        if (reshape && !strcmp(t->name, reshape)) { /* same bytes, experts x rows swapped */
            ne[1] = t->ne[2];
            ne[2] = t->ne[1];
        }
        rc = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne, t->data, true, &err);
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
    fprintf(stderr, "%-22s -> %s\n", what, err.msg);
    model_free(m);
    unlink(out);
}

static void no_kv_lora(gguf_writer *w) { gguf_writer_remove_key(w, "deepseek2.attention.kv_lora_rank"); }
static void too_many_used(gguf_writer *w) { gguf_set_u32(w, "deepseek2.expert_used_count", 9); }
static void bad_groups(gguf_writer *w) {
    gguf_set_u32(w, "deepseek2.expert_group_count", 3);
    gguf_set_u32(w, "deepseek2.expert_group_used_count", 1);
}
static void bad_gating(gguf_writer *w) { gguf_set_u32(w, "deepseek2.expert_gating_func", 7); }
static void short_key(gguf_writer *w) { gguf_set_u32(w, "deepseek2.attention.key_length", 16); }
static void all_nextn(gguf_writer *w) { gguf_set_u32(w, "deepseek2.nextn_predict_layers", 4); }

int main(void) {
    expect_error("no kv_lora_rank", no_kv_lora, NULL, NULL, "deepseek2.attention.kv_lora_rank");
    expect_error("9 of 8 experts", too_many_used, NULL, NULL, "expert_used_count");
    expect_error("3 groups of 8", bad_groups, NULL, NULL, "expert_group_count");
    expect_error("gating func 7", bad_gating, NULL, NULL, "expert_gating_func");
    expect_error("key_length 16", short_key, NULL, NULL, "key_length");
    expect_error("4 next-n of 4 layers", all_nextn, NULL, NULL, "nextn_predict_layers");
    expect_error("missing expert stack", NULL, "blk.2.ffn_up_exps.weight", NULL, "blk.2.ffn_up_exps.weight");
    expect_error("expert stack shape", NULL, NULL, "blk.1.ffn_down_exps.weight", "blk.1.ffn_down_exps.weight");
    return test_finish();
}
