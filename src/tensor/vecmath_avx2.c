/* vecmath_avx2.c - vecmath kernels compiled for avx2 (bodies in vecmath_impl.h). */
#include "tensor/vecmath_impl.h"

void kern_silu_mul_avx2(float *g, const float *u, int64_t n);
float kern_exp_sub_sum_avx2(float *x, int64_t n, float mx);

void kern_silu_mul_avx2(float *g, const float *u, int64_t n) { vm_silu_mul(g, u, n); }
float kern_exp_sub_sum_avx2(float *x, int64_t n, float mx) { return vm_exp_sub_sum(x, n, mx); }
