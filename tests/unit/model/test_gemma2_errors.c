/* test_gemma2_errors.c - gemma2 metadata: bad files give a one-line error
 * naming the key or tensor, never a crash (window 0, a per-layer pattern of
 * the wrong length, every layer a window layer, a zero soft-cap, a missing
 * post-norm, an output.weight gemma2 never has); a per-layer boolean pattern
 * equal to the default loads with the default layout. Variants are
 * tiny-gemma2 rewritten with one edit. Fixture missing: skip (fail under CI). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/gguf.h"
#include "model/model.h"
#include "testutil.h"

#define MODEL "models/tiny/tiny-gemma2.gguf"

typedef void (*edit_fn)(gguf_writer *w);

/* Writes the variant; loads it; want == NULL: must load (returned), else must fail naming want. */
static model *variant(const char *what, edit_fn edit, const char *skip, const char *dup_as, const char *want) {
    cf_err err = {0};
    gguf_file *src;
    char out[256];
    temp_path(out, sizeof out, "gemma2-bad.gguf");
    if (gguf_open(shared_path(MODEL), &src, &err)) {
        CHECKF(0, "%s", err.msg);
        return NULL;
    }
    gguf_writer *w = gguf_writer_create();
    int rc = gguf_writer_copy_kv(w, src, &err);
    for (int64_t i = 0; rc == 0 && i < gguf_tensor_count(src); i++) {
        const gguf_tensor *t = gguf_tensor_at(src, i);
        if (skip && !strcmp(t->name, skip)) continue;
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        rc = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne, t->data, true, &err);
        if (rc == 0 && dup_as && !strcmp(t->name, "token_embd.weight"))
            rc = gguf_writer_add_tensor(w, dup_as, t->type, t->n_dims, ne, t->data, true, &err);
    }
    if (rc == 0 && edit) edit(w);
    if (rc == 0) rc = gguf_writer_write(w, out, &err);
    gguf_writer_free(w);
    gguf_close(src);
    CHECKF(rc == 0, "%s: writing the variant: %s", what, err.msg);
    model *m = NULL;
    memset(&err, 0, sizeof err);
    rc = model_load(out, &m, &err);
    unlink(out);
    if (!want) {
        CHECKF(rc == 0, "%s: %s", what, err.msg);
        return m;
    }
    CHECKF(rc != 0 && m == NULL, "%s: loaded", what);
    CHECKF(strstr(err.msg, want) != NULL && !strchr(err.msg, '\n'), "%s: message '%s' lacks '%s'", what, err.msg, want);
    fprintf(stderr, "%-24s -> %s\n", what, err.msg);
    model_free(m);
    return NULL;
}

static void window0(gguf_writer *w) { gguf_set_u32(w, "gemma2.attention.sliding_window", 0); }
static void short_pattern(gguf_writer *w) {
    int32_t v[25] = {0};
    gguf_set_arr_i32(w, "gemma2.attention.sliding_window_pattern", v, 25);
}
static void all_window(gguf_writer *w) { gguf_set_u32(w, "gemma2.attention.sliding_window_pattern", 0); }
static void cap0(gguf_writer *w) { gguf_set_f32(w, "gemma2.attn_logit_softcapping", 0.0f); }
static void per_layer(gguf_writer *w) {
    int32_t v[26];
    for (int i = 0; i < 26; i++) v[i] = i % 2 == 0;
    gguf_set_arr_i32(w, "gemma2.attention.sliding_window_pattern", v, 26);
}
static void pattern3(gguf_writer *w) { gguf_set_u32(w, "gemma2.attention.sliding_window_pattern", 3); }

int main(void) {
    FILE *probe = fopen(shared_path(MODEL), "rb");
    if (!probe) return tu_missing_fixture(shared_path(MODEL));
    fclose(probe);
    variant("window 0", window0, NULL, NULL, "gemma2.attention.sliding_window");
    variant("pattern of 25 layers", short_pattern, NULL, NULL, "sliding_window_pattern");
    variant("only window layers", all_window, NULL, NULL, "sliding_window_pattern");
    variant("attention cap 0", cap0, NULL, NULL, "gemma2.attn_logit_softcapping");
    variant("missing post-FFN norm", NULL, "blk.3.post_ffw_norm.weight", NULL, "blk.3.post_ffw_norm.weight");
    variant("an output.weight", NULL, NULL, "output.weight", "output.weight");
    model *m = variant("per-layer pattern", per_layer, NULL, NULL, NULL);
    if (m) {
        kv_spec s;
        model_kv_layout(m, &s);
        CHECK(s.n_groups == 2 && s.groups[0].n_layers == 13 && s.groups[1].n_layers == 13);
        CHECK(s.groups[1].kind == KV_LAYER_WINDOW && s.groups[1].window == 32);
        model_free(m);
    }
    m = variant("pattern 3", pattern3, NULL, NULL, NULL); /* layers 0,1 window, 2 global, ... */
    if (m) {
        kv_spec s;
        model_kv_layout(m, &s);
        CHECK(s.n_groups == 2 && s.groups[0].n_layers == 8 && s.groups[1].n_layers == 18);
        model_free(m);
    }
    return test_finish();
}
