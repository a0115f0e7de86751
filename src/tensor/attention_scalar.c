/* attention_scalar.c - kern_attention compiled for scalar (body in attention_impl.h). */
#include "tensor/attention.h"
void kern_attention_scalar(const attn_args *a);
#define ATTN_FN kern_attention_scalar
#include "tensor/attention_impl.h"
