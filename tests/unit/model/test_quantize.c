/* test_quantize.c - gguf_quantize() and mkmodel_write().
 *
 * quantize: stories260K.gguf re-encoded to each target keeps every key,
 * sets general.file_type, converts exactly the 2-D *.weight tensors whose
 * ne[0] is a multiple of the block size (each row equal to
 * dtype_quantize_row of the source row), and leaves the rest F32-exact.
 * mkmodel: shapes, keys, tokenizer copied, weight statistics, determinism
 * (same seed = same bytes; the q8_0 model is the f32 model quantized), --tied,
 * and one-line errors for bad shapes/inputs.
 * mix: quantize_tensor_type follows llama.cpp's llama_tensor_get_type for the
 * Q4_K_M / Q5_K_M / IQ4_XS mixes on a 16-layer GQA-8 tensor set (the layers
 * below are what llama.cpp's use_more_bits picks for 16 layers). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "model/mkmodel.h"
#include "model/quantize.h"
#include "testutil.h"

static void check_quantized(const gguf_file *src, const gguf_file *q, dtype target) {
    CHECK(gguf_kv_count(q) == gguf_kv_count(src) + 1);
    for (int64_t i = 0; i < gguf_kv_count(src); i++)
        CHECKF(gguf_find_key(q, gguf_key_name(src, i)) >= 0, "key %s", gguf_key_name(src, i));
    int64_t ft;
    cf_err err;
    CHECK(gguf_get_int(q, "general.file_type", &ft, &err) == 0 && ft == quantize_file_type(target));
    CHECK(gguf_tensor_count(q) == gguf_tensor_count(src));
    int n_target = 0;
    for (int64_t i = 0; i < gguf_tensor_count(src); i++) {
        const gguf_tensor *s = gguf_tensor_at(src, i), *t = gguf_tensor_at(q, i);
        if (!t || strcmp(s->name, t->name) || memcmp(s->ne, t->ne, sizeof s->ne)) {
            CHECKF(0, "tensor %s missing or reshaped", s->name);
            continue;
        }
        bool convert = s->n_dims >= 2 && s->ne[0] % dtype_block_elems(target) == 0;
        CHECKF(t->type == (convert ? (uint32_t)target : DT_F32), "%s type %s", t->name, dtype_name(t->type));
        n_target += t->type == (uint32_t)target;
        size_t in_row = dtype_row_bytes(s->type, s->ne[0]), out_row = dtype_row_bytes(t->type, t->ne[0]);
        void *expect = malloc(out_row);
        int bad = 0;
        for (size_t r = 0; r < s->nbytes / in_row; r++) {
            /* the source is F32 here */
            dtype_quantize_row((dtype)t->type, (const float *)((const char *)s->data + r * in_row), expect, s->ne[0]);
            bad += memcmp(expect, (const char *)t->data + r * out_row, out_row) != 0;
        }
        CHECKF(bad == 0, "%s: %d rows differ", t->name, bad);
        free(expect);
    }
    /* stories260K: 1 + 1 + 5*6 matrices of width 64 (ffn_down has width 172) */
    CHECKF(n_target == (target == DT_F32                        ? 48
                        : target == DT_F16 || target == DT_BF16 ? 2 + 5 * 7
                                                                : 2 + 5 * 6),
           "%d tensors converted to %s", n_target, dtype_name(target));
}

