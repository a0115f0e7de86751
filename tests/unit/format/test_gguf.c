/* test_gguf.c - GGUF reader/writer tests.
 *
 * 1. Real files: stories260K.gguf (keys and tensors as in its .meta.txt), and
 *    every fixture GGUF under models/tiny and fixtures/vocab must open.
 * 2. Writer round trip: a hand-built image holding every value type (and
 *    arrays of each) is copied with gguf_writer_copy_kv, written with tensors
 *    of several ggml types, re-read and compared value by value, byte by byte.
 * 3. Corruption: a small valid file is truncated at every length, and bytes
 *    are overwritten at random; specific malformed images (bad magic, versions,
 *    huge counts, bad strings/types/offsets, duplicates, n_dims 5) must fail
 *    with a message naming the file. Images are copied into exact-size heap
 *    buffers so the sanitizer build catches any read past the end. */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "tensor/dtype.h"
#include "testutil.h"

/* ---- a byte builder for hand-made images ---- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} buf;

static void b_put(buf *b, const void *v, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, v, n);
    b->n += n;
}
static void b_u8(buf *b, uint8_t v) { b_put(b, &v, 1); }
static void b_u32(buf *b, uint32_t v) { b_put(b, &v, 4); }
static void b_u64(buf *b, uint64_t v) { b_put(b, &v, 8); }
static void b_str(buf *b, const char *s) {
    b_u64(b, strlen(s));
    b_put(b, s, strlen(s));
}
static void b_pad(buf *b, size_t a) {
    while (b->n % a) b_u8(b, 0);
}
static void b_hdr(buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b_u32(b, 0x46554747u);
    b_u32(b, version);
    b_u64(b, n_tensors);
    b_u64(b, n_kv);
}
static void b_kv_u32(buf *b, const char *key, uint32_t v) {
    b_str(b, key);
    b_u32(b, GGUF_UINT32);
    b_u32(b, v);
}
static void b_tinfo(buf *b, const char *name, uint32_t n_dims, const int64_t *ne, uint32_t type, uint64_t off) {
    b_str(b, name);
    b_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) b_u64(b, (uint64_t)ne[d]);
    b_u32(b, type);
    b_u64(b, off);
}

/* Opens an exact-size heap copy of [p, p+n); *copy is freed by the caller
 * after gguf_close (the file references it). */
static int open_copy(const void *p, size_t n, const char *name, gguf_file **f, cf_err *err, void **copy) {
    *copy = malloc(n ? n : 1);
    if (n) memcpy(*copy, p, n);
    return gguf_open_memory(*copy, n, name, f, err);
}

/* Touches every key, array and tensor byte of an opened file (for ASan). */
static uint64_t walk(const gguf_file *f) {
    uint64_t h = 0;
    cf_err err;
    for (int64_t i = 0; i < gguf_kv_count(f); i++) {
        const char *k = gguf_key_name(f, i);
        h += strlen(k) + (uint64_t)gguf_kv_type(f, i);
        int64_t iv;
        double dv;
        bool bv;
        gguf_str sv;
        if (gguf_get_int(f, k, &iv, &err) == 0) h += (uint64_t)iv;
        if (gguf_get_float(f, k, &dv, &err) == 0) h += (uint64_t)(dv == dv);
        if (gguf_get_bool(f, k, &bv, &err) == 0) h += bv;
        if (gguf_get_str(f, k, &sv, &err) == 0) h += sv.len + strlen(sv.s);
        const gguf_str *as;
        uint64_t n;
        if (gguf_get_arr_str(f, k, &as, &n, &err) == 0)
            for (uint64_t j = 0; j < n; j++) h += as[j].len + (uint8_t)as[j].s[as[j].len];
        float *af;
        if (gguf_get_arr_f32(f, k, &af, &n, &err) == 0) {
            for (uint64_t j = 0; j < n; j++) h += (uint64_t)(af[j] == af[j]);
            free(af);
        }
        int64_t *ai;
        if (gguf_get_arr_i64(f, k, &ai, &n, &err) == 0) {
            for (uint64_t j = 0; j < n; j++) h += (uint64_t)ai[j];
            free(ai);
        }
    }
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        h += (uint64_t)(gguf_find_tensor(f, t->name) == t);
        const uint8_t *d = t->data;
        for (size_t j = 0; j < t->nbytes; j++) h += d[j];
    }
    return h;
}

/* ---- 1. real files ---- */

