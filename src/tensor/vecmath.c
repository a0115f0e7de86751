/* vecmath.c - dispatch of the vecmath kernels to the active ISA's build. */
#include "tensor/vecmath.h"

#include "base/cpu.h"

#define DECLARE(isa)                                               \
    void kern_silu_mul_##isa(float *g, const float *u, int64_t n); \
    float kern_exp_sub_sum_##isa(float *x, int64_t n, float mx);
DECLARE(scalar)
DECLARE(avx2)
DECLARE(avx512)

void kern_silu_mul(float *g, const float *u, int64_t n) {
    switch (cpu_isa_active()) {
    case CPU_ISA_AVX512: kern_silu_mul_avx512(g, u, n); break;
    case CPU_ISA_AVX2: kern_silu_mul_avx2(g, u, n); break;
    default: kern_silu_mul_scalar(g, u, n); break;
    }
}

float kern_exp_sub_sum(float *x, int64_t n, float mx) {
    switch (cpu_isa_active()) {
    case CPU_ISA_AVX512: return kern_exp_sub_sum_avx512(x, n, mx);
    case CPU_ISA_AVX2: return kern_exp_sub_sum_avx2(x, n, mx);
    default: return kern_exp_sub_sum_scalar(x, n, mx);
    }
}
