/* test_kv_dtype.c - the KV cache element types (issue 24; tensor/kv_dtype.h,
 * model/kv_rows.h, the attention load step in tensor/attention_kv_impl.h):
 *  - codecs: every type's row round trip within its rounding (bf16 2^-8,
 *    f16 2^-11 relative, q8_0 half a step of its block scale), row sizes;
 *  - the load step: on every supported ISA, kern_attention (whole, and split
 *    into segments + merge) over K/V stored as bf16 / f16 / q8_0 equals, bit for
 *    bit, kern_attention over an f32 cache holding the decoded values: chunks of
 *    1, 5 and 16 queries, 300 positions (3 segments), causal, sliding window and
 *    a replay floor, head_dim 32, 64, 96 and (not q8_0) 40, GQA 4:1;
 *  - logits vs an f32 cache at 4k+ positions on the fixture models
 *    (tiny-llama: 4,224 positions, full attention, every type; tiny-gemma2:
 *    window rings + full layers, q8_0), the last 8 positions decoded one at a
 *    time: max |diff|
 *    within kv_dtype_tol (kv_dtype_util.h) and the argmax equal wherever the
 *    f32 lead exceeds twice that;
 *  - refusals: an MLA model (deepseek2) with any non-f32 type, q8_0 with
 *    head_dim 8, each a one-line error. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cpu.h"
#include "base/threadpool.h"
#include "engine/generate.h"
#include "kv_dtype_util.h"
#include "model/kv_rows.h"
#include "model/model.h"
#include "tensor/attention.h"
#include "testutil.h"

static uint32_t rng = 12345;
static float frand(void) {
    rng = rng * 1664525u + 1013904223u;
    return ((float)(rng >> 8) / (float)(1 << 24)) * 2.0f - 1.0f;
}

static void test_codecs(void) {
    float x[96], y[96];
    uint8_t buf[96 * 4];
    for (int i = 0; i < 96; i++) x[i] = frand() * (i % 7 == 0 ? 40.0f : 1.0f);
    for (int t = 0; t < KV_DTYPE_COUNT; t++) {
        kv_dtype dt = (kv_dtype)t;
        CHECK(kv_dtype_fits(dt, 96) && kv_dtype_fits(dt, 64));
        kv_dtype_encode_row(dt, x, buf, 96);
        kv_dtype_decode_row(dt, buf, y, 96);
        for (int b = 0; b < 3; b++) {
            float amax = 0;
            for (int i = 32 * b; i < 32 * b + 32; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
            for (int i = 32 * b; i < 32 * b + 32; i++) {
                double bound = dt == KV_DTYPE_F32    ? 0
                               : dt == KV_DTYPE_BF16 ? fabs(x[i]) / 256
                               : dt == KV_DTYPE_F16  ? fabs(x[i]) / 2048 + 6e-8
                                                     : amax / 127 * 0.5001 + amax * 1e-3; /* + f16 scale rounding */
                CHECKF(fabs(x[i] - y[i]) <= bound, "%s element %d: %g -> %g", kv_dtype_name(dt), i, x[i], y[i]);
            }
        }
    }
    CHECK(kv_dtype_bytes(KV_DTYPE_Q8_0, 64) == 68 && kv_dtype_row_units(KV_DTYPE_Q8_0, 32) == 9);
    CHECK(kv_dtype_bytes(KV_DTYPE_F16, 64) == 128 && kv_dtype_row_units(KV_DTYPE_BF16, 64) == 32);
    CHECK(!kv_dtype_fits(KV_DTYPE_Q8_0, 8) && kv_dtype_fits(KV_DTYPE_F16, 8));
    kv_dtype p;
    CHECK(kv_dtype_parse("q8_0", &p) == 0 && p == KV_DTYPE_Q8_0 && kv_dtype_parse("Q8_0", &p) == -1);
}

