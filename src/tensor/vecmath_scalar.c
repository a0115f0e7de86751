/* vecmath_scalar.c - vecmath kernels compiled for scalar (bodies in vecmath_impl.h). */
#include "tensor/vecmath_impl.h"

void kern_silu_mul_scalar(float *g, const float *u, int64_t n);
float kern_exp_sub_sum_scalar(float *x, int64_t n, float mx);

void kern_silu_mul_scalar(float *g, const float *u, int64_t n) { vm_silu_mul(g, u, n); }
float kern_exp_sub_sum_scalar(float *x, int64_t n, float mx) { return vm_exp_sub_sum(x, n, mx); }
