/* test_dtype.c - fp16/bf16 conversions and the reference Q8_0/Q4_0 quantizers.
 *   fp16: exhaustive round trip over all 65536 halves (NaNs stay NaN), ties to
 *         even at the midpoints between adjacent halves, overflow to inf,
 *         subnormals.
 *   bf16: round trip of all 65536 values, ties to even, NaN stays NaN.
 *   Q8_0 / Q4_0: per-element round-trip error within half a quantization step,
 *         block layout sizes, the type table.
 *   Q4_1, Q5_0, Q5_1, Q2_K..Q6_K: dtype_dequantize_row bit-exact against
 *         gguf-py's numpy dequantization of random blocks
 *         (tests/data/kquant/<type>.bin, tests/oracles/kquant_fixtures.py). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/dtype.h"
#include "testutil.h"

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void test_fp16_roundtrip(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = fp16_to_f32((uint16_t)h);
        uint16_t back = f32_to_fp16(f);
        int is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (is_nan) {
            if (!isnan(f) || (back & 0x7c00) != 0x7c00 || !(back & 0x3ff)) bad++;
        } else if (back != h) {
            if (!bad) fprintf(stderr, "fp16 %04x -> %g -> %04x\n", h, f, back);
            bad++;
        }
    }
    CHECKF(bad == 0, "%d fp16 values did not round-trip", bad);
}

/* Midpoint between consecutive finite halves a < b (same sign, positive) must round to the even one. */
static void test_fp16_ties(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 0x7bff; h++) {
        double a = fp16_to_f32((uint16_t)h), b = fp16_to_f32((uint16_t)(h + 1));
        float mid = (float)((a + b) / 2); /* exact in f32: halves have <= 11 significant bits */
        if ((double)mid != (a + b) / 2) continue;
        uint16_t want = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        if (f32_to_fp16(mid) != want || f32_to_fp16(-mid) != (uint16_t)(want | 0x8000)) {
            if (!bad) fprintf(stderr, "fp16 tie %g -> %04x want %04x\n", mid, f32_to_fp16(mid), want);
            bad++;
        }
        /* just above / below the midpoint go up / down */
        if (f32_to_fp16(nextafterf(mid, INFINITY)) != h + 1 || f32_to_fp16(nextafterf(mid, 0)) != h) bad++;
    }
    CHECKF(bad == 0, "%d fp16 tie errors", bad);
    CHECK(f32_to_fp16(65504.0f) == 0x7bff);
    CHECK(f32_to_fp16(65519.0f) == 0x7bff);
    CHECK(f32_to_fp16(65520.0f) == 0x7c00);
    CHECK(f32_to_fp16(1e10f) == 0x7c00);
    CHECK(f32_to_fp16(-INFINITY) == 0xfc00);
    CHECK(f32_to_fp16(1e-10f) == 0);
    CHECK(f32_to_fp16(5.9604644775390625e-8f) == 1); /* smallest subnormal */
    CHECK(f32_to_fp16(2.98023223876953125e-8f) == 0); /* half of it: tie to even (0) */
    CHECK(fp16_to_f32(0x3c00) == 1.0f);
    CHECK(fp16_to_f32(0xc000) == -2.0f);
}

static void test_bf16(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = bf16_to_f32((uint16_t)h);
        uint16_t back = f32_to_bf16(f);
        if (isnan(f)) {
            if (!isnan(bf16_to_f32(back))) bad++;
        } else if (back != h) {
            bad++;
        }
    }
    CHECKF(bad == 0, "%d bf16 values did not round-trip", bad);
    /* ties: 1 + 2^-8 is halfway between 1 and 1 + 2^-7: even is 1 */
    CHECK(f32_to_bf16(bits_f32(0x3f808000u)) == 0x3f80);
    CHECK(f32_to_bf16(bits_f32(0x3f818000u)) == 0x3f82); /* odd below: rounds up */
    CHECK(f32_to_bf16(bits_f32(0x3f808001u)) == 0x3f81);
    CHECK(f32_to_bf16(bits_f32(0x3f807fffu)) == 0x3f80);
    CHECK(isnan(bf16_to_f32(f32_to_bf16(bits_f32(0x7f800001u))))); /* sNaN with low payload stays NaN */
}

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / (1 << 23))) - 1.0f;
}

