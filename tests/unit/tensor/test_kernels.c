/* test_kernels.c - kern_matmul / kern_dot_f32 / kern_axpy_f32 against float64
 * references, for every ISA the machine supports (forced with cpu_isa_force,
 * weights prepared after forcing), every computable weight type, shapes that
 * are not multiples of the block / vector / tile widths, and 1 and 2 threads.
 *
 * Tolerances, with S = sum_j |w_oj| |x_ij| for the output:
 *   float weights: |y - ref| <= 1e-5 S (BF16: either against x exactly or
 *                  against x rounded to bf16, the vdpbf16ps prefill path);
 *   quantized:     tight  |y - ref(W, Q8_0(x))| <= 1e-4 S, and
 *                  loose  |y - ref(W, x)| <= sum_j |w||x - Q8_0(x)| + 1e-4 S.
 *   dequantized types (Q4_1, Q5_0, Q5_1, Q2_K..Q6_K; weights are random blocks
 *                  with sane fp16 scales, W = their exact dequantization):
 *                  |y - ref(W, x)| <= 1e-5 S, as for float weights; Q4_K/Q5_K/Q6_K may
 *                  instead meet the quantized bounds with Q8_K(x) (one scale
 *                  per 256) in place of Q8_0(x): their AVX-512 / AVX2 integer paths;
 *                  IQ4_NL / MXFP4 likewise with Q8_0(x), IQ4_XS with Q8_K(x)
 *                  (their AVX-512 VNNI paths, every m).
 * Under AVX-512, Q8_0 / Q4_0 also run with AMX tiles where the CPU has them
 * (cpu_amx_force): the same bounds, and bitwise equal to the VNNI result.
 * A guard region after y catches writes past m*n. kern_dot_rows_f32 /
 * kern_axpy_rows_f32 must equal loops of kern_dot_f32 / kern_axpy_f32 bit for
 * bit, per ISA, for tile remainders in every dimension. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "tensor/kernels.h"
#include "testutil.h"

#define GUARD 64
#define SENTINEL 12345.0f

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / (1 << 23))) - 1.0f;
}

typedef struct {
    int64_t n, k, m;
    dtype t;
    void *wq; /* weights in type t (GGUF layout) */
    float *wd; /* dequantized weights [n][k] */
    float *x; /* activations [m][k], exactly sized (ASan catches over-reads) */
    float *xq; /* Q8_0 round trip of x (quantized types), Q8_K round trip (Q4_K, Q5_K, Q6_K) or bf16-rounded x */
    double *ref; /* sum wd * x */
    double *refq; /* sum wd * xq */
    double *S; /* sum |wd||x| */
    double *E; /* sum |wd||x - xq| */
} mm_case;

/* Random blocks of a dequantized type: random bytes, fp16 scale fields set to
 * sane values (offset, kind: 0 signed scale, 1 non-negative min, 2 signed min). */
static void random_blocks(dtype t, uint8_t *dst, int64_t nb) {
    static const struct {
        dtype t;
        int off[2], kind[2], nf;
    } f[] = {{DT_Q4_1, {0, 2}, {0, 2}, 2},   {DT_Q5_0, {0, 0}, {0, 0}, 1},   {DT_Q5_1, {0, 2}, {0, 2}, 2},
             {DT_Q2_K, {80, 82}, {0, 1}, 2}, {DT_Q3_K, {108, 0}, {0, 0}, 1}, {DT_Q4_K, {0, 2}, {0, 1}, 2},
             {DT_Q5_K, {0, 2}, {0, 1}, 2},   {DT_Q6_K, {208, 0}, {0, 0}, 1}, {DT_IQ4_NL, {0, 0}, {0, 0}, 1},
             {DT_IQ4_XS, {0, 0}, {0, 0}, 1}};
    size_t bb = dtype_block_bytes(t);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = dst + (size_t)b * bb;
        for (size_t i = 0; i < bb; i++) blk[i] = (uint8_t)(frand() * 128.0f + 128.0f);
        for (size_t e = 0; e < sizeof f / sizeof f[0]; e++)
            for (int j = 0; f[e].t == t && j < f[e].nf; j++) {
                float v = f[e].kind[j] == 1   ? 0.02f * fabsf(frand())
                          : f[e].kind[j] == 2 ? -fabsf(frand())
                                              : 0.05f * frand();
                uint16_t h = f32_to_fp16(v);
                memcpy(blk + f[e].off[j], &h, 2);
            }
        if (t == DT_MXFP4) blk[0] = (uint8_t)(118 + (int)(fabsf(frand()) * 8.0f)); /* E8M0: 2^-10 .. 2^-3 */
    }
}

