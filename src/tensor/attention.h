/* attention.h - causal attention of a few query heads against a paged KV cache.
 *
 * One call computes, for n_q query heads that share one KV head (a GQA
 * group), out[h] = sum_j softmax_j(s_hj) * V[j] over key positions
 * j in [j_begin, j_end), with s_hj = cap(scale * q[h] . K[j]) where cap is
 * x -> softcap*tanh(x/softcap) when softcap > 0 (Gemma 2) and identity
 * otherwise. Computed in f32 with a two-pass softmax (max, then exp/sum),
 * like the float64 reference the tests use.
 *
 * KV addressing: row j of K lives at blocks[j / block_tokens] + k_off +
 * (j % block_tokens) * row_stride (same for V with v_off), so the caller's
 * paged cache (one block = all layers of block_tokens tokens) is read in
 * place. `scores` is caller scratch of n_q * j_end floats. Dispatched on
 * cpu_isa_active(); the ISA files are the same source (attention_impl.h)
 * compiled with different flags, using GCC vector extensions. */
#ifndef CINFER_TENSOR_ATTENTION_H
#define CINFER_TENSOR_ATTENTION_H

#include <stdint.h>

typedef struct attn_args {
    const float *q;            /* n_q x head_dim, contiguous */
    int n_q;
    int head_dim;
    float *const *blocks;      /* block table of the sequence */
    int block_tokens;
    int64_t k_off, v_off;      /* element offsets of this layer's K/V head in a block */
    int64_t row_stride;        /* elements between consecutive token rows */
    int j_begin, j_end;        /* key range [j_begin, j_end) */
    float scale;
    float softcap;             /* 0 = off */
    float *scores;             /* scratch: n_q * j_end */
    float *out;                /* n_q x head_dim */
} attn_args;

void kern_attention(const attn_args *a);

#endif