#define KT_POS 300
#define KT_BT 16
#define KT_NKV 2
#define KT_GROUP 4

/* One cache of KT_POS positions, one layer, KT_NKV heads of hd, as `dt`
 * (model/kv_rows.h), and the f32 cache of its decoded values. */
typedef struct kt_cache {
    float *mem, *blocks[(KT_POS + KT_BT - 1) / KT_BT];
    kv_rows rows;
} kt_cache;

static void kt_make(kt_cache *c, kv_dtype dt, int hd) {
    int64_t kvd = (int64_t)KT_NKV * hd;
    c->rows = kv_rows_make(dt, KT_BT, kvd);
    int64_t per = 2 * KT_BT * c->rows.units, n = (KT_POS + KT_BT - 1) / KT_BT;
    c->mem = calloc((size_t)(per * n), sizeof(float));
    for (int64_t i = 0; i < n; i++) c->blocks[i] = c->mem + i * per;
}

static void test_load_step(int hd) {
    cpu_isa best = cpu_isa_active();
    int64_t kvd = (int64_t)KT_NKV * hd, qd = (int64_t)KT_NKV * KT_GROUP * hd;
    float *k = malloc(sizeof(float) * (size_t)(KT_POS * kvd)), *v = malloc(sizeof(float) * (size_t)(KT_POS * kvd));
    float *q = malloc(sizeof(float) * (size_t)(16 * qd)), row[2 * 96 * KT_NKV];
    for (int64_t i = 0; i < KT_POS * kvd; i++) k[i] = frand() * 2, v[i] = frand();
    for (int64_t i = 0; i < 16 * qd; i++) q[i] = frand();
    size_t scratch_n = attn_scratch_floats(ATTN_MAX_CHUNK, KT_GROUP, hd);
    float *scratch = malloc(sizeof(float) * scratch_n), *parts = malloc(sizeof(float) * 4 * scratch_n);
    float *o1 = malloc(sizeof(float) * (size_t)(16 * qd)), *o2 = malloc(sizeof(float) * (size_t)(16 * qd));
    for (int t = 1; t < KV_DTYPE_COUNT; t++) {
        kv_dtype dt = (kv_dtype)t;
        if (!kv_dtype_fits(dt, hd)) continue; /* q8_0 blocks of 32 */
        kt_cache enc, ref;
        kt_make(&enc, dt, hd);
        kt_make(&ref, KV_DTYPE_F32, hd);
        for (int p = 0; p < KT_POS; p++) {
            kv_rows_write(&enc.rows, enc.blocks[p / KT_BT], 0, p % KT_BT, k + p * kvd, v + p * kvd);
            /* the f32 cache holds exactly what the encoded one decodes to */
            uint8_t tmp[96 * KT_NKV * 4];
            kv_dtype_encode_row(dt, k + p * kvd, tmp, kvd);
            kv_dtype_decode_row(dt, tmp, row, kvd);
            kv_dtype_encode_row(dt, v + p * kvd, tmp, kvd);
            kv_dtype_decode_row(dt, tmp, row + kvd, kvd);
            kv_rows_write(&ref.rows, ref.blocks[p / KT_BT], 0, p % KT_BT, row, row + kvd);
        }
        const struct {
            int n_tok, window, floor;
        } shapes[] = {{1, 0, 0}, {5, 0, 0}, {16, 0, 0}, {5, 40, 0}, {1, 0, 150}};
        for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
            if (!cpu_isa_supported((cpu_isa)isa)) continue;
            cpu_isa_force((cpu_isa)isa);
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (int g = 0; g < KT_NKV; g++) {
                    int32_t pos[16];
                    for (int i = 0; i < shapes[s].n_tok; i++) pos[i] = KT_POS - shapes[s].n_tok + i;
                    attn_args a = {.q = q + (int64_t)g * KT_GROUP * hd,
                                   .q_stride = qd,
                                   .out_stride = qd,
                                   .pos = pos,
                                   .n_tok = shapes[s].n_tok,
                                   .n_q = KT_GROUP,
                                   .head_dim = hd,
                                   .window = shapes[s].window,
                                   .floor = shapes[s].floor,
                                   .scale = 0.125f,
                                   .scratch = scratch};
                    attn_args b = a;
                    a.blocks = enc.blocks;
                    kv_rows_attn(&enc.rows, 0, g, hd, &a);
                    b.blocks = ref.blocks;
                    kv_rows_attn(&ref.rows, 0, g, hd, &b);
                    a.out = o1;
                    b.out = o2;
                    memset(o1, 0, sizeof(float) * (size_t)(16 * qd));
                    memset(o2, 0, sizeof(float) * (size_t)(16 * qd));
                    kern_attention(&a);
                    kern_attention(&b);
                    CHECKF(!memcmp(o1, o2, sizeof(float) * (size_t)(16 * qd)), "%s %s hd %d shape %zu head %d: whole",
                           cpu_isa_name((cpu_isa)isa), kv_dtype_name(dt), hd, s, g);
                    int first, end;
                    attn_segments(&a, &first, &end);
                    int64_t pf = (int64_t)attn_part_floats(a.n_tok, KT_GROUP, hd);
                    for (int sg = first; sg < end; sg++) kern_attention_part(&a, sg, parts + (sg - first) * pf);
                    kern_attention_merge(&a, parts, pf);
                    CHECKF(!memcmp(o1, o2, sizeof(float) * (size_t)(16 * qd)), "%s %s hd %d shape %zu head %d: split",
                           cpu_isa_name((cpu_isa)isa), kv_dtype_name(dt), hd, s, g);
                }
        }
        free(enc.mem);
        free(ref.mem);
    }
    cpu_isa_force(best);
    free(k), free(v), free(q), free(scratch), free(parts), free(o1), free(o2);
}