/* llama.cpp's Q8_K activation rounding: one f32 scale amax/127 per 256, round half away. */
static void q8k_roundtrip(const float *x, float *y, int64_t k) {
    for (int64_t b = 0; b < k / 256; b++) {
        float amax = 0;
        for (int j = 0; j < 256; j++) amax = fmaxf(amax, fabsf(x[b * 256 + j]));
        float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
        for (int j = 0; j < 256; j++) y[b * 256 + j] = d * roundf(x[b * 256 + j] * id);
    }
}

/* Types whose AVX-512 path (every m) multiplies with Q8_0(x). */
static int is_iq4(dtype t) { return t == DT_IQ4_NL || t == DT_IQ4_XS || t == DT_MXFP4; }

static void case_init(mm_case *c, dtype t, int64_t n, int64_t k, int64_t m) {
    memset(c, 0, sizeof *c);
    c->t = t, c->n = n, c->k = k, c->m = m;
    size_t rb = dtype_row_bytes(t, k);
    c->wq = malloc(rb * (size_t)n);
    c->wd = malloc(sizeof(float) * (size_t)(n * k));
    float *tmp = malloc(sizeof(float) * (size_t)k);
    for (int64_t o = 0; o < n; o++) {
        float scale = 0.01f + 2.0f * (float)((o * 37) % 11) / 11.0f;
        for (int64_t j = 0; j < k; j++) tmp[j] = frand() * scale;
        if (o % 5 == 3 && k >= 32) memset(tmp, 0, 32 * sizeof(float)); /* an all-zero block */
        if (kq_is_dequant_type((uint32_t)t))
            random_blocks(t, (uint8_t *)c->wq + rb * (size_t)o, k / dtype_block_elems((uint32_t)t));
        else dtype_quantize_row(t, tmp, (char *)c->wq + rb * (size_t)o, k);
        dtype_dequantize_row(t, (char *)c->wq + rb * (size_t)o, c->wd + o * k, k);
    }
    free(tmp);
    c->x = malloc(sizeof(float) * (size_t)(m * k));
    c->xq = malloc(sizeof(float) * (size_t)(m * k));
    for (int64_t i = 0; i < m * k; i++) c->x[i] = frand() * (i % 97 == 0 ? 8.0f : 1.0f);
    if (m > 1 && k >= 64) memset(c->x + k + 32, 0, 32 * sizeof(float)); /* zero activation block */
    int quant = t == DT_Q8_0 || t == DT_Q4_0 || (is_iq4(t) && t != DT_IQ4_XS);
    for (int64_t i = 0; i < m; i++) {
        if (quant) {
            block_q8_0 *b = malloc(dtype_row_bytes(DT_Q8_0, k));
            dtype_quantize_row(DT_Q8_0, c->x + i * k, b, k);
            dtype_dequantize_row(DT_Q8_0, b, c->xq + i * k, k);
            free(b);
        } else {
            if (t == DT_Q4_K || t == DT_Q5_K || t == DT_Q6_K || t == DT_IQ4_XS)
                q8k_roundtrip(c->x + i * k, c->xq + i * k, k);
            else
                for (int64_t j = 0; j < k; j++) c->xq[i * k + j] = bf16_to_f32(f32_to_bf16(c->x[i * k + j]));
        }
    }
    size_t no = (size_t)(m * n);
    c->ref = malloc(sizeof(double) * no);
    c->refq = malloc(sizeof(double) * no);
    c->S = malloc(sizeof(double) * no);
    c->E = malloc(sizeof(double) * no);
    for (int64_t i = 0; i < m; i++)
        for (int64_t o = 0; o < n; o++) {
            double r = 0, rq = 0, s = 0, e = 0;
            const float *w = c->wd + o * k, *x = c->x + i * k, *xq = c->xq + i * k;
            for (int64_t j = 0; j < k; j++) {
                r += (double)w[j] * x[j];
                rq += (double)w[j] * xq[j];
                s += fabs((double)w[j] * x[j]);
                e += fabs((double)w[j]) * fabs((double)x[j] - xq[j]);
            }
            c->ref[i * n + o] = r, c->refq[i * n + o] = rq, c->S[i * n + o] = s, c->E[i * n + o] = e;
        }
}

