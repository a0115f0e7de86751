/* test_fp8.c - FP8 e4m3 weights with 128 x 128 block scales (DT_F8_B128).
 *
 * 1. Decoding: all 256 e4m3 codes through the scalar decoder against the
 *    format's definition computed in double (sign, 4-bit exponent bias 7,
 *    subnormals m * 2^-9, S.1111.111 NaN), and through every ISA's vector
 *    conversion (fp8_to_f32 over arrays of odd lengths, so both the vector
 *    body and the scalar tail run) bit for bit against the scalar decoder
 *    (except NaN codes, which the vector paths read as +-480).
 * 2. Matmul: every ISA the machine supports x odd shapes (n and k not
 *    multiples of 128 or of the vector width, partial scale blocks) x m = 1, 2
 *    (decode GEMV) and m > 2 (GEMM), 1 and 2 threads, against a float64
 *    reference built from the format definition; relative error bound
 *    2e-6 * sum |w x|, no write past y. Where decode takes the bf16 path
 *    (AVX-512 with VBMI + BF16, kernels_fp8_avx512.c) the reference rounds
 *    the activations of whole 64-element groups to bf16 (nearest even) first,
 *    as that path does, and keeps the same bound.
 * 3. Every ISA's f32 row dot (fp8_row_dot, the decode path of CPUs without
 *    the bf16 one) directly against the float64 reference. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "base/threadpool.h"
#include "tensor/kernels.h"
#include "tensor/kernels_impl.h"
#include "testutil.h"

static double e4m3_ref(uint8_t v) {
    int sign = v >> 7, e = (v >> 3) & 15, m = v & 7;
    if (e == 15 && m == 7) return NAN;
    double mag = e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
    return sign ? -mag : mag;
}

static void test_decode(void) {
    for (int v = 0; v < 256; v++) {
        double r = e4m3_ref((uint8_t)v);
        float f = kern_fp8_e4m3_to_f32((uint8_t)v);
        CHECKF(isnan(r) ? isnan(f) : (double)f == r && !signbit(f) == !signbit(r), "code 0x%02x: %g vs %g", v, f, r);
    }
    CHECK(kern_fp8_e4m3_to_f32(0x7e) == 448.0f && kern_fp8_e4m3_to_f32(0x01) == 0x1p-9f);
    const kern_ops *ops[] = {&kern_ops_scalar, &kern_ops_avx2, &kern_ops_avx512};
    uint8_t codes[256 + 37];
    for (int i = 0; i < (int)sizeof codes; i++) codes[i] = (uint8_t)(i * 37 + 11);
    for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
        if (!cpu_isa_supported((cpu_isa)isa)) continue;
        for (int64_t n = 0; n <= (int64_t)sizeof codes; n += 13) {
            float got[sizeof codes], want[sizeof codes];
            ops[isa]->fp8_to_f32(codes, got, n);
            kern_fp8_to_f32_scalar(codes, want, n);
            int bad = 0;
            for (int64_t j = 0; j < n; j++) /* vector paths read NaN codes as +-480 (no weight holds one) */
                bad += isnan(want[j]) ? !(isnan(got[j]) || fabsf(got[j]) == 480.0f) : memcmp(&got[j], &want[j], 4) != 0;
            CHECKF(bad == 0, "%s fp8_to_f32 n=%lld: %d codes differ", cpu_isa_name((cpu_isa)isa), (long long)n, bad);
        }
    }
}