#define LC_POS 4224
#define LC_TAIL 8

/* Logits of the last LC_TAIL positions (decoded one at a time after a
 * prefill in chunks of 512) with the cache stored as dt. */
static float *long_logits(const model *m, thread_pool *pool, const int32_t *ids, kv_dtype dt) {
    cf_err err = {0};
    int32_t nv = model_get_hparams(m)->n_vocab;
    float *out = malloc(sizeof(float) * (size_t)LC_TAIL * (size_t)nv);
    gen_session g;
    int rc = out ? gen_init_as(&g, m, dt, pool, LC_POS, 512, &err) : -1;
    if (rc == 0) {
        rc = gen_feed(&g, ids, LC_POS - LC_TAIL, NULL, &err);
        for (int i = 0; rc == 0 && i < LC_TAIL; i++) {
            rc = gen_feed(&g, ids + LC_POS - LC_TAIL + i, 1, NULL, &err);
            if (rc == 0) memcpy(out + (int64_t)i * nv, g.logits, sizeof(float) * (size_t)nv);
        }
        gen_release(&g);
    }
    CHECKF(rc == 0, "%s: %s", kv_dtype_name(dt), err.msg);
    if (rc) {
        free(out);
        return NULL;
    }
    return out;
}

static void test_long_logits(const char *rel, thread_pool *pool, unsigned types) {
    const char *path = shared_path(rel);
    cf_err err = {0};
    model *m;
    if (access(path, R_OK) != 0 || model_load(path, &m, &err)) {
        tu_missing_fixture(path);
        return;
    }
    int32_t nv = model_get_hparams(m)->n_vocab;
    int32_t *ids = malloc(sizeof(int32_t) * LC_POS);
    uint32_t x = 7;
    for (int i = 0; i < LC_POS; i++) {
        x = x * 1103515245u + 12345u;
        ids[i] = i % 97 < 60 ? 3 + (int32_t)((x >> 8) % 2000u) : ids[i - 60]; /* repeats: attention that matters */
    }
    float *ref = long_logits(m, pool, ids, KV_DTYPE_F32);
    for (int t = 1; ref && t < KV_DTYPE_COUNT; t++) {
        kv_dtype dt = (kv_dtype)t;
        if (!(types & (1u << t))) continue;
        float *got = long_logits(m, pool, ids, dt);
        if (!got) continue;
        double md = 0;
        int flips = 0, binding = 0;
        for (int i = 0; i < LC_TAIL; i++) {
            const float *r = ref + (int64_t)i * nv, *o = got + (int64_t)i * nv;
            int a = 0, b = -1, ao = 0;
            for (int j = 0; j < nv; j++) {
                double d = fabs((double)r[j] - o[j]);
                if (d > md) md = d;
                if (o[j] > o[ao]) ao = j;
                if (r[j] > r[a]) b = a, a = j;
                else if (b < 0 || r[j] > r[b]) b = j;
            }
            if (r[a] - r[b] > 2 * kv_dtype_tol[dt]) binding++, flips += ao != a;
        }
        fprintf(stderr, "%-28s %d positions, KV %-4s: max |logit - f32| %.2e (bound %.1e), argmax %d/%d held\n", rel,
                LC_POS, kv_dtype_name(dt), md, kv_dtype_tol[dt], binding - flips, binding);
        CHECKF(md <= kv_dtype_tol[dt], "%s %s: logits differ from f32 by %g", rel, kv_dtype_name(dt), md);
        CHECKF(flips == 0, "%s %s: %d argmax flips where the f32 lead exceeds twice the bound", rel, kv_dtype_name(dt),
               flips);
        free(got);
    }
    free(ref);
    free(ids);
    model_free(m);
}