static void test_quant_roundtrip(dtype t) {
    const int64_t n = 32 * 64;
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    void *q = malloc(dtype_row_bytes(t, n));
    for (int64_t i = 0; i < n; i++) x[i] = frand() * (float)(1 + (i / 32) % 7) * ((i / 32) % 13 == 5 ? 0.0f : 1.0f);
    dtype_quantize_row(t, x, q, n);
    dtype_dequantize_row(t, q, y, n);
    int bad = 0;
    for (int64_t b = 0; b < n / 32; b++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[b * 32 + j]));
        /* step = amax/127 (Q8_0) or amax/8 (Q4_0); error <= step/2 plus the fp16 rounding of d,
         * except Q4_0's clamp: -amax*sign(max) maps to 8 steps, stored as 7 (error one step) */
        double step = t == DT_Q8_0 ? amax / 127.0 : amax / 8.0;
        double tol = step * (t == DT_Q8_0 ? 0.5 : 1.0) + amax * 1e-3 + 1e-12;
        for (int j = 0; j < 32; j++)
            if (fabs((double)y[b * 32 + j] - x[b * 32 + j]) > tol) {
                if (!bad)
                    fprintf(stderr, "%s block %lld elem %d: %g -> %g (tol %g)\n", dtype_name(t), (long long)b, j,
                            x[b * 32 + j], y[b * 32 + j], tol);
                bad++;
            }
    }
    CHECKF(bad == 0, "%s: %d elements outside the round-trip bound", dtype_name(t), bad);
    /* quantizing the dequantized values again is (nearly) idempotent */
    void *q2 = malloc(dtype_row_bytes(t, n));
    float *z = malloc(sizeof(float) * n);
    dtype_quantize_row(t, y, q2, n);
    dtype_dequantize_row(t, q2, z, n);
    double maxd = 0, maxv = 0;
    for (int64_t i = 0; i < n; i++) maxd = fmax(maxd, fabs((double)z[i] - y[i])), maxv = fmax(maxv, fabs(y[i]));
    CHECKF(maxd <= 2e-3 * maxv, "%s re-quantization moved values by %g", dtype_name(t), maxd);
    free(x), free(y), free(q), free(q2), free(z);
}

/* The simple Q4_K / Q5_K / Q6_K / IQ4_XS quantizers: per 256-block relative
 * RMS error within what uniform rounding gives (Q4_K: range/15 steps, ~0.067 of
 * the RMS for uniform data; Q5_K: range/31; Q6_K: amax/31 steps, ~0.016; IQ4_XS:
 * 16 non-linear levels whose widest gap is 24/127 of the sub-block's amax, so
 * "step" is amax/8), max error within 1.5 steps of the sub-block, and an
 * all-zero block stays exactly zero. */
static void test_kquant_roundtrip(dtype t, double max_rel_rms) {
    const int64_t n = 256 * 16;
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    void *q = malloc(dtype_row_bytes(t, n));
    for (int64_t i = 0; i < n; i++)
        x[i] = frand() * (float)(1 + (i / 256) % 5) * ((i / 256) == 3 ? 0.0f : 1.0f) + ((i / 256) == 7 ? 0.5f : 0.0f);
    dtype_quantize_row(t, x, q, n);
    dtype_dequantize_row(t, q, y, n);
    double worst = 0;
    int bad = 0;
    int sub = t == DT_Q6_K ? 16 : 32;
    for (int64_t b = 0; b < n / 256; b++) {
        double e2 = 0, x2 = 0;
        for (int j = 0; j < 256; j++) {
            double d = (double)y[b * 256 + j] - x[b * 256 + j];
            e2 += d * d, x2 += (double)x[b * 256 + j] * x[b * 256 + j];
        }
        if (x2 == 0) {
            CHECKF(e2 == 0, "%s: zero block %lld not exactly zero", dtype_name(t), (long long)b);
            continue;
        }
        worst = fmax(worst, sqrt(e2 / x2));
        for (int s = 0; s < 256 / sub; s++) {
            float lo = 0, hi = 0;
            for (int j = 0; j < sub; j++)
                lo = fminf(lo, x[b * 256 + s * sub + j]), hi = fmaxf(hi, x[b * 256 + s * sub + j]);
            double step = t == DT_Q4_K   ? (hi - lo) / 15.0
                          : t == DT_Q5_K ? (hi - lo) / 31.0
                          : t == DT_Q6_K ? fmax(hi, -lo) / 31.0
                                         : fmax(hi, -lo) / 8.0;
            for (int j = 0; j < sub; j++)
                if (fabs((double)y[b * 256 + s * sub + j] - x[b * 256 + s * sub + j]) > 1.5 * step + 1e-6) bad++;
        }
    }
    fprintf(stderr, "%s quantizer: worst relative RMS error %.4f\n", dtype_name(t), worst);
    CHECKF(worst <= max_rel_rms, "%s: relative RMS error %.4f > %.3f", dtype_name(t), worst, max_rel_rms);
    CHECKF(bad == 0, "%s: %d elements more than 1.5 steps off", dtype_name(t), bad);
    free(x), free(y), free(q);
}