static void test_stories(void) {
    const char *path = shared_path("models/stories260K.gguf");
    gguf_file *f;
    cf_err err;
    if (gguf_open(path, &f, &err) != 0) {
        CHECKF(0, "open %s: %s", path, err.msg);
        return;
    }
    CHECK(gguf_version(f) == 3);
    CHECK(gguf_kv_count(f) == 19);
    CHECK(gguf_tensor_count(f) == 48);
    CHECK(gguf_alignment(f) == 32);
    gguf_str s;
    CHECK(gguf_get_str(f, "general.architecture", &s, &err) == 0 && !strcmp(s.s, "llama"));
    CHECK(gguf_get_str(f, "tokenizer.ggml.model", &s, &err) == 0 && !strcmp(s.s, "llama"));
    int64_t v;
    CHECK(gguf_get_int(f, "llama.embedding_length", &v, &err) == 0 && v == 64);
    CHECK(gguf_get_int(f, "llama.feed_forward_length", &v, &err) == 0 && v == 172);
    CHECK(gguf_get_int(f, "llama.block_count", &v, &err) == 0 && v == 5);
    CHECK(gguf_get_int(f, "llama.attention.head_count_kv", &v, &err) == 0 && v == 4);
    CHECK(gguf_get_int(f, "tokenizer.ggml.seperator_token_id", &v, &err) == 0 && v == 4294967295);
    CHECK(gguf_get_int(f, "no.such.key", &v, &err) == 1);
    double d;
    CHECK(gguf_get_float(f, "llama.attention.layer_norm_rms_epsilon", &d, &err) == 0 && fabs(d - 1e-5) < 1e-9);
    CHECK(gguf_get_str(f, "llama.block_count", &s, &err) == -1 && strstr(err.msg, path) != NULL);
    int64_t ki = gguf_find_key(f, "tokenizer.ggml.tokens");
    CHECK(ki >= 0 && gguf_kv_type(f, ki) == GGUF_ARRAY && gguf_arr_type(f, ki) == GGUF_STRING &&
          gguf_arr_len(f, ki) == 512);
    const gguf_str *toks;
    uint64_t n;
    CHECK(gguf_get_arr_str(f, "tokenizer.ggml.tokens", &toks, &n, &err) == 0 && n == 512 &&
          !strcmp(toks[0].s, "<unk>") && !strcmp(toks[2].s, "</s>") && !strcmp(toks[5].s, "<0x02>"));
    int64_t *types;
    if (gguf_get_arr_i64(f, "tokenizer.ggml.token_type", &types, &n, &err) == 0) {
        CHECK(n == 512 && types[0] == 2 && types[1] == 3 && types[2] == 3 && types[3] == 6);
        free(types);
    } else {
        CHECKF(0, "%s", err.msg);
    }
    float *scores;
    if (gguf_get_arr_f32(f, "tokenizer.ggml.scores", &scores, &n, &err) == 0) {
        CHECK(n == 512 && scores[0] == 0.0f);
        free(scores);
    }
    const gguf_tensor *t = gguf_find_tensor(f, "token_embd.weight");
    CHECK(t && t->type == DT_F32 && t->n_dims == 2 && t->ne[0] == 64 && t->ne[1] == 512 && t->nbytes == 64 * 512 * 4);
    t = gguf_find_tensor(f, "blk.0.ffn_down.weight");
    CHECK(t && t->ne[0] == 172 && t->ne[1] == 64 && t->ne[2] == 1 && t->ne[3] == 1);
    t = gguf_find_tensor(f, "output_norm.weight");
    CHECK(t && t->n_dims == 1 && t->ne[0] == 64);
    CHECK(gguf_find_tensor(f, "blk.5.ffn_up.weight") == NULL);
    CHECK(!strcmp(gguf_tensor_at(f, 0)->name, "token_embd.weight"));
    CHECK(!strcmp(gguf_tensor_at(f, 47)->name, "blk.4.ffn_norm.weight"));
    CHECK(gguf_tensor_at(f, 48) == NULL && gguf_tensor_at(f, -1) == NULL);
    /* the norm weights of a trained model are finite and mostly positive */
    float w0;
    memcpy(&w0, gguf_find_tensor(f, "output_norm.weight")->data, 4);
    CHECK(isfinite(w0));
    walk(f);
    gguf_close(f);
}

static void test_fixtures_open(void) {
    static const char *files[] = {
        "models/tiny/tiny-llama.gguf",
        "models/tiny/tiny-gemma2.gguf",
        "models/tiny/tiny-deepseek2.gguf",
        "fixtures/vocab/ggml-vocab-llama-spm.gguf",
        "fixtures/vocab/ggml-vocab-gpt-2.gguf",
        "fixtures/vocab/ggml-vocab-bert-bge.gguf",
        "fixtures/vocab/ggml-vocab-deepseek-llm.gguf",
        "fixtures/vocab/ggml-vocab-phi-3.gguf",
        "fixtures/vocab/derived-vocab-tiny-gemma2.gguf",
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        gguf_file *f;
        cf_err err;
        int rc = gguf_open(shared_path(files[i]), &f, &err);
        CHECKF(rc == 0, "%s: %s", files[i], err.msg);
        if (rc == 0) {
            walk(f);
            gguf_close(f);
        }
    }
    gguf_file *f;
    cf_err err;
    CHECK(gguf_open("/nonexistent/x.gguf", &f, &err) == -1 && strstr(err.msg, "/nonexistent/x.gguf"));
}

