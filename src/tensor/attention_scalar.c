/* attention_scalar.c - kern_attention and its split form compiled for scalar (bodies in attention_impl.h). */
#include "tensor/attention.h"
void kern_attention_scalar(const attn_args *a);
void kern_attention_part_scalar(const attn_args *a, int seg, float *part);
void kern_attention_merge_scalar(const attn_args *a, const float *parts, int64_t part_stride);
#define ATTN_FN kern_attention_scalar
#define ATTN_PART_FN kern_attention_part_scalar
#define ATTN_MERGE_FN kern_attention_merge_scalar
#include "tensor/attention_impl.h"