static void test_quantize(void) {
    const char *in = shared_path("models/stories260K.gguf");
    gguf_file *src;
    cf_err err;
    if (gguf_open(in, &src, &err)) {
        CHECKF(0, "%s", err.msg);
        return;
    }
    dtype targets[] = {DT_Q8_0, DT_Q4_0, DT_BF16, DT_F16, DT_F32};
    char out[256];
    temp_path(out, sizeof out, "quant.gguf");
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        int rc = gguf_quantize(in, out, targets[i], &err);
        CHECKF(rc == 0, "%s: %s", dtype_name(targets[i]), err.msg);
        gguf_file *q;
        if (rc == 0 && gguf_open(out, &q, &err) == 0) {
            check_quantized(src, q, targets[i]);
            gguf_close(q);
        }
    }
    /* quantizing a quantized file decodes it first: q8_0 -> f32 gives the dequantized values */
    char out2[256];
    temp_path(out2, sizeof out2, "quant2.gguf");
    CHECK(gguf_quantize(in, out, DT_Q8_0, &err) == 0);
    CHECK(gguf_quantize(out, out2, DT_F32, &err) == 0);
    gguf_file *a, *b;
    if (gguf_open(out, &a, &err) == 0) {
        if (gguf_open(out2, &b, &err) == 0) {
            const gguf_tensor *ta = gguf_find_tensor(a, "blk.0.attn_q.weight"),
                              *tb = gguf_find_tensor(b, "blk.0.attn_q.weight");
            float row[64];
            dtype_dequantize_row(DT_Q8_0, ta->data, row, 64);
            CHECK(tb->type == DT_F32 && !memcmp(row, tb->data, sizeof row));
            gguf_close(b);
        }
        gguf_close(a);
    }
    /* in place */
    CHECK(gguf_quantize(out2, out2, DT_BF16, &err) == 0);
    CHECK(gguf_quantize("/nonexistent.gguf", out, DT_Q8_0, &err) == -1 && strstr(err.msg, "/nonexistent.gguf"));
    remove(out);
    remove(out2);
    gguf_close(src);
}

static mkmodel_opts small_opts(dtype t, uint64_t seed) {
    return (mkmodel_opts){.arch = "llama",
                          .dim = 64,
                          .layers = 2,
                          .heads = 4,
                          .kv_heads = 2,
                          .ffn = 96,
                          .vocab_from = shared_path("fixtures/vocab/ggml-vocab-llama-spm.gguf"),
                          .type = t,
                          .seed = seed};
}