/* ---- 2. writer round trip ---- */

/* A hand-built image with one key of every scalar type, a string with a NUL,
 * an array of every element type, an empty array, and no tensors. */
static buf all_types_image(void) {
    buf b = {0};
    b_hdr(&b, 3, 0, 26);
    b_str(&b, "u8"), b_u32(&b, GGUF_UINT8), b_u8(&b, 250);
    b_str(&b, "i8"), b_u32(&b, GGUF_INT8), b_u8(&b, (uint8_t)-5);
    b_str(&b, "u16"), b_u32(&b, GGUF_UINT16), b_put(&b, &(uint16_t){65000}, 2);
    b_str(&b, "i16"), b_u32(&b, GGUF_INT16), b_put(&b, &(int16_t){-30000}, 2);
    b_str(&b, "u32"), b_u32(&b, GGUF_UINT32), b_u32(&b, 4000000000u);
    b_str(&b, "i32"), b_u32(&b, GGUF_INT32), b_put(&b, &(int32_t){-2000000000}, 4);
    b_str(&b, "f32"), b_u32(&b, GGUF_FLOAT32), b_put(&b, &(float){1.5f}, 4);
    b_str(&b, "bool"), b_u32(&b, GGUF_BOOL), b_u8(&b, 1);
    b_str(&b, "str"), b_u32(&b, GGUF_STRING), b_u64(&b, 3), b_put(&b, "a\0b", 3);
    b_str(&b, "u64"), b_u32(&b, GGUF_UINT64), b_u64(&b, 1ull << 40);
    b_str(&b, "i64"), b_u32(&b, GGUF_INT64), b_u64(&b, (uint64_t) - (1ll << 40));
    b_str(&b, "f64"), b_u32(&b, GGUF_FLOAT64), b_put(&b, &(double){-2.25}, 8);
    b_str(&b, "big"), b_u32(&b, GGUF_UINT64), b_u64(&b, UINT64_MAX);
    /* arrays of every non-array element type, two elements each */
    static const char *arr_keys[] = {"a.u8",   "a.i8",  "a.u16", "a.i16", "a.u32", "a.i32", "a.f32",
                                     "a.bool", "a.str", "",      "a.u64", "a.i64", "a.f64"};
    static const size_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    for (uint32_t t = 0; t < GGUF_VTYPE_COUNT; t++) {
        if (t == GGUF_ARRAY) continue;
        b_str(&b, arr_keys[t]);
        b_u32(&b, GGUF_ARRAY);
        b_u32(&b, t);
        b_u64(&b, 2);
        if (t == GGUF_STRING) {
            b_str(&b, "x");
            b_u64(&b, 0);
        } else if (t == GGUF_BOOL) {
            b_u8(&b, 0), b_u8(&b, 1);
        } else if (t == GGUF_FLOAT32) {
            b_put(&b, &(float){0.25f}, 4), b_put(&b, &(float){-3.0f}, 4);
        } else if (t == GGUF_FLOAT64) {
            b_put(&b, &(double){0.25}, 8), b_put(&b, &(double){-3.0}, 8);
        } else {
            uint64_t one = 1, seven = 7;
            b_put(&b, &one, sizes[t]), b_put(&b, &seven, sizes[t]);
        }
    }
    b_str(&b, "a.empty"), b_u32(&b, GGUF_ARRAY), b_u32(&b, GGUF_INT32), b_u64(&b, 0);
    return b;
}

