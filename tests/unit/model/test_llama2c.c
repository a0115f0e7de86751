/* test_llama2c.c - the llama2.c importer against llama.cpp's own conversion:
 * converting stories260K.bin + tok512.bin must give every tensor of
 * stories260K.gguf byte for byte (same names, types, shapes) and the same
 * vocab (tokens, scores, types) and hyperparameters; llama.context_length is
 * the checkpoint's seq_len (llama.cpp's converter writes its --ctx default,
 * 128, instead). Malformed inputs fail with one-line messages naming the file. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "model/llama2c.h"
#include "testutil.h"

static void compare_with_reference(const char *out) {
    gguf_file *a, *b;
    cf_err err;
    if (gguf_open(out, &a, &err) != 0) {
        CHECKF(0, "%s", err.msg);
        return;
    }
    if (gguf_open(shared_path("models/stories260K.gguf"), &b, &err) != 0) {
        CHECKF(0, "%s", err.msg);
        gguf_close(a);
        return;
    }
    CHECK(gguf_tensor_count(a) == gguf_tensor_count(b));
    for (int64_t i = 0; i < gguf_tensor_count(b); i++) {
        const gguf_tensor *tb = gguf_tensor_at(b, i), *ta = gguf_tensor_at(a, i);
        CHECKF(ta && !strcmp(ta->name, tb->name) && ta->type == tb->type && ta->n_dims == tb->n_dims &&
                   !memcmp(ta->ne, tb->ne, sizeof ta->ne) && ta->nbytes == tb->nbytes &&
                   !memcmp(ta->data, tb->data, tb->nbytes),
               "tensor %s differs", tb->name);
    }
    CHECK(gguf_kv_count(a) == gguf_kv_count(b));
    for (int64_t i = 0; i < gguf_kv_count(b); i++) {
        const char *k = gguf_key_name(b, i);
        int64_t j = gguf_find_key(a, k);
        CHECKF(j >= 0 && gguf_kv_type(a, j) == gguf_kv_type(b, i), "key %s missing or retyped", k);
        if (j < 0 || !strcmp(k, "llama.context_length")) continue;
        int64_t va, vb;
        double da, db;
        gguf_str sa, sb;
        if (gguf_get_int(b, k, &vb, &err) == 0) CHECKF(gguf_get_int(a, k, &va, &err) == 0 && va == vb, "%s", k);
        if (gguf_get_float(b, k, &db, &err) == 0 && gguf_kv_type(b, i) == GGUF_FLOAT32)
            CHECKF(gguf_get_float(a, k, &da, &err) == 0 && da == db, "%s", k);
        if (gguf_get_str(b, k, &sb, &err) == 0)
            CHECKF(gguf_get_str(a, k, &sa, &err) == 0 && sa.len == sb.len && !memcmp(sa.s, sb.s, sb.len), "%s", k);
    }
    int64_t ctx;
    CHECK(gguf_get_int(a, "llama.context_length", &ctx, &err) == 0 && ctx == 512);
    const gguf_str *ta, *tb;
    uint64_t na, nb;
    CHECK(gguf_get_arr_str(a, "tokenizer.ggml.tokens", &ta, &na, &err) == 0);
    CHECK(gguf_get_arr_str(b, "tokenizer.ggml.tokens", &tb, &nb, &err) == 0);
    int tok_diff = 0;
    for (uint64_t i = 0; na == nb && i < nb; i++)
        if (ta[i].len != tb[i].len || memcmp(ta[i].s, tb[i].s, tb[i].len)) {
            if (tok_diff++ < 5) fprintf(stderr, "token %d: '%s' vs '%s'\n", (int)i, ta[i].s, tb[i].s);
        }
    CHECK(na == 512 && na == nb && tok_diff == 0);
    float *sa, *sb;
    if (gguf_get_arr_f32(a, "tokenizer.ggml.scores", &sa, &na, &err) == 0 &&
        gguf_get_arr_f32(b, "tokenizer.ggml.scores", &sb, &nb, &err) == 0) {
        CHECK(na == nb && !memcmp(sa, sb, nb * sizeof *sa));
        free(sa);
        free(sb);
    } else {
        CHECKF(0, "scores: %s", err.msg);
    }
    int64_t *ya, *yb;
    if (gguf_get_arr_i64(a, "tokenizer.ggml.token_type", &ya, &na, &err) == 0 &&
        gguf_get_arr_i64(b, "tokenizer.ggml.token_type", &yb, &nb, &err) == 0) {
        CHECK(na == nb && !memcmp(ya, yb, nb * sizeof *ya));
        free(ya);
        free(yb);
    } else {
        CHECKF(0, "types: %s", err.msg);
    }
    gguf_close(a);
    gguf_close(b);
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(p, 1, n, f);
    fclose(f);
}

static void expect_fail(const char *model, const char *tok, const char *want_in_msg) {
    char out[256];
    temp_path(out, sizeof out, "bad-out.gguf");
    cf_err err;
    err.msg[0] = 0;
    CHECKF(llama2c_convert(model, tok, out, &err) == -1 && strstr(err.msg, want_in_msg) && !strchr(err.msg, '\n'),
           "expected failure mentioning '%s', got '%s'", want_in_msg, err.msg);
    FILE *f = fopen(out, "rb");
    CHECK(f == NULL);
    if (f) fclose(f);
}

static void test_bad_inputs(void) {
    const char *model = shared_path("models/stories260K.bin"), *tok = shared_path("models/tok512.bin");
    size_t mn, tn;
    char *m = read_file(model, &mn), *t = read_file(tok, &tn);
    if (!m || !t) {
        CHECK(0);
        free(m);
        free(t);
        return;
    }
    char bm[256], bt[256];
    temp_path(bm, sizeof bm, "bad.bin");
    temp_path(bt, sizeof bt, "badtok.bin");
    write_bytes(bm, m, mn - 4);
    expect_fail(bm, tok, bm);
    write_bytes(bm, m, 20);
    expect_fail(bm, tok, "too small");
    int32_t cfg[7];
    memcpy(cfg, m, sizeof cfg);
    int32_t bad[7] = {64, 172, 5, 7, 4, 512, 512}; /* heads do not divide dim */
    memcpy(m, bad, sizeof bad);
    write_bytes(bm, m, mn);
    expect_fail(bm, tok, "n_heads");
    bad[3] = -1;
    memcpy(m, bad, sizeof bad);
    write_bytes(bm, m, mn);
    expect_fail(bm, tok, "implausible");
    memcpy(m, cfg, sizeof cfg);
    ((int32_t *)m)[5] = -512; /* claims an unshared classifier: file too short */
    write_bytes(bm, m, mn);
    expect_fail(bm, tok, "does not match");
    write_bytes(bt, t, tn - 3);
    expect_fail(model, bt, bt);
    write_bytes(bt, t, tn + 1);
    expect_fail(model, bt, "after the");
    memcpy(t + 4 + 4, &(int32_t){-5}, 4);
    write_bytes(bt, t, tn);
    expect_fail(model, bt, "bad length");
    expect_fail("/nonexistent.bin", tok, "/nonexistent.bin");
    remove(bm);
    remove(bt);
    free(m);
    free(t);
}

int main(void) {
    char out[256];
    temp_path(out, sizeof out, "stories260K.gguf");
    cf_err err;
    int rc = llama2c_convert(shared_path("models/stories260K.bin"), shared_path("models/tok512.bin"), out, &err);
    CHECKF(rc == 0, "%s", err.msg);
    if (rc == 0) compare_with_reference(out);
    remove(out);
    test_bad_inputs();
    return test_finish();
}
