/* test_kernels_kq.c - bit-level checks of the K-quant integer matmul paths
 * (Q4_K, Q5_K, Q6_K, IQ4_XS), beside test_kernels.c's float64 bounds:
 *
 * 1. AVX-512: kern_matmul on the K-quant panels (kernels_kqp_avx512.c; Q4_K,
 *    Q5_K, IQ4_XS) equals,
 *    bit for bit, a scalar model of the arithmetic its header states, written
 *    here from the GGUF block formats: per super-block the exact integer
 *    isum = sum_s sc_s dot_s and imin (mins, or the q - 32 / table offsets
 *    folded in), then Q4_K/Q5_K acc = fma(isum, d dx, acc), acc = fma(-imin,
 *    dmin dx, acc); IQ4_XS acc = fma(isum', d dx, acc). Q6_K is not packed
 *    (it stays on the GGUF rows, kernels_q6k_avx512.c): checked to keep KL_ROWS.
 * 2. Every ISA: batch invariance. A product of m rows equals the same rows
 *    multiplied one at a time (decode) and in other splits, bit for bit, for
 *    odd n (panel padding), k of 1 and 3 super-blocks, m across the tile
 *    height (1..13) and 1 or 2 threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "tensor/kernels.h"
#include "tensor/kernels_impl.h"
#include "testutil.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float frand(void) { return (float)(rnd() >> 8) * (2.0f / 16777216.0f) - 1.0f; }

/* Random blocks: random bytes, fp16 fields set to sane scales. */
static void random_blocks(dtype t, uint8_t *dst, int64_t nb) {
    size_t bb = dtype_block_bytes((uint32_t)t);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = dst + (size_t)b * bb;
        for (size_t i = 0; i < bb; i++) blk[i] = (uint8_t)rnd();
        uint16_t d = f32_to_fp16(0.05f * frand()), dm = f32_to_fp16(0.02f * fabsf(frand()));
        if (t == DT_Q6_K) memcpy(blk + 208, &d, 2);
        else memcpy(blk, &d, 2);
        if (t == DT_Q4_K || t == DT_Q5_K) memcpy(blk + 2, &dm, 2);
    }
}

static const int iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* One block as signed integer weights v[e] with sub-block scales sc[s] (size
 * 256/16 or 256/32) and Q4_K/Q5_K mins: w = d sc v - dmin mn. */
typedef struct {
    int v[256], sc[16], mn[16], ssz; /* mn: Q4_K / Q5_K only (8), zero otherwise */
    float d, dmin;
} blk_int;