static void check_all_types(const gguf_file *f) {
    cf_err err;
    int64_t v;
    double d;
    bool bo;
    gguf_str s;
    CHECK(gguf_kv_count(f) >= 26);
    CHECK(gguf_get_int(f, "u8", &v, &err) == 0 && v == 250);
    CHECK(gguf_get_int(f, "i8", &v, &err) == 0 && v == -5);
    CHECK(gguf_get_int(f, "u16", &v, &err) == 0 && v == 65000);
    CHECK(gguf_get_int(f, "i16", &v, &err) == 0 && v == -30000);
    CHECK(gguf_get_int(f, "u32", &v, &err) == 0 && v == 4000000000);
    CHECK(gguf_get_int(f, "i32", &v, &err) == 0 && v == -2000000000);
    CHECK(gguf_get_float(f, "f32", &d, &err) == 0 && d == 1.5);
    CHECK(gguf_get_bool(f, "bool", &bo, &err) == 0 && bo);
    CHECK(gguf_get_int(f, "bool", &v, &err) == 0 && v == 1);
    CHECK(gguf_get_str(f, "str", &s, &err) == 0 && s.len == 3 && !memcmp(s.s, "a\0b", 4));
    CHECK(gguf_get_int(f, "u64", &v, &err) == 0 && v == (1ll << 40));
    CHECK(gguf_get_int(f, "i64", &v, &err) == 0 && v == -(1ll << 40));
    CHECK(gguf_get_float(f, "f64", &d, &err) == 0 && d == -2.25);
    CHECK(gguf_get_float(f, "i32", &d, &err) == 0 && d == -2000000000.0);
    CHECK(gguf_get_int(f, "big", &v, &err) == -1 && strstr(err.msg, "out of range"));
    CHECK(gguf_get_int(f, "f32", &v, &err) == -1 && strstr(err.msg, "'f32'"));
    CHECK(gguf_get_bool(f, "u8", &bo, &err) == -1);
    static const char *ints[] = {"a.u8", "a.i8", "a.u16", "a.i16", "a.u32", "a.i32", "a.u64", "a.i64"};
    for (size_t i = 0; i < 8; i++) {
        int64_t *a;
        float *fa;
        uint64_t n;
        int64_t ki = gguf_find_key(f, ints[i]);
        CHECK(ki >= 0 && gguf_arr_len(f, ki) == 2);
        if (gguf_get_arr_i64(f, ints[i], &a, &n, &err) == 0) {
            CHECKF(n == 2 && a[0] == 1 && a[1] == 7, "%s", ints[i]);
            free(a);
        } else {
            CHECKF(0, "%s: %s", ints[i], err.msg);
        }
        if (gguf_get_arr_f32(f, ints[i], &fa, &n, &err) == 0) {
            CHECK(n == 2 && fa[0] == 1.0f && fa[1] == 7.0f);
            free(fa);
        }
    }
    float *fa;
    uint64_t n;
    CHECK(gguf_get_arr_f32(f, "a.f32", &fa, &n, &err) == 0 && n == 2 && fa[0] == 0.25f && fa[1] == -3.0f);
    free(fa);
    CHECK(gguf_get_arr_f32(f, "a.f64", &fa, &n, &err) == 0 && n == 2 && fa[0] == 0.25f && fa[1] == -3.0f);
    free(fa);
    int64_t *ia;
    CHECK(gguf_get_arr_i64(f, "a.bool", &ia, &n, &err) == 0 && n == 2 && ia[0] == 0 && ia[1] == 1);
    free(ia);
    CHECK(gguf_get_arr_i64(f, "a.f32", &ia, &n, &err) == -1);
    CHECK(gguf_get_arr_i64(f, "a.empty", &ia, &n, &err) == 0 && n == 0);
    free(ia);
    const gguf_str *as;
    CHECK(gguf_get_arr_str(f, "a.str", &as, &n, &err) == 0 && n == 2 && !strcmp(as[0].s, "x") && as[1].len == 0 &&
          as[1].s[0] == 0);
    CHECK(gguf_get_arr_str(f, "a.u8", &as, &n, &err) == -1);
}

static uint32_t rng_state = 12345;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

typedef struct {
    const char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[4];
} tspec;

static const tspec round_tensors[] = {
    {"f32.weight", DT_F32, 1, {7, 1, 1, 1}},   {"f16.weight", DT_F16, 2, {3, 5, 1, 1}},
    {"bf16.weight", DT_BF16, 3, {2, 3, 4, 1}}, {"q8.weight", DT_Q8_0, 2, {64, 3, 1, 1}},
    {"q4.weight", DT_Q4_0, 4, {32, 2, 1, 2}},  {"q4k.weight", 12, 1, {256, 1, 1, 1}},
};
#define N_ROUND (sizeof round_tensors / sizeof round_tensors[0])