static void test_mkmodel(void) {
    char p1[256], p2[256], p3[256];
    temp_path(p1, sizeof p1, "mk1.gguf");
    temp_path(p2, sizeof p2, "mk2.gguf");
    temp_path(p3, sizeof p3, "mk3.gguf");
    cf_err err;
    mkmodel_opts o = small_opts(DT_F32, 42);
    CHECKF(mkmodel_write(&o, p1, &err) == 0, "%s", err.msg);
    o.type = DT_Q8_0;
    CHECKF(mkmodel_write(&o, p2, &err) == 0, "%s", err.msg);
    gguf_file *f, *q, *v;
    if (gguf_open(p1, &f, &err) || gguf_open(p2, &q, &err) ||
        gguf_open(shared_path("fixtures/vocab/ggml-vocab-llama-spm.gguf"), &v, &err)) {
        CHECKF(0, "%s", err.msg);
        return;
    }
    int64_t x;
    double d;
    gguf_str s;
    CHECK(gguf_get_str(f, "general.architecture", &s, &err) == 0 && !strcmp(s.s, "llama"));
    CHECK(gguf_get_int(f, "llama.embedding_length", &x, &err) == 0 && x == 64);
    CHECK(gguf_get_int(f, "llama.block_count", &x, &err) == 0 && x == 2);
    CHECK(gguf_get_int(f, "llama.attention.head_count", &x, &err) == 0 && x == 4);
    CHECK(gguf_get_int(f, "llama.attention.head_count_kv", &x, &err) == 0 && x == 2);
    CHECK(gguf_get_int(f, "llama.feed_forward_length", &x, &err) == 0 && x == 96);
    CHECK(gguf_get_int(f, "llama.rope.dimension_count", &x, &err) == 0 && x == 16);
    CHECK(gguf_get_int(f, "llama.context_length", &x, &err) == 0 && x == 2048);
    CHECK(gguf_get_int(f, "llama.vocab_size", &x, &err) == 0 && x == 32000);
    CHECK(gguf_get_int(q, "general.file_type", &x, &err) == 0 && x == 7);
    CHECK(gguf_get_float(f, "llama.rope.freq_base", &d, &err) == 0 && d == 10000.0);
    CHECK(gguf_get_float(f, "llama.attention.layer_norm_rms_epsilon", &d, &err) == 0 && fabs(d - 1e-5) < 1e-10);
    for (int64_t i = 0; i < gguf_kv_count(v); i++) {
        const char *k = gguf_key_name(v, i);
        if (!strncmp(k, "tokenizer.", 10)) CHECKF(gguf_find_key(f, k) >= 0, "missing %s", k);
    }
    const gguf_str *ta, *tb;
    uint64_t na, nb;
    CHECK(gguf_get_arr_str(f, "tokenizer.ggml.tokens", &ta, &na, &err) == 0 &&
          gguf_get_arr_str(v, "tokenizer.ggml.tokens", &tb, &nb, &err) == 0 && na == nb && na == 32000 &&
          !strcmp(ta[1000].s, tb[1000].s));
    CHECK(gguf_tensor_count(f) == 3 + 2 * 9);
    static const char *names[] = {"token_embd.weight",   "output_norm.weight",    "output.weight",
                                  "blk.1.attn_k.weight", "blk.1.ffn_down.weight", "blk.0.ffn_norm.weight"};
    static const int64_t shapes[][2] = {{64, 32000}, {64, 1}, {64, 32000}, {64, 32}, {96, 64}, {64, 1}};
    for (int i = 0; i < 6; i++) {
        const gguf_tensor *t = gguf_find_tensor(f, names[i]), *tq = gguf_find_tensor(q, names[i]);
        CHECKF(t && t->ne[0] == shapes[i][0] && t->ne[1] == shapes[i][1] && t->type == DT_F32, "%s", names[i]);
        bool is_norm = shapes[i][1] == 1;
        CHECKF(tq && tq->type == (is_norm ? DT_F32 : DT_Q8_0), "%s q8 type", names[i]);
        if (!t || !tq) continue;
        /* statistics */
        const float *w = t->data;
        size_t n = t->nbytes / 4;
        double sum = 0, sq = 0;
        for (size_t j = 0; j < n; j++) sum += w[j], sq += w[j] * w[j];
        double mean = sum / (double)n, sd = sqrt(sq / (double)n - mean * mean);
        CHECKF(fabs(mean - (is_norm ? 1.0 : 0.0)) < 0.01 && fabs(sd - 0.02) < (is_norm ? 0.006 : 0.002),
               "%s mean %f sd %f", names[i], mean, sd);
        /* the q8_0 model holds the f32 model's values, quantized */
        if (!is_norm) {
            size_t rb = dtype_row_bytes(DT_Q8_0, t->ne[0]);
            void *expect = malloc(rb);
            int bad = 0;
            for (int64_t r = 0; r < t->ne[1]; r++) {
                dtype_quantize_row(DT_Q8_0, w + r * t->ne[0], expect, t->ne[0]);
                bad += memcmp(expect, (const char *)tq->data + (size_t)r * rb, rb) != 0;
            }
            CHECKF(bad == 0, "%s: %d q8 rows differ", names[i], bad);
            free(expect);
        } else {
            CHECK(!memcmp(t->data, tq->data, t->nbytes));
        }
    }
    /* determinism, seed sensitivity, tied */
    o = small_opts(DT_F32, 42);
    o.tied = true;
    o.ctx = 4096;
    CHECK(mkmodel_write(&o, p3, &err) == 0);
    gguf_file *g;
    if (gguf_open(p3, &g, &err) == 0) {
        CHECK(gguf_find_tensor(g, "output.weight") == NULL && gguf_tensor_count(g) == 2 + 2 * 9);
        CHECK(gguf_get_int(g, "llama.context_length", &x, &err) == 0 && x == 4096);
        const gguf_tensor *a = gguf_find_tensor(f, "blk.1.ffn_up.weight"),
                          *b = gguf_find_tensor(g, "blk.1.ffn_up.weight");
        CHECK(a && b && a->nbytes == b->nbytes && !memcmp(a->data, b->data, a->nbytes));
        gguf_close(g);
    }
    o = small_opts(DT_F32, 43);
    CHECK(mkmodel_write(&o, p3, &err) == 0);
    if (gguf_open(p3, &g, &err) == 0) {
        const gguf_tensor *a = gguf_find_tensor(f, "blk.1.ffn_up.weight"),
                          *b = gguf_find_tensor(g, "blk.1.ffn_up.weight");
        CHECK(a && b && memcmp(a->data, b->data, a->nbytes) != 0);
        gguf_close(g);
    }
    gguf_close(f);
    gguf_close(q);
    gguf_close(v);
    /* all dtypes write and reopen */
    dtype all[] = {DT_F16, DT_BF16, DT_Q4_0};
    for (int i = 0; i < 3; i++) {
        o = small_opts(all[i], 1);
        CHECKF(mkmodel_write(&o, p3, &err) == 0, "%s: %s", dtype_name(all[i]), err.msg);
        if (gguf_open(p3, &g, &err) == 0) {
            CHECK(gguf_find_tensor(g, "blk.0.attn_q.weight")->type == (uint32_t)all[i]);
            gguf_close(g);
        }
    }
    /* errors */
    o = small_opts(DT_F32, 1);
    o.heads = 5;
    CHECK(mkmodel_write(&o, p3, &err) == -1 && strstr(err.msg, "--heads") && !strchr(err.msg, '\n'));
    o = small_opts(DT_F32, 1);
    o.kv_heads = 3;
    CHECK(mkmodel_write(&o, p3, &err) == -1 && strstr(err.msg, "--kv-heads"));
    o = small_opts(DT_Q4_0, 1);
    o.ffn = 100;
    CHECK(mkmodel_write(&o, p3, &err) == -1 && strstr(err.msg, "multiples of 32"));
    o = small_opts(DT_F32, 1);
    o.arch = "gpt2";
    CHECK(mkmodel_write(&o, p3, &err) == -1 && strstr(err.msg, "--arch"));
    o = small_opts(DT_F32, 1);
    o.vocab_from = shared_path("models/stories260K.bin");
    CHECK(mkmodel_write(&o, p3, &err) == -1 && strstr(err.msg, "stories260K.bin"));
    remove(p1);
    remove(p2);
    remove(p3);
}