static void case_free(mm_case *c) {
    free(c->wq), free(c->wd), free(c->x), free(c->xq);
    free(c->ref), free(c->refq), free(c->S), free(c->E);
}

/* Returns the number of bad outputs (reports the first). */
static int case_check(const mm_case *c, const float *y, const char *what) {
    int quant = c->t == DT_Q8_0 || c->t == DT_Q4_0, bad = 0;
    for (int64_t i = 0; i < c->m; i++)
        for (int64_t o = 0; o < c->n; o++) {
            size_t at = (size_t)(i * c->n + o);
            double v = y[at], S = c->S[at] + 1e-30, ok;
            if (quant) {
                ok = fabs(v - c->refq[at]) <= 1e-4 * S && fabs(v - c->ref[at]) <= c->E[at] + 1e-4 * S;
            } else {
                ok = fabs(v - c->ref[at]) <= 1e-5 * S;
                if (c->t == DT_BF16 && !ok) ok = fabs(v - c->refq[at]) <= 1e-5 * S;
                /* integer paths: Q8_K (Q4_K, Q5_K, Q6_K, IQ4_XS) or Q8_0 (IQ4_NL, MXFP4) activations */
                if ((c->t == DT_Q4_K || c->t == DT_Q5_K || c->t == DT_Q6_K || is_iq4(c->t)) && !ok)
                    ok = fabs(v - c->refq[at]) <= 1e-4 * S && fabs(v - c->ref[at]) <= c->E[at] + 1e-4 * S;
            }
            if (!ok || !isfinite(v)) {
                if (!bad)
                    fprintf(stderr, "  %s: y[%lld][%lld] = %.9g, ref %.9g, ref(q8 x) %.9g, S %.3g\n", what,
                            (long long)i, (long long)o, v, c->ref[at], c->refq[at], S);
                bad++;
            }
        }
    for (int g = 0; g < GUARD; g++)
        if (y[c->m * c->n + g] != SENTINEL) {
            fprintf(stderr, "  %s: wrote past the end of y (guard %d)\n", what, g);
            bad++;
            break;
        }
    return bad;
}

static void run_case(mm_case *c, thread_pool *pools[2], kern_ctx *ctxs[2]) {
    float *y = malloc(sizeof(float) * (size_t)(c->m * c->n + GUARD));
    float *yv = malloc(sizeof(float) * (size_t)(c->m * c->n)); /* the VNNI result, for the AMX comparison */
    for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
        if (!cpu_isa_supported((cpu_isa)isa)) continue;
        cpu_isa_force((cpu_isa)isa);
        kern_weight w;
        cf_err err;
        int rc = kern_weight_prepare(&w, c->t, c->wq, c->n, c->k, &err);
        CHECKF(rc == 0, "prepare: %s", err.msg);
        if (rc) continue;
        CHECK(w.isa == isa);
        /* avx512 Q8_0 / Q4_0: VNNI tiles, then AMX tiles where the CPU has them (bitwise equal) */
        int amx_runs = isa == CPU_ISA_AVX512 && (c->t == DT_Q8_0 || c->t == DT_Q4_0) && cpu_amx_supported() ? 2 : 1;
        for (int amx = 0; amx < amx_runs; amx++) {
            cpu_amx_force(amx == 1);
            for (int th = 0; th < 2; th++) {
                for (int64_t g = 0; g < c->m * c->n + GUARD; g++) y[g] = SENTINEL;
                kern_matmul(ctxs[th], &w, c->x, c->m, y);
                char what[128];
                snprintf(what, sizeof what, "%s%s %s n=%lld k=%lld m=%lld threads=%d", cpu_isa_name((cpu_isa)isa),
                         amx ? "+amx" : "", dtype_name(c->t), (long long)c->n, (long long)c->k, (long long)c->m,
                         pool_size(pools[th]));
                int bad = case_check(c, y, what);
                CHECKF(bad == 0, "%s: %d bad outputs", what, bad);
                if (amx == 0 && th == 0) memcpy(yv, y, sizeof(float) * (size_t)(c->m * c->n));
                else if (amx_runs == 2)
                    CHECKF(!memcmp(yv, y, sizeof(float) * (size_t)(c->m * c->n)), "%s: not bitwise the VNNI result",
                           what);
            }
        }
        cpu_amx_force(true);
        kern_weight_release(&w);
    }
    free(y);
    free(yv);
}