static void test_writer_roundtrip(void) {
    buf img = all_types_image();
    gguf_file *src;
    cf_err err;
    void *copy;
    if (open_copy(img.p, img.n, "all-types", &src, &err, &copy) != 0) {
        CHECKF(0, "all-types image: %s", err.msg);
        free(copy);
        free(img.p);
        return;
    }
    check_all_types(src);
    gguf_writer *w = gguf_writer_create();
    CHECK(gguf_writer_copy_kv(w, src, &err) == 0);
    gguf_set_u32(w, "extra.u32", 7);
    gguf_set_u32(w, "extra.u32", 8); /* replaces */
    gguf_set_str(w, "extra.gone", "x");
    gguf_writer_remove_key(w, "extra.gone");
    const char *strs[] = {"p", "", "q r"};
    gguf_set_arr_str(w, "extra.strs", strs, 3);
    uint8_t *datas[N_ROUND];
    size_t sizes[N_ROUND];
    for (size_t i = 0; i < N_ROUND; i++) {
        const tspec *t = &round_tensors[i];
        sizes[i] = dtype_row_bytes(t->type, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
        datas[i] = malloc(sizes[i]);
        for (size_t j = 0; j < sizes[i]; j++) datas[i][j] = (uint8_t)rnd();
        CHECK(gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, datas[i], i % 2 == 0, &err) == 0);
    }
    int64_t bad_ne[2] = {33, 1};
    CHECK(gguf_writer_add_tensor(w, "bad", DT_Q8_0, 2, bad_ne, datas[0], true, &err) == -1);
    CHECK(gguf_writer_add_tensor(w, "f32.weight", DT_F32, 1, bad_ne, datas[0], true, &err) == -1);
    char path[256];
    temp_path(path, sizeof path, "roundtrip.gguf");
    CHECKF(gguf_writer_write(w, path, &err) == 0, "%s", err.msg);
    gguf_writer_free(w);
    gguf_close(src);
    free(copy);

    gguf_file *f;
    if (gguf_open(path, &f, &err) != 0) {
        CHECKF(0, "reopen: %s", err.msg);
    } else {
        check_all_types(f);
        int64_t v;
        CHECK(gguf_get_int(f, "extra.u32", &v, &err) == 0 && v == 8);
        CHECK(gguf_find_key(f, "extra.gone") == -1);
        const gguf_str *as;
        uint64_t n;
        CHECK(gguf_get_arr_str(f, "extra.strs", &as, &n, &err) == 0 && n == 3 && !strcmp(as[2].s, "q r"));
        CHECK(gguf_version(f) == 3 && gguf_tensor_count(f) == (int64_t)N_ROUND);
        for (size_t i = 0; i < N_ROUND; i++) {
            const gguf_tensor *t = gguf_find_tensor(f, round_tensors[i].name);
            CHECKF(t && t->type == round_tensors[i].type && t->n_dims == round_tensors[i].n_dims &&
                       !memcmp(t->ne, round_tensors[i].ne, sizeof t->ne) && t->nbytes == sizes[i] &&
                       !memcmp(t->data, datas[i], sizes[i]) && t->offset % 32 == 0,
                   "tensor %s", round_tensors[i].name);
        }
        gguf_close(f);
    }
    remove(path);
    for (size_t i = 0; i < N_ROUND; i++) free(datas[i]);
    free(img.p);
}

/* Streaming writes with a custom alignment; short data is an error that leaves no file. */
static void test_writer_streaming(void) {
    char path[256], tmp[300];
    temp_path(path, sizeof path, "stream.gguf");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    cf_err err;
    gguf_writer *w = gguf_writer_create();
    gguf_set_u32(w, "general.alignment", 64);
    int64_t ne[2] = {10, 3};
    CHECK(gguf_writer_add_tensor(w, "a", DT_F32, 2, ne, NULL, false, &err) == 0);
    CHECK(gguf_writer_add_tensor(w, "b", DT_F16, 1, ne, NULL, false, &err) == 0);
    CHECK(gguf_writer_write(w, path, &err) == -1); /* no data */
    CHECK(gguf_writer_begin(w, path, &err) == 0);
    float rows[30];
    for (int i = 0; i < 30; i++) rows[i] = (float)i;
    for (int r = 0; r < 3; r++) CHECK(gguf_writer_write_data(w, rows + r * 10, 40, &err) == 0);
    uint16_t h[10];
    for (int i = 0; i < 10; i++) h[i] = f32_to_fp16((float)i);
    CHECK(gguf_writer_write_data(w, h, 20, &err) == 0);
    CHECKF(gguf_writer_finish(w, &err) == 0, "%s", err.msg);
    gguf_writer_free(w);
    gguf_file *f;
    if (gguf_open(path, &f, &err) == 0) {
        CHECK(gguf_alignment(f) == 64 && gguf_data_offset(f) % 64 == 0);
        const gguf_tensor *a = gguf_find_tensor(f, "a"), *b = gguf_find_tensor(f, "b");
        CHECK(a && !memcmp(a->data, rows, 120) && b && b->offset == 128 && !memcmp(b->data, h, 20));
        gguf_close(f);
    } else {
        CHECKF(0, "%s", err.msg);
    }
    remove(path);

    w = gguf_writer_create();
    CHECK(gguf_writer_add_tensor(w, "a", DT_F32, 2, ne, NULL, false, &err) == 0);
    CHECK(gguf_writer_begin(w, path, &err) == 0);
    CHECK(gguf_writer_write_data(w, rows, 40, &err) == 0);
    CHECK(gguf_writer_finish(w, &err) == -1 && strstr(err.msg, "'a'"));
    gguf_writer_free(w);
    FILE *fp = fopen(path, "rb");
    CHECK(fp == NULL);
    if (fp) fclose(fp);
    fp = fopen(tmp, "rb");
    CHECK(fp == NULL);
    if (fp) fclose(fp);

    w = gguf_writer_create();
    gguf_set_u32(w, "general.alignment", 48);
    CHECK(gguf_writer_write(w, path, &err) == -1 && strstr(err.msg, "power of two"));
    gguf_writer_free(w);
    w = gguf_writer_create();
    CHECK(gguf_writer_write(w, "/nonexistent-dir/x.gguf", &err) == -1 && strstr(err.msg, "/nonexistent-dir/x.gguf"));
    gguf_writer_free(w);
}