static void test_refusals(void) {
    cf_err err = {0};
    model *m;
    if (model_load(shared_path("models/tiny/tiny-deepseek2.gguf"), &m, &err) == 0) {
        CHECK(model_kv_dtype_check(m, KV_DTYPE_F32, &err) == 0);
        CHECK(model_kv_dtype_check(m, KV_DTYPE_F16, &err) == -1 && strstr(err.msg, "deepseek2"));
        CHECK(!strchr(err.msg, '\n'));
        gen_session g;
        CHECK(gen_init_as(&g, m, KV_DTYPE_BF16, NULL, 64, 16, &err) == -1);
        model_free(m);
    } else tu_missing_fixture("models/tiny/tiny-deepseek2.gguf");
    if (model_load(shared_path("models/stories260K.gguf"), &m, &err) == 0) {
        CHECK(model_kv_dtype_check(m, KV_DTYPE_Q8_0, &err) == -1 && strstr(err.msg, "multiple of 32"));
        CHECK(model_kv_dtype_check(m, KV_DTYPE_F16, &err) == 0);
        /* bytes per token follow the type: stories260K 5 layers x 2 x 4 heads x 8 */
        CHECK(model_kv_token_bytes_as(m, KV_DTYPE_F16) * 2 == model_kv_token_bytes(m));
        model_free(m);
    } else tu_missing_fixture("models/stories260K.gguf");
}

int main(void) {
    test_codecs();
    for (int hd = 32; hd <= 96; hd += 32) test_load_step(hd);
    test_load_step(40); /* K tiles transposed 16 dimensions at a time: a remainder of 8 */
    test_refusals();
    thread_pool *pool = pool_create(2);
    test_long_logits("models/tiny/tiny-llama.gguf", pool, ~0u);
    /* gemma2 (26 layers, the slow one): q8_0, the coarsest type; every type's load step is checked bit for
     * bit above, and each type runs gemma2's fixtures (test_gemma2_fixtures_kv_*) */
    test_long_logits("models/tiny/tiny-gemma2.gguf", pool, 1u << KV_DTYPE_Q8_0);
    pool_destroy(pool);
    return test_finish();
}