static void test_matmul(thread_pool *pools[2], kern_ctx *ctxs[2]) {
    static const dtype types[] = {DT_F32,  DT_F16,  DT_BF16, DT_Q8_0, DT_Q4_0, DT_Q4_K,   DT_Q6_K,   DT_Q5_K,
                                  DT_Q4_1, DT_Q5_0, DT_Q5_1, DT_Q2_K, DT_Q3_K, DT_IQ4_NL, DT_IQ4_XS, DT_MXFP4};
    static const int64_t ns[] = {1, 7, 31, 33, 48, 257};
    static const int64_t kq[] = {32, 96, 4128};
    static const int64_t kf[] = {1, 13, 70, 4128};
    static const int64_t kk[] = {256, 768, 4352}; /* K-quants; 4352 crosses a dequantization chunk */
    static const int64_t ms[] = {1, 2, 5, 9, 17, 64}; /* AMX (Q8_0 / Q4_0) from 7 rows: 9, 16 + 1 */
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        dtype t = types[ti];
        int quant = t == DT_Q8_0 || t == DT_Q4_0;
        int kquant = dtype_block_elems((uint32_t)t) == 256;
        const int64_t *ks = kquant ? kk : quant || kq_is_dequant_type((uint32_t)t) ? kq : kf;
        size_t nk = quant || kq_is_dequant_type((uint32_t)t) ? 3 : 4;
        for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
            for (size_t b = 0; b < nk; b++)
                for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
                    /* keep the run time sane: the biggest k only with a few shapes */
                    if (ks[b] > 4096 &&
                        !(ns[a] == 33 || ms[mi] <= 2 || (ns[a] == 257 && ms[mi] == 17) || (ns[a] == 7 && ms[mi] == 64)))
                        continue;
                    mm_case c;
                    case_init(&c, t, ns[a], ks[b], ms[mi]);
                    run_case(&c, pools, ctxs);
                    case_free(&c);
                }
        fprintf(stderr, "matmul %s done (%d failures so far)\n", dtype_name(t), test_failures);
    }
}

/* Products with more activation rows than one cache block (kernels.c MM_M_BLOCK_BYTES: 96
 * rows of k = 4128 quants, 48 of packed f32) run block by block; every row must come out
 * bitwise as in a call small enough for one block (batch invariance) and match the reference.
 * n = 17 takes the static row split (too few output panels for two threads), n = 65 the
 * (row block, output chunk) units; m = 250 leaves a partial last block. */
static void test_row_blocks(thread_pool *pools[2]) {
    static const dtype types[] = {DT_Q8_0, DT_Q4_0, DT_F32, DT_BF16, DT_Q4_K};
    static const int64_t ns[] = {17, 65};
    const int64_t m = 250, slice = 25;
    for (int th = 0; th < 2; th++) {
        kern_ctx *ctx = kern_ctx_create(pools[th], m, 4352);
        CHECK(ctx != NULL);
        if (!ctx) return;
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                mm_case c;
                case_init(&c, types[ti], ns[ni], types[ti] == DT_Q4_K ? 4352 : 4128, m);
                kern_weight w;
                cf_err err;
                CHECKF(kern_weight_prepare(&w, c.t, c.wq, c.n, c.k, &err) == 0, "prepare: %s", err.msg);
                float *y = malloc(sizeof(float) * (size_t)(m * c.n + GUARD)),
                      *ys = malloc(sizeof(float) * (size_t)(m * c.n));
                for (int64_t g = 0; g < m * c.n + GUARD; g++) y[g] = SENTINEL;
                kern_matmul(ctx, &w, c.x, m, y);
                for (int64_t i = 0; i < m; i += slice) kern_matmul(ctx, &w, c.x + i * c.k, slice, ys + i * c.n);
                char what[96];
                snprintf(what, sizeof what, "row blocks %s n=%lld k=%lld m=%lld threads=%d", dtype_name(c.t),
                         (long long)c.n, (long long)c.k, (long long)m, th + 1);
                CHECKF(case_check(&c, y, what) == 0, "%s: bad outputs", what);
                CHECKF(!memcmp(y, ys, sizeof(float) * (size_t)(m * c.n)), "%s: not bitwise the %lld-row calls", what,
                       (long long)slice);
                free(y), free(ys);
                kern_weight_release(&w);
                case_free(&c);
            }
        kern_ctx_destroy(ctx);
    }
}