static void block_ints(dtype t, const uint8_t *b, blk_int *u) {
    memset(u, 0, sizeof *u);
    if (t == DT_Q4_K || t == DT_Q5_K) {
        uint8_t sc[8], mn[8];
        kq_scale_min_k4(b + 4, sc, mn);
        u->ssz = 32, u->d = fp16_to_f32((uint16_t)(b[0] | b[1] << 8)),
        u->dmin = fp16_to_f32((uint16_t)(b[2] | b[3] << 8));
        const uint8_t *qs = b + (t == DT_Q5_K ? 48 : 16), *qh = b + 16;
        for (int e = 0; e < 256; e++) {
            int s = e / 32, l = e % 32, q = (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 15;
            if (t == DT_Q5_K) q |= ((qh[l] >> s) & 1) << 4;
            u->v[e] = q;
        }
        for (int s = 0; s < 8; s++) u->sc[s] = sc[s], u->mn[s] = mn[s];
    } else { /* IQ4_XS */
        u->ssz = 32, u->d = fp16_to_f32((uint16_t)(b[0] | b[1] << 8));
        int sh = b[2] | b[3] << 8;
        for (int s = 0; s < 8; s++) {
            u->sc[s] = (((b[4 + s / 2] >> (4 * (s % 2))) & 15) | ((sh >> (2 * s)) & 3) << 4) - 32;
            for (int j = 0; j < 16; j++) {
                u->v[32 * s + j] = iq4_levels[b[8 + 16 * s + j] & 15];
                u->v[32 * s + 16 + j] = iq4_levels[b[8 + 16 * s + j] >> 4];
            }
        }
    }
}

/* The kernel's stated arithmetic for one output (row o of w, activation row x). */
static float model_dot(dtype t, const uint8_t *row, const int8_t *q, const float *dx, int64_t k) {
    float acc = 0.0f;
    blk_int u;
    for (int64_t B = 0; B < k / 256; B++) {
        block_ints(t, row + (size_t)B * dtype_block_bytes((uint32_t)t), &u);
        int64_t isum = 0, imin = 0;
        for (int s = 0; s < 256 / u.ssz; s++) {
            int64_t dot = 0, xs = 0;
            for (int e = s * u.ssz; e < (s + 1) * u.ssz; e++)
                dot += (int64_t)u.v[e] * q[B * 256 + e], xs += q[B * 256 + e];
            isum += u.sc[s] * dot;
            imin += u.mn[s] * xs;
        }
        float x = dx[B];
        if (t == DT_Q4_K || t == DT_Q5_K) {
            acc = fmaf((float)(int32_t)isum, u.d * x, acc);
            acc = fmaf(-(float)(int32_t)imin, u.dmin * x, acc);
        } else {
            acc = fmaf((float)(int32_t)isum, u.d * x, acc);
        }
    }
    return acc;
}

static const dtype types[] = {DT_Q4_K, DT_Q5_K, DT_Q6_K, DT_IQ4_XS};
/* The panel types (test_model_bits), a subset of types. */
static const dtype panel_types[] = {DT_Q4_K, DT_Q5_K, DT_IQ4_XS};

/* AVX-512 Q6_K stays on the GGUF row layout (the row kernel, every m). */
static void test_q6k_rows(void) {
    if (!cpu_isa_supported(CPU_ISA_AVX512)) return;
    cpu_isa_force(CPU_ISA_AVX512);
    const int64_t n = 17, k = 512;
    size_t rb = dtype_row_bytes(DT_Q6_K, k);
    uint8_t *w = malloc(rb * (size_t)n);
    CHECK(w != NULL);
    if (!w) return;
    random_blocks(DT_Q6_K, w, n * k / 256);
    CHECK(kern_weight_packed_size(DT_Q6_K, n, k) == 0);
    kern_weight kw;
    cf_err err;
    CHECKF(kern_weight_prepare(&kw, DT_Q6_K, w, n, k, &err) == 0, "prepare: %s", err.msg);
    CHECKF(kw.layout == KL_ROWS, "Q6_K packed (layout %d), want the GGUF rows", kw.layout);
    kern_weight_release(&kw);
    free(w);
}

static void test_model_bits(kern_ctx *ctx, const char *what_pool) {
    if (!cpu_isa_supported(CPU_ISA_AVX512)) return;
    cpu_isa_force(CPU_ISA_AVX512);
    static const int64_t ns[] = {1, 17, 48}, ks[] = {256, 768}, ms[] = {1, 5, 9};
    for (size_t ti = 0; ti < sizeof panel_types / sizeof panel_types[0]; ti++)
        for (size_t a = 0; a < 3; a++)
            for (size_t b = 0; b < 2; b++)
                for (size_t c = 0; c < 3; c++) {
                    dtype t = panel_types[ti];
                    int64_t n = ns[a], k = ks[b], m = ms[c];
                    size_t rb = dtype_row_bytes((uint32_t)t, k);
                    uint8_t *w = malloc(rb * (size_t)n);
                    float *x = malloc(sizeof(float) * (size_t)(m * k)), *y = malloc(sizeof(float) * (size_t)(m * n));
                    int8_t *q = malloc((size_t)k);
                    float *dx = malloc(sizeof(float) * (size_t)(k / 32));
                    int32_t *sums = malloc(sizeof(int32_t) * (size_t)(k / 32));
                    random_blocks(t, w, n * k / 256);
                    for (int64_t i = 0; i < m * k; i++) x[i] = frand() * (i % 61 == 0 ? 6.0f : 1.0f);
                    kern_weight kw;
                    cf_err err;
                    CHECKF(kern_weight_prepare(&kw, t, w, n, k, &err) == 0, "prepare: %s", err.msg);
                    CHECK(kw.layout == KL_P16);
                    kern_matmul(ctx, &kw, x, m, y);
                    int bad = 0;
                    for (int64_t i = 0; i < m; i++) {
                        kern_quantize_row_q8k(x + i * k, k, q, dx, sums);
                        for (int64_t o = 0; o < n; o++) {
                            float want = model_dot(t, w + (size_t)o * rb, q, dx, k), got = y[i * n + o];
                            if (memcmp(&want, &got, sizeof want) && !bad++)
                                fprintf(stderr, "  %s n=%lld k=%lld m=%lld %s: y[%lld][%lld] = %.9g, model %.9g\n",
                                        dtype_name((uint32_t)t), (long long)n, (long long)k, (long long)m, what_pool,
                                        (long long)i, (long long)o, got, want);
                        }
                    }
                    CHECKF(bad == 0, "%s: %d outputs not bitwise the stated arithmetic", dtype_name((uint32_t)t), bad);
                    kern_weight_release(&kw);
                    free(w), free(x), free(y), free(q), free(dx), free(sums);
                }
}

/* m rows at once vs one row at a time vs rows in chunks of 3, every ISA. */
static void test_batch_invariance(kern_ctx *ctx, const char *what_pool) {
    static const int64_t ns[] = {7, 33, 65}, ks[] = {256, 768};
    const int64_t m = 13;
    for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
        if (!cpu_isa_supported((cpu_isa)isa)) continue;
        cpu_isa_force((cpu_isa)isa);
        for (size_t ti = 0; ti < 4; ti++)
            for (size_t a = 0; a < 3; a++)
                for (size_t b = 0; b < 2; b++) {
                    dtype t = types[ti];
                    int64_t n = ns[a], k = ks[b];
                    size_t rb = dtype_row_bytes((uint32_t)t, k), ny = sizeof(float) * (size_t)(m * n);
                    uint8_t *w = malloc(rb * (size_t)n);
                    float *x = malloc(sizeof(float) * (size_t)(m * k)), *y = malloc(ny), *y1 = malloc(ny),
                          *y3 = malloc(ny);
                    random_blocks(t, w, n * k / 256);
                    for (int64_t i = 0; i < m * k; i++) x[i] = frand();
                    kern_weight kw;
                    cf_err err;
                    CHECKF(kern_weight_prepare(&kw, t, w, n, k, &err) == 0, "prepare: %s", err.msg);
                    kern_matmul(ctx, &kw, x, m, y);
                    for (int64_t i = 0; i < m; i++) kern_matmul(ctx, &kw, x + i * k, 1, y1 + i * n);
                    for (int64_t i = 0; i < m; i += 3)
                        kern_matmul(ctx, &kw, x + i * k, m - i < 3 ? m - i : 3, y3 + i * n);
                    CHECKF(!memcmp(y, y1, ny) && !memcmp(y, y3, ny),
                           "%s %s n=%lld k=%lld %s: a batch of %lld rows "
                           "is not bitwise the rows alone / in threes",
                           cpu_isa_name((cpu_isa)isa), dtype_name((uint32_t)t), (long long)n, (long long)k, what_pool,
                           (long long)m);
                    kern_weight_release(&kw);
                    free(w), free(x), free(y), free(y1), free(y3);
                }
    }
}

int main(void) {
    cpu_isa best = cpu_isa_active();
    thread_pool *pools[2] = {pool_create(1), pool_create(2)};
    CHECK(pools[0] && pools[1]);
    for (int th = 0; th < 2; th++) {
        kern_ctx *ctx = kern_ctx_create(pools[th], 16, 768);
        CHECK(ctx != NULL);
        if (!ctx) continue;
        const char *what = th ? "2 threads" : "1 thread";
        test_model_bits(ctx, what);
        if (th == 0) test_q6k_rows();
        test_batch_invariance(ctx, what);
        cpu_isa_force(best);
        kern_ctx_destroy(ctx);
    }
    pool_destroy(pools[0]), pool_destroy(pools[1]);
    return test_finish();
}