/* ---- 3. corruption ---- */

/* A small valid file made by the writer: a few keys (with a string array) and tensors. */
static buf small_valid_file(size_t *data_end) {
    gguf_writer *w = gguf_writer_create();
    cf_err err;
    gguf_set_str(w, "general.architecture", "llama");
    gguf_set_u32(w, "llama.block_count", 1);
    gguf_set_f32(w, "llama.eps", 1e-5f);
    gguf_set_bool(w, "flag", true);
    const char *toks[] = {"<unk>", "a", "\342\226\201b"};
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
    float sc[3] = {0, -1, -2};
    gguf_set_arr_f32(w, "tokenizer.ggml.scores", sc, 3);
    int32_t ty[3] = {2, 1, 1};
    gguf_set_arr_i32(w, "tokenizer.ggml.token_type", ty, 3);
    float d1[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t ne1[1] = {8}, ne2[2] = {32, 2};
    gguf_writer_add_tensor(w, "norm.weight", DT_F32, 1, ne1, d1, true, &err);
    uint8_t q[68];
    for (int i = 0; i < 68; i++) q[i] = (uint8_t)i;
    gguf_writer_add_tensor(w, "w.weight", DT_Q8_0, 2, ne2, q, true, &err);
    char path[256];
    temp_path(path, sizeof path, "small.gguf");
    if (gguf_writer_write(w, path, &err) != 0) fprintf(stderr, "%s\n", err.msg);
    gguf_writer_free(w);
    buf b = {0};
    b.p = (uint8_t *)read_file(path, &b.n);
    remove(path);
    gguf_file *f;
    *data_end = 0;
    if (b.p && gguf_open_memory(b.p, b.n, "small", &f, &err) == 0) {
        for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
            const gguf_tensor *t = gguf_tensor_at(f, i);
            size_t end = (size_t)((const uint8_t *)t->data - b.p) + t->nbytes;
            if (end > *data_end) *data_end = end;
        }
        gguf_close(f);
    }
    return b;
}

static void test_truncation(const buf *v, size_t data_end) {
    int bad = 0;
    for (size_t len = 0; len <= v->n; len++) {
        gguf_file *f;
        cf_err err;
        err.msg[0] = 0;
        void *copy;
        int rc = open_copy(v->p, len, "trunc.gguf", &f, &err, &copy);
        if (rc == 0) {
            walk(f);
            gguf_close(f);
            if (len < data_end) bad++;
        } else if (len >= data_end || !strstr(err.msg, "trunc.gguf")) {
            if (bad++ < 5) fprintf(stderr, "len %zu: %s\n", len, err.msg);
        }
        free(copy);
    }
    CHECKF(bad == 0, "%d truncation lengths misbehaved (file %zu bytes, data end %zu)", bad, v->n, data_end);
}

static void test_random_bytes(const buf *v) {
    int ok = 0, bad_msg = 0;
    for (int iter = 0; iter < 20000; iter++) {
        uint8_t *c = malloc(v->n);
        memcpy(c, v->p, v->n);
        int nflip = 1 + (int)(rnd() % 4);
        for (int k = 0; k < nflip; k++) {
            size_t pos = rnd() % v->n;
            switch (rnd() % 4) {
            case 0: c[pos] = (uint8_t)rnd(); break;
            case 1: c[pos] ^= (uint8_t)(1u << (rnd() % 8)); break;
            case 2: c[pos] = 0xff; break;
            default: c[pos] = 0; break;
            }
        }
        gguf_file *f;
        cf_err err;
        if (gguf_open_memory(c, v->n, "flip.gguf", &f, &err) == 0) {
            walk(f);
            gguf_close(f);
            ok++;
        } else if (!strstr(err.msg, "flip.gguf")) {
            bad_msg++;
        }
        free(c);
    }
    CHECK(bad_msg == 0);
    fprintf(stderr, "random corruption: %d of 20000 variants still valid\n", ok);
}

