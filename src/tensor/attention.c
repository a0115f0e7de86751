/* attention.c - dispatch of kern_attention to the active ISA's build. */
#include "tensor/attention.h"

#include "base/cpu.h"

void kern_attention_scalar(const attn_args *a);
void kern_attention_avx2(const attn_args *a);
void kern_attention_avx512(const attn_args *a);

void kern_attention(const attn_args *a) {
    switch (cpu_isa_active()) {
    case CPU_ISA_AVX512: kern_attention_avx512(a); break;
    case CPU_ISA_AVX2: kern_attention_avx2(a); break;
    default: kern_attention_scalar(a); break;
    }
}