static dtype mix_of(const char *name, int64_t ne0, dtype target, const quantize_mix *mix) {
    gguf_tensor t = {.name = name, .type = DT_F32, .n_dims = 2, .ne = {ne0, 256, 1, 1}};
    return quantize_tensor_type(&t, target, mix);
}

static void test_mix(void) {
    const quantize_mix mix = {16, 8};
    /* use_more_bits(i, 16): i < 2, i >= 14, (i - 2) % 3 == 2 -> 0 1 4 7 10 13 14 15 */
    static const int more[16] = {1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 1, 1};
    char name[64];
    for (int l = 0; l < 16; l++) {
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", l);
        CHECK(mix_of(name, 2048, DT_Q4_K, &mix) == (more[l] ? DT_Q6_K : DT_Q4_K));
        CHECK(mix_of(name, 2048, DT_Q5_K, &mix) == (more[l] ? DT_Q6_K : DT_Q5_K));
        CHECK(mix_of(name, 2048, DT_IQ4_XS, &mix) == DT_Q5_K); /* n_gqa >= 4 */
        CHECK(mix_of(name, 2048, DT_Q6_K, &mix) == DT_Q6_K);
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
        CHECK(mix_of(name, 5632, DT_Q4_K, &mix) == (more[l] ? DT_Q6_K : DT_Q4_K));
        CHECK(mix_of(name, 5632, DT_IQ4_XS, &mix) == (l < 2 ? DT_Q5_K : DT_IQ4_XS));
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", l);
        CHECK(mix_of(name, 2048, DT_Q4_K, &mix) == DT_Q4_K);
    }
    const quantize_mix mha = {16, 1};
    CHECK(mix_of("blk.3.attn_v.weight", 2048, DT_IQ4_XS, &mha) == DT_IQ4_XS);
    CHECK(mix_of("output.weight", 2048, DT_Q4_K, &mix) == DT_Q6_K);
    CHECK(mix_of("output.weight", 2048, DT_IQ4_XS, &mix) == DT_Q6_K);
    CHECK(mix_of("output.weight", 2048, DT_Q8_0, &mix) == DT_Q8_0);
    CHECK(mix_of("token_embd.weight", 2048, DT_Q5_K, &mix) == DT_Q5_K);
    CHECK(mix_of("blk.0.ffn_down.weight", 688, DT_Q4_K, &mix) == DT_F32); /* rows not a multiple of 256 */
    gguf_tensor norm = {.name = "blk.0.attn_norm.weight", .type = DT_F32, .n_dims = 1, .ne = {2048, 1, 1, 1}};
    CHECK(quantize_tensor_type(&norm, DT_Q4_K, &mix) == DT_F32);
}

int main(void) {
    test_mix();
    test_quantize();
    test_mkmodel();
    return test_finish();
}