static void test_table(void) {
    CHECK(dtype_row_bytes(DT_Q8_0, 64) == 68);
    CHECK(dtype_row_bytes(DT_Q4_0, 64) == 36);
    CHECK(dtype_row_bytes(DT_Q8_0, 33) == 0);
    CHECK(dtype_row_bytes(DT_F16, 3) == 6);
    CHECK(dtype_computable(DT_BF16) && !dtype_computable(16));
    dtype t;
    CHECK(dtype_parse("Q4_0", &t) == 0 && t == DT_Q4_0);
    CHECK(dtype_parse("q4_1", &t) != 0);
    CHECK(dtype_parse("q5_k", &t) == 0 && t == DT_Q5_K);
    CHECK(dtype_parse("IQ4_XS", &t) == 0 && t == DT_IQ4_XS);
}

/* <type>.bin = nb raw blocks, then nb * block_elems little-endian f32 values. */
static void test_kquant_fixture(dtype t) {
    char rel[64];
    snprintf(rel, sizeof rel, "tests/data/kquant/%s.bin", dtype_name(t));
    size_t len = 0;
    char *buf = read_file(source_path(rel), &len);
    if (!buf) {
        tu_missing_fixture(rel);
        return;
    }
    size_t bb = dtype_block_bytes(t), per = bb + (size_t)dtype_block_elems(t) * 4;
    CHECKF(bb > 0 && len % per == 0 && len > 0, "%s: size %zu is not whole blocks", rel, len);
    if (bb > 0 && len % per == 0 && len > 0) {
        size_t nb = len / per, n = nb * (size_t)dtype_block_elems(t);
        float *got = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
        memcpy(want, buf + nb * bb, n * sizeof(float));
        dtype_dequantize_row(t, buf, got, (int64_t)n);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
            if (memcmp(&got[i], &want[i], 4) != 0) {
                if (!bad) fprintf(stderr, "%s: element %zu = %.9g, gguf-py %.9g\n", rel, i, got[i], want[i]);
                bad++;
            }
        CHECKF(bad == 0, "%s: %zu of %zu values differ from gguf-py", rel, bad, n);
        CHECK(dtype_computable(t));
        free(got), free(want);
    }
    free(buf);
}

int main(void) {
    test_fp16_roundtrip();
    test_fp16_ties();
    test_bf16();
    test_quant_roundtrip(DT_Q8_0);
    test_quant_roundtrip(DT_Q4_0);
    test_table();
    test_kquant_roundtrip(DT_Q4_K, 0.09);
    test_kquant_roundtrip(DT_Q5_K, 0.045);
    test_kquant_roundtrip(DT_Q6_K, 0.025);
    test_kquant_roundtrip(DT_IQ4_XS, 0.09);
    static const dtype kq[] = {DT_Q4_1, DT_Q5_0, DT_Q5_1,   DT_Q2_K,   DT_Q3_K, DT_Q4_K,
                               DT_Q5_K, DT_Q6_K, DT_IQ4_NL, DT_IQ4_XS, DT_MXFP4};
    for (size_t i = 0; i < sizeof kq / sizeof kq[0]; i++) test_kquant_fixture(kq[i]);
    return test_finish();
}
