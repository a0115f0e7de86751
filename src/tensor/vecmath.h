/* vecmath.h - dispatched element-wise kernels (vectorised exp and friends).
 * Bodies in vecmath_impl.h, compiled per ISA (vecmath_<isa>.c). */
#ifndef CINFER_TENSOR_VECMATH_H
#define CINFER_TENSOR_VECMATH_H

#include <stdint.h>

/* g[i] = silu(g[i]) * u[i] (SwiGLU) */
void kern_silu_mul(float *g, const float *u, int64_t n);
/* x[i] = exp(x[i] - mx); returns sum of the results (softmax helper) */
float kern_exp_sub_sum(float *x, int64_t n, float mx);

#endif
