/* attention_avx2.c - kern_attention and its split form compiled for avx2 (bodies in attention_impl.h). */
#include "tensor/attention.h"
void kern_attention_avx2(const attn_args *a);
void kern_attention_part_avx2(const attn_args *a, int seg, float *part);
void kern_attention_merge_avx2(const attn_args *a, const float *parts, int64_t part_stride);
#define ATTN_FN kern_attention_avx2
#define ATTN_PART_FN kern_attention_part_avx2
#define ATTN_MERGE_FN kern_attention_merge_avx2
#include "tensor/attention_impl.h"