static void test_prepare_errors(void) {
    kern_weight w;
    cf_err err;
    char buf[64] = {0};
    CHECK(kern_weight_prepare(&w, DT_Q8_0, buf, 1, 33, &err) != 0);
    CHECK(kern_weight_prepare(&w, (dtype)16, buf, 1, 256, &err) != 0);
    CHECK(kern_weight_prepare(&w, DT_F32, buf, 0, 4, &err) != 0);
    CHECK(kern_weight_prepare(&w, DT_F32, NULL, 1, 4, &err) != 0);
}

static void test_vector_ops(void) {
    static const int64_t ns[] = {0, 1, 7, 15, 16, 17, 31, 63, 64, 65, 100, 1000};
    for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
        if (!cpu_isa_supported((cpu_isa)isa)) continue;
        cpu_isa_force((cpu_isa)isa);
        for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
            int64_t n = ns[t];
            float *a = malloc(sizeof(float) * (size_t)(n + 1)), *b = malloc(sizeof(float) * (size_t)(n + 1));
            float *y = malloc(sizeof(float) * (size_t)(n + 1));
            double ref = 0, S = 0;
            for (int64_t j = 0; j < n; j++) {
                a[j] = frand(), b[j] = frand(), y[j] = frand();
                ref += (double)a[j] * b[j];
                S += fabs((double)a[j] * b[j]);
            }
            a[n] = b[n] = y[n] = SENTINEL;
            float d = kern_dot_f32(a, b, n);
            CHECKF(fabs(d - ref) <= 1e-6 * S + 1e-30, "%s dot n=%lld: %g vs %g", cpu_isa_name((cpu_isa)isa),
                   (long long)n, d, ref);
            float *y0 = malloc(sizeof(float) * (size_t)(n + 1));
            memcpy(y0, y, sizeof(float) * (size_t)(n + 1));
            kern_axpy_f32(0.75f, a, y, n);
            int bad = 0;
            for (int64_t j = 0; j < n; j++)
                if (fabs(y[j] - (y0[j] + 0.75 * a[j])) > 1e-6 * (fabs(y0[j]) + fabs(a[j]))) bad++;
            CHECKF(bad == 0 && y[n] == SENTINEL, "%s axpy n=%lld: %d bad", cpu_isa_name((cpu_isa)isa), (long long)n,
                   bad);
            free(a), free(b), free(y), free(y0);
        }
    }
}

/* A weight keeps using the kernels of the ISA it was prepared for, in both
 * directions (a scalar-prepared weight has no packed copy for AVX-512 kernels). */
static void test_isa_binding(kern_ctx *ctx, cpu_isa best) {
    mm_case c;
    case_init(&c, DT_Q4_0, 40, 96, 3);
    float *y = malloc(sizeof(float) * (size_t)(c.m * c.n + GUARD));
    const cpu_isa order[2][2] = {{best, CPU_ISA_SCALAR}, {CPU_ISA_SCALAR, best}};
    for (int d = 0; d < 2; d++) {
        cpu_isa_force(order[d][0]);
        kern_weight w;
        cf_err err;
        CHECK(kern_weight_prepare(&w, c.t, c.wq, c.n, c.k, &err) == 0);
        cpu_isa_force(order[d][1]);
        for (int64_t g = 0; g < c.m * c.n + GUARD; g++) y[g] = SENTINEL;
        kern_matmul(ctx, &w, c.x, c.m, y);
        CHECK(case_check(&c, y, "prepared under one ISA, run under another") == 0);
        kern_weight_release(&w);
    }
    cpu_isa_force(best);
    free(y);
    case_free(&c);
}

