/* attention.h - causal attention of a chunk of query tokens of one sequence
 * against a paged KV cache, for one GQA group (n_q query heads sharing one
 * KV head).
 *
 * For query token t (position pos[t]) and head h:
 *   out[t][h] = sum_j softmax_j(s_thj) * V[j],  j in [j_lo(t), pos[t]]
 *   s_thj = cap(scale * q[t][h] . K[j]),  cap(x) = softcap*tanh(x/softcap)
 *   (identity when softcap == 0), j_lo(t) = max(0, pos[t] - window + 1) when
 *   window > 0 (sliding window), else 0.
 * f32 with a two-pass softmax (max, then exp/sum), like the float64 reference
 * in the tests.
 *
 * Method: keys are taken 16 at a time as a [head_dim][16] K tile (read in
 * place from the dimension-major K of a block, gathered only when a tile
 * crosses blocks) that every query row of the chunk multiplies with
 * broadcast FMAs (16 scores per head_dim FMAs, no horizontal sums). P.V
 * accumulates V rows with vector FMAs along head_dim.
 *
 * KV addressing (the paged cache is read in place): K is dimension-major per
 * block, element d of key j at blocks[j / bt][k_off + d * bt + j % bt]
 * (bt = block_tokens); V is token-major, row j at
 * blocks[j / bt] + v_off + (j % bt) * row_stride: the paged cache is
 * read in place. Scratch `scores` holds n_tok * n_q * (pos[n_tok-1] + 1)
 * floats. Dispatched on cpu_isa_active(); the ISA files are the same source
 * (attention_impl.h) compiled with different flags. */
#ifndef CINFER_TENSOR_ATTENTION_H
#define CINFER_TENSOR_ATTENTION_H

#include <stdint.h>

#define ATTN_MAX_CHUNK 16 /* query tokens per call */

typedef struct attn_args {
    const float *q; /* token t, head h at q + t*q_stride + h*head_dim */
    int64_t q_stride;
    float *out; /* same layout as q, with out_stride */
    int64_t out_stride;
    const int32_t *pos; /* n_tok positions, ascending by 1 */
    int n_tok; /* 1..ATTN_MAX_CHUNK */
    int n_q; /* query heads in the group */
    int head_dim;
    float *const *blocks; /* block table of the sequence */
    int block_tokens;
    int64_t k_off, v_off; /* element offsets of this layer's K/V head in a block */
    int64_t row_stride; /* V: elements between consecutive token rows */
    int window; /* 0 = full causal */
    int floor; /* keys at positions below it are not attended (0: none; <= pos[0]): bounded replay */
    float scale;
    float softcap; /* 0 = off */
    float *scores; /* scratch, see above */
} attn_args;

void kern_attention(const attn_args *a);

#endif