/* x rounded to bf16, nearest even (no NaN or infinity in the tests). */
static float bf16_round(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

/* The float64 reference of output o for activation row xr; bf16 rounds the
 * activations of whole 64-groups like the bf16 decode path. */
static double ref_dot(const uint8_t *w, const float *scale, const float *xr, int64_t o, int64_t k, int bf16,
                      double *mag) {
    int64_t sc = (k + 127) / 128, jb = bf16 ? k / 64 * 64 : 0;
    double ref = 0;
    *mag = 0;
    for (int64_t j = 0; j < k; j++) {
        float xv = j < jb ? bf16_round(xr[j]) : xr[j];
        double t = e4m3_ref(w[o * k + j]) * scale[(o / 128) * sc + j / 128] * xv;
        ref += t;
        *mag += fabs(t);
    }
    return ref;
}

static uint32_t rng = 12345;
static uint32_t next(void) {
    rng = rng * 1664525u + 1013904223u;
    return rng >> 8;
}

/* The ISA's f32 row dot on every weight row (sc = k's block count). */
static void check_row_dot(cpu_isa isa, const uint8_t *w, const float *scale, const float *x, int64_t n, int64_t k) {
    const kern_ops *ops[] = {&kern_ops_scalar, &kern_ops_avx2, &kern_ops_avx512};
    int64_t sc = (k + 127) / 128;
    int bad = 0;
    for (int64_t o = 0; o < n; o++) {
        double mag, ref = ref_dot(w, scale, x, o, k, 0, &mag);
        float got = ops[isa]->fp8_row_dot(w + o * k, x, scale + (o / 128) * sc, k);
        bad += !(fabs(got - ref) <= 2e-6 * mag + 1e-30);
    }
    CHECKF(bad == 0, "%s fp8_row_dot n=%lld k=%lld: %d bad rows", cpu_isa_name(isa), (long long)n, (long long)k, bad);
}

static void check_shape(int64_t n, int64_t k, int64_t m, thread_pool *pools[2], kern_ctx *ctxs[2]) {
    int64_t sr = (n + 127) / 128, sc = (k + 127) / 128; /* scale rows, columns */
    uint8_t *w = malloc((size_t)(n * k));
    float *scale = malloc(sizeof(float) * (size_t)(sr * sc)), *x = malloc(sizeof(float) * (size_t)(m * k));
    float *y = malloc(sizeof(float) * (size_t)(m * n + 8));
    for (int64_t i = 0; i < n * k; i++) {
        uint8_t v = (uint8_t)next();
        w[i] = (v & 0x7f) == 0x7f ? (uint8_t)(v ^ 1) : v; /* no NaN codes in weights */
    }
    for (int64_t i = 0; i < sr * sc; i++)
        scale[i] = ldexpf(1.0f + (float)(next() % 1000) / 1000.0f, -(int)(next() % 8));
    for (int64_t i = 0; i < m * k; i++) x[i] = (float)((int)(next() % 2001) - 1000) / 997.0f;
    for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
        if (!cpu_isa_supported((cpu_isa)isa)) continue;
        cpu_isa_force((cpu_isa)isa);
        kern_weight kw;
        cf_err err;
        CHECKF(kern_weight_prepare_fp8(&kw, w, scale, n, k, &err) == 0, "%s", err.msg);
        for (int th = 0; th < 2; th++) {
            for (int64_t g = 0; g < m * n + 8; g++) y[g] = -777.0f;
            kern_matmul(ctxs[th], &kw, x, m, y);
            int bad = 0, bf16 = isa == CPU_ISA_AVX512 && cpu_has_avx512_vbmi_bf16();
            for (int64_t i = 0; i < m; i++)
                for (int64_t o = 0; o < n; o++) {
                    double mag, ref = ref_dot(w, scale, x + i * k, o, k, bf16, &mag);
                    if (!(fabs(y[i * n + o] - ref) <= 2e-6 * mag + 1e-30)) bad++;
                }
            for (int g = 0; g < 8; g++) bad += y[m * n + g] != -777.0f;
            if (m > 1) { /* batch invariance: row 0 alone gives bit-identical outputs */
                float *y1 = malloc(sizeof(float) * (size_t)n);
                kern_matmul(ctxs[th], &kw, x, 1, y1);
                for (int64_t o = 0; o < n; o++) bad += memcmp(&y1[o], &y[o], sizeof(float)) != 0;
                free(y1);
            }
            CHECKF(bad == 0, "%s n=%lld k=%lld m=%lld threads=%d: %d bad outputs", cpu_isa_name((cpu_isa)isa),
                   (long long)n, (long long)k, (long long)m, pool_size(pools[th]), bad);
        }
        if (m == 1) check_row_dot((cpu_isa)isa, w, scale, x, n, k);
    }
    free(w);
    free(scale);
    free(x);
    free(y);
}

int main(void) {
    test_decode();
    thread_pool *pools[2] = {pool_create(1), pool_create(2)};
    kern_ctx *ctxs[2] = {kern_ctx_create(pools[0], 8, 1024), kern_ctx_create(pools[1], 8, 1024)};
    static const int64_t ns[] = {1, 7, 129, 300};
    static const int64_t ks[] = {1, 15, 64, 128, 200, 513, 1000};
    static const int64_t ms[] = {1, 2, 3, 8};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof ks / sizeof ks[0]; b++)
            for (size_t c = 0; c < sizeof ms / sizeof ms[0]; c++) check_shape(ns[a], ks[b], ms[c], pools, ctxs);
    cpu_isa_force(cpu_isa_active());
    for (int i = 0; i < 2; i++) {
        kern_ctx_destroy(ctxs[i]);
        pool_destroy(pools[i]);
    }
    return test_finish();
}
