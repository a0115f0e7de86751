/* attention_avx2.c - kern_attention compiled for avx2 (body in attention_impl.h). */
#include "tensor/attention.h"
void kern_attention_avx2(const attn_args *a);
#define ATTN_FN kern_attention_avx2
#include "tensor/attention_impl.h"