static void test_bandwidth_probe(thread_pool *pool) {
    double bw = kern_measure_read_bandwidth(pool, 4 << 20);
    CHECKF(isfinite(bw) && bw > 1e8, "bandwidth probe returned %g", bw);
    CHECK(kern_measure_read_bandwidth(pool, 100) == 0); /* below one 256-byte piece */
    /* both timings of one probe: the CPU-time rate is finite and positive too */
    kern_bandwidth both = kern_measure_read_bandwidth_both(pool, 4 << 20);
    CHECKF(isfinite(both.wall) && both.wall > 1e8, "wall bandwidth %g", both.wall);
    CHECKF(isfinite(both.cpu) && both.cpu > 1e8, "CPU-time bandwidth %g", both.cpu);
    kern_bandwidth none = kern_measure_read_bandwidth_both(pool, 100);
    CHECK(none.wall == 0 && none.cpu == 0);
    CHECK(kern_ctx_create(pool, 0, 32) == NULL);
    CHECK(kern_ctx_create(NULL, 1, 32) == NULL);
}

/* The row-pointer primitives against loops of the single ones: identical bits. */
static void test_row_ops(void) {
    static const int64_t ds[] = {1, 15, 16, 17, 63, 64, 80, 129, 512};
    enum { NQ = 7, NR = 8 };
    for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
        if (!cpu_isa_supported((cpu_isa)isa)) continue;
        cpu_isa_force((cpu_isa)isa);
        for (size_t t = 0; t < sizeof ds / sizeof ds[0]; t++) {
            int64_t d = ds[t];
            float *q = malloc(sizeof(float) * (size_t)(NQ * d)), *r = malloc(sizeof(float) * (size_t)(NR * d));
            float *y = malloc(sizeof(float) * (size_t)(NQ * d)), *y1 = malloc(sizeof(float) * (size_t)(NQ * d));
            float out[NQ * NR], p[NQ * NR];
            const float *rows[NR];
            for (int64_t j = 0; j < NQ * d; j++) q[j] = frand(), y[j] = y1[j] = frand();
            for (int64_t j = 0; j < NR * d; j++) r[j] = frand();
            for (int j = 0; j < NR; j++) rows[j] = r + (NR - 1 - j) * d; /* pointers, not a matrix */
            for (int j = 0; j < NQ * NR; j++) p[j] = frand();
            int bad = 0;
            for (int nq = 1; nq <= NQ; nq += 3)
                for (int nr = 1; nr <= NR; nr++) {
                    kern_dot_rows_f32(q, d, nq, rows, nr, d, out, NR);
                    for (int i = 0; i < nq; i++)
                        for (int j = 0; j < nr; j++) bad += out[i * NR + j] != kern_dot_f32(q + i * d, rows[j], d);
                }
            for (int nh = 1; nh <= NQ; nh += 2) {
                kern_axpy_rows_f32(p, NR, nh, rows, NR, d, y, d);
                for (int j = 0; j < NR; j++)
                    for (int h = 0; h < nh; h++) kern_axpy_f32(p[h * NR + j], rows[j], y1 + h * d, d);
                for (int64_t e = 0; e < NQ * d; e++) bad += y[e] != y1[e];
            }
            CHECKF(bad == 0, "%s row ops d=%lld: %d outputs differ", cpu_isa_name((cpu_isa)isa), (long long)d, bad);
            free(q), free(r), free(y), free(y1);
        }
    }
}

int main(void) {
    cpu_isa best = cpu_isa_active();
    fprintf(stderr, "best ISA: %s\n", cpu_isa_name(best));
    thread_pool *pools[2] = {pool_create(1), pool_create(2)};
    CHECK(pools[0] && pools[1]);
    kern_ctx *ctxs[2] = {kern_ctx_create(pools[0], 64, 4352), kern_ctx_create(pools[1], 64, 4352)};
    CHECK(ctxs[0] && ctxs[1]);
    test_prepare_errors();
    test_vector_ops();
    test_row_ops();
    test_matmul(pools, ctxs);
    cpu_isa_force(best);
    test_row_blocks(pools);
    test_isa_binding(ctxs[1], best);
    test_bandwidth_probe(pools[1]);
    kern_ctx_destroy(ctxs[0]), kern_ctx_destroy(ctxs[1]);
    pool_destroy(pools[0]), pool_destroy(pools[1]);
    return test_finish();
}
