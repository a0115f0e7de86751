/* attention_avx512.c - kern_attention compiled for avx512 (body in attention_impl.h). */
#include "tensor/attention.h"
void kern_attention_avx512(const attn_args *a);
#define ATTN_FN kern_attention_avx512
#include "tensor/attention_impl.h"
