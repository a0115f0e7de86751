/* vecmath_impl.h - 16-wide exp and the element-wise ops built on it, as
 * static inline functions for the per-ISA files (attention_*.c,
 * vecmath_*.c) to include; GCC vector types map to the ISA each file is
 * compiled for. exp: Cephes-style range reduction x = n*ln2 + r and a degree-6
 * polynomial; max relative error about 2 ulp over [-87, 88]; inputs below
 * -87.3 give 0, above 88.7 give +inf. Not a public header. */
#ifndef CINFER_TENSOR_VECMATH_IMPL_H
#define CINFER_TENSOR_VECMATH_IMPL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef float vm_f16 __attribute__((vector_size(64)));
typedef int32_t vm_i16 __attribute__((vector_size(64)));

static inline vm_f16 vm_splat(float x) { return (vm_f16){0} + x; }

/* mask lanes are -1 (take b) or 0 (take a) */
static inline vm_f16 vm_select(vm_i16 mask, vm_f16 a, vm_f16 b) {
    vm_i16 ai, bi;
    memcpy(&ai, &a, sizeof ai);
    memcpy(&bi, &b, sizeof bi);
    ai = (ai & ~mask) | (bi & mask);
    memcpy(&a, &ai, sizeof a);
    return a;
}

static inline vm_f16 vm_exp(vm_f16 x) {
    const vm_f16 hi = vm_splat(88.72283905206835f), lo = vm_splat(-87.33654475055310f);
    vm_i16 under = x<lo, over = x> hi;
    x = vm_select(over, x, hi);
    x = vm_select(under, x, lo);
    vm_f16 t = x * 1.44269504088896341f;
    /* n = round(t) via floor(t + 0.5) */
    t += 0.5f;
    vm_f16 n = __builtin_convertvector(__builtin_convertvector(t, vm_i16), vm_f16);
    n -= __builtin_convertvector((vm_i16)(n > t) & 1, vm_f16);
    vm_f16 r = x - n * 0.693359375f + n * 2.12194440e-4f;
    vm_f16 r2 = r * r;
    vm_f16 p = vm_splat(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r2 + r + 1.0f;
    vm_i16 e = (__builtin_convertvector(n, vm_i16) + 127) << 23;
    vm_f16 scale;
    memcpy(&scale, &e, sizeof scale);
    vm_f16 y = p * scale;
    y = vm_select(under, y, vm_splat(0.0f));
    y = vm_select(over, y, vm_splat(INFINITY));
    return y;
}

/* g[i] = silu(g[i]) * u[i] */
static inline void vm_silu_mul(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        vm_f16 gv, uv;
        memcpy(&gv, g + i, sizeof gv);
        memcpy(&uv, u + i, sizeof uv);
        gv = gv / (1.0f + vm_exp(-gv)) * uv;
        memcpy(g + i, &gv, sizeof gv);
    }
    for (; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* x[i] = exp(x[i] - mx); returns the sum */
static inline float vm_exp_sub_sum(float *x, int64_t n, float mx) {
    vm_f16 acc = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        vm_f16 v;
        memcpy(&v, x + i, sizeof v);
        v = vm_exp(v - mx);
        acc += v;
        memcpy(x + i, &v, sizeof v);
    }
    float s = 0.0f;
    for (int l = 0; l < 16; l++) s += acc[l];
    for (; i < n; i++) s += (x[i] = expf(x[i] - mx));
    return s;
}

#endif