/* Expects the image to fail with a message naming it and containing `want`. */
static void expect_fail(buf *b, const char *want, const char *label) {
    gguf_file *f;
    cf_err err;
    err.msg[0] = 0;
    void *copy;
    int rc = open_copy(b->p, b->n, "case.gguf", &f, &err, &copy);
    if (rc == 0) {
        CHECKF(0, "%s: opened but should fail", label);
        gguf_close(f);
    } else {
        CHECKF(strstr(err.msg, "case.gguf") && strstr(err.msg, want) && strstr(err.msg, "(offset ") &&
                   !strchr(err.msg, '\n'),
               "%s: message '%s' lacks '%s'", label, err.msg, want);
    }
    free(copy);
    free(b->p);
    *b = (buf){0};
}

static void expect_ok(buf *b, const char *label) {
    gguf_file *f;
    cf_err err;
    void *c = malloc(b->n);
    memcpy(c, b->p, b->n);
    int rc = gguf_open_memory(c, b->n, "case.gguf", &f, &err);
    CHECKF(rc == 0, "%s: %s", label, err.msg);
    if (rc == 0) {
        walk(f);
        gguf_close(f);
    }
    free(c);
    free(b->p);
    *b = (buf){0};
}

static void one_tensor(buf *b, uint32_t version, uint32_t n_dims, const int64_t *ne, uint32_t type, uint64_t off,
                       size_t data_bytes) {
    b_hdr(b, version, 1, 1);
    b_kv_u32(b, "k", 1);
    b_tinfo(b, "t", n_dims, ne, type, off);
    b_pad(b, 32);
    for (size_t i = 0; i < data_bytes; i++) b_u8(b, 0);
}

static void test_specific_cases(void) {
    buf b = {0};
    int64_t ne[5] = {32, 2, 1, 1, 1};

    one_tensor(&b, 3, 2, ne, DT_F32, 0, 256);
    expect_ok(&b, "baseline v3");
    one_tensor(&b, 2, 2, ne, DT_F32, 0, 256);
    expect_ok(&b, "baseline v2");

    one_tensor(&b, 3, 2, ne, DT_F32, 0, 256);
    b.p[0] = 'X';
    expect_fail(&b, "magic", "bad magic");
    one_tensor(&b, 1, 2, ne, DT_F32, 0, 256);
    expect_fail(&b, "version 1", "v1");
    one_tensor(&b, 4, 2, ne, DT_F32, 0, 256);
    expect_fail(&b, "version 4", "v4");
    one_tensor(&b, 0x03000000u, 2, ne, DT_F32, 0, 256);
    expect_fail(&b, "big-endian", "big endian");

    b_hdr(&b, 3, 0, UINT64_MAX);
    expect_fail(&b, "count", "huge kv count");
    b_hdr(&b, 3, 1ull << 60, 0);
    expect_fail(&b, "count", "huge tensor count");
    b_hdr(&b, 3, 0, 1);
    b_u64(&b, 1000), b_put(&b, "abc", 3), b_u64(&b, 0), b_u64(&b, 0);
    expect_fail(&b, "past the end", "key length past end");
    b_hdr(&b, 3, 0, 1);
    b_str(&b, "k"), b_u32(&b, GGUF_STRING), b_u64(&b, UINT64_MAX - 3);
    expect_fail(&b, "past the end", "string length past end");
    b_hdr(&b, 3, 0, 1);
    b_str(&b, "line\nbreak"), b_u32(&b, 13), b_u64(&b, 0);
    expect_fail(&b, "'line\\x0abreak'", "control bytes escaped in messages");
    b_hdr(&b, 3, 0, 1);
    b_str(&b, "k"), b_u32(&b, 13), b_u64(&b, 0);
    expect_fail(&b, "unknown value type 13", "unknown value type");
    b_hdr(&b, 3, 0, 1);
    b_str(&b, "k"), b_u32(&b, GGUF_ARRAY), b_u32(&b, 99), b_u64(&b, 0);
    expect_fail(&b, "element type", "unknown array element type");
    b_hdr(&b, 3, 0, 1);
    b_str(&b, "k"), b_u32(&b, GGUF_ARRAY), b_u32(&b, GGUF_ARRAY), b_u64(&b, 0);
    expect_fail(&b, "nested", "nested array");
    b_hdr(&b, 3, 0, 1);
    b_str(&b, "k"), b_u32(&b, GGUF_ARRAY), b_u32(&b, GGUF_UINT32), b_u64(&b, 1ull << 62), b_u64(&b, 0);
    expect_fail(&b, "does not fit", "huge array length");
    b_hdr(&b, 3, 0, 1);
    b_str(&b, "k"), b_u32(&b, GGUF_ARRAY), b_u32(&b, GGUF_STRING), b_u64(&b, 3), b_str(&b, "a"), b_str(&b, "b");
    expect_fail(&b, "does not fit", "string array short");
    b_hdr(&b, 3, 0, 1);
    b_str(&b, "k"), b_u32(&b, GGUF_ARRAY), b_u32(&b, GGUF_STRING), b_u64(&b, 3), b_str(&b, "a"), b_str(&b, "b");
    b_u64(&b, 100), b_u64(&b, 0);
    expect_fail(&b, "past the end", "string array element past end");
    b_hdr(&b, 3, 0, 1);
    b_str(&b, "k"), b_u32(&b, GGUF_BOOL), b_u8(&b, 2);
    expect_fail(&b, "bool", "bool 2");
    b_hdr(&b, 3, 0, 2);
    b_kv_u32(&b, "dup", 1), b_kv_u32(&b, "dup", 2);
    expect_fail(&b, "duplicate key 'dup'", "duplicate key");
    b_hdr(&b, 3, 0, 1);
    b_u64(&b, 3), b_put(&b, "a\0b", 3), b_u32(&b, GGUF_UINT8), b_u8(&b, 0);
    expect_fail(&b, "NUL", "key with NUL");
    b_hdr(&b, 3, 0, 1);
    b_kv_u32(&b, "general.alignment", 48);
    expect_fail(&b, "power of two", "alignment 48");
    b_hdr(&b, 3, 0, 1);
    b_str(&b, "general.alignment"), b_u32(&b, GGUF_UINT64), b_u64(&b, 32);
    expect_fail(&b, "uint32", "alignment type");

    one_tensor(&b, 3, 2, ne, 31, 0, 256);
    expect_fail(&b, "unknown ggml type 31", "unknown tensor type");
    one_tensor(&b, 3, 2, ne, 1000, 0, 256);
    expect_fail(&b, "unknown ggml type", "unknown tensor type 1000");
    one_tensor(&b, 3, 2, ne, DT_F32, 16, 256);
    expect_fail(&b, "not a multiple of the alignment", "misaligned offset");
    one_tensor(&b, 3, 2, ne, DT_F32, 32, 256);
    expect_fail(&b, "past the end", "offset out of range");
    one_tensor(&b, 3, 2, ne, DT_F32, 1ull << 63, 256);
    expect_fail(&b, "past the end", "offset huge");
    one_tensor(&b, 3, 2, ne, DT_F32, 0, 255);
    expect_fail(&b, "past the end", "data one byte short");
    one_tensor(&b, 3, 5, ne, DT_F32, 0, 256);
    expect_fail(&b, "n_dims is 5", "n_dims 5");
    one_tensor(&b, 3, 0, ne, DT_F32, 0, 256);
    expect_fail(&b, "n_dims is 0", "n_dims 0");
    int64_t ne0[2] = {32, 0};
    one_tensor(&b, 3, 2, ne0, DT_F32, 0, 256);
    expect_fail(&b, "must be >= 1", "zero dim");
    int64_t neneg[2] = {-32, 1};
    one_tensor(&b, 3, 2, neneg, DT_F32, 0, 256);
    expect_fail(&b, "must be >= 1", "negative dim");
    int64_t nebig[4] = {1ll << 40, 1ll << 40, 1, 1};
    one_tensor(&b, 3, 2, nebig, DT_F32, 0, 256);
    expect_fail(&b, "overflow", "element overflow");
    int64_t nebig2[4] = {1ll << 61, 2, 1, 1};
    one_tensor(&b, 3, 1, nebig2, DT_F32, 0, 256);
    expect_fail(&b, "past the end", "bytes past end");
    int64_t ne33[2] = {33, 1};
    one_tensor(&b, 3, 2, ne33, DT_Q8_0, 0, 256);
    expect_fail(&b, "block size", "ne0 not multiple of block");

    b_hdr(&b, 3, 2, 0);
    b_tinfo(&b, "t", 1, ne, DT_F32, 0);
    b_tinfo(&b, "t", 1, ne, DT_F32, 128);
    b_pad(&b, 32);
    for (int i = 0; i < 256; i++) b_u8(&b, 0);
    expect_fail(&b, "duplicate tensor", "duplicate tensor");

    /* a custom alignment is honoured for the data section and offsets */
    b_hdr(&b, 3, 1, 1);
    b_kv_u32(&b, "general.alignment", 256);
    b_tinfo(&b, "t", 1, ne, DT_F32, 0);
    b_pad(&b, 256);
    for (int i = 0; i < 128; i++) b_u8(&b, 0);
    expect_ok(&b, "alignment 256");
    /* empty file and header-only */
    expect_fail(&b, "truncated", "empty");
    b_hdr(&b, 3, 0, 0);
    expect_ok(&b, "header only");
}

int main(void) {
    test_stories();
    test_fixtures_open();
    test_writer_roundtrip();
    test_writer_streaming();
    size_t data_end;
    buf v = small_valid_file(&data_end);
    CHECK(v.p != NULL && v.n > 0 && v.n < 8192 && data_end > 0);
    if (v.p) {
        test_truncation(&v, data_end);
        test_random_bytes(&v);
    }
    free(v.p);
    test_specific_cases();
    return test_finish();
}
