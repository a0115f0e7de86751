/* attention.h - causal attention of a chunk of query tokens of one sequence
 * against a paged KV cache, for one GQA group (n_q query heads sharing one
 * KV head), flash-attention style: no score matrix over the context.
 *
 * For query token t (position pos[t]) and head h (row r = t*n_q + h):
 *   out[t][h] = sum_j w_j V[j] / (sum_j w_j + sink),  j in [j_lo(t), pos[t]]
 *   w_j = exp(s_thj - M), sink = exp(sinks[h] - M) (0 without sinks),
 *   s_thj = cap(scale * q[t][h] . K[j]),  cap(x) = softcap*tanh(x/softcap)
 *   (identity when softcap == 0), j_lo(t) = max(0, pos[t] - window + 1) when
 *   window > 0 (sliding window), else 0. An attention sink (gpt-oss,
 *   DeepSeek V4 style) is a per-head logit that joins the softmax
 *   denominator with no value row.
 *
 * Segments (the unit of the KV split). The key axis is cut at absolute
 * positions into segments of ATTN_SEG keys. For every row, segment g gives
 * a partial state (m, l, acc): m = max score of the row's visible keys in
 * the segment, l = sum exp(s - m), acc = sum exp(s - m) V (two-pass softmax
 * inside the segment, keys 16 at a time). Partials are merged in ascending
 * segment order, starting from an empty state, by one function:
 *   M' = max(M, m); L' = L e^(M-M') + l e^(m-M'); O' = O e^(M-M') + acc e^(m-M')
 * and out = O / (L + sink). kern_attention does exactly that on one thread;
 * kern_attention_part + kern_attention_merge do the same arithmetic with the
 * segments computed anywhere (split-KV decode across the thread pool). A
 * row's result therefore depends only on its own query, position and keys:
 * not on the chunk it is in, the thread count, or whether it was split
 * (batch invariance).
 *
 * Inside a segment, keys are taken 16 at a time as a [head_dim][16] K tile
 * (read in place from the dimension-major K of a block, gathered only when a
 * tile crosses blocks) that every row multiplies with broadcast FMAs; P.V
 * accumulates V rows with vector FMAs along head_dim, two heads at a time.
 *
 * KV addressing (the paged cache is read in place): K is dimension-major per
 * block, element d of key j at blocks[j / bt][k_off + d * bt + j % bt]
 * (bt = block_tokens); V is token-major, row j at
 * blocks[j / bt] + v_off + (j % bt) * row_stride. Dispatched on
 * cpu_isa_active(); the ISA files are the same source (attention_impl.h)
 * compiled with different flags.
 *
 * Other KV element types (kv_dtype != KV_DTYPE_F32, tensor/kv_dtype.h): K and
 * V are both token-major encoded rows; key j's head starts head_bytes into
 * the row at blocks[j / bt] + k_off + (j % bt) * row_stride (V: v_off).
 * The load step decodes a segment's visible keys and values once into an
 * f32 tile of the scratch (K [head_dim][ATTN_SEG], V [ATTN_SEG][head_dim]:
 * one f32 block of ATTN_SEG tokens) and runs the f32 segment on it, so the
 * arithmetic after decoding is the f32 path's, and nothing beyond one
 * segment is ever converted or copied.
 *
 * Shared-row MQA (MLA absorbed, v_dim > 0, f32 cache only): K and V come
 * from one token-major row per key, key j's row at blocks[j / bt] + k_off +
 * (j % bt) * row_stride: K is the row's first head_dim floats, V its first
 * v_dim (<= head_dim) floats, so V's head is K's leading part (DeepSeek
 * V2/V3: K = [latent | rope], V = latent). Every query head of the call
 * shares that one K/V head. Each 16-key K tile is transposed once per call
 * into [head_dim][16] and used by every row, as the dimension-major path
 * reads it in place; everything after the scores is the same code with V
 * and the output rows v_dim wide (q rows stay head_dim apart). */
#ifndef CINFER_TENSOR_ATTENTION_H
#define CINFER_TENSOR_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ATTN_MAX_CHUNK 64 /* query tokens per call */
#define ATTN_SEG 128 /* keys per segment (a multiple of 16) */

/* Arithmetic of the dot products (attention.h top: Q.K and P.V).
 * ATTN_PREC_F32: f32 FMA on every ISA. ATTN_PREC_BF16: Q, K, the softmax
 * weights P and V rounded to bf16 (round to nearest even) and multiplied
 * with AVX-512 BF16 dot products (vdpbf16ps) into f32 sums; the softmax,
 * the running max/sum and the merge stay f32, and l sums the rounded P, so
 * the weights still sum to 1. Taken only where the CPU has avx512_bf16 and
 * the AVX-512 kernels are active: elsewhere BF16 runs as F32. Like F32, a
 * row's result depends only on its own query, position and keys (pairs of
 * keys are aligned to even absolute positions). */
typedef enum { ATTN_PREC_F32 = 0, ATTN_PREC_BF16 = 1 } attn_prec;

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
    int64_t row_stride; /* V (and K unless f32): elements (4-byte units) between consecutive token rows */
    int kv_dtype; /* kv_dtype (tensor/kv_dtype.h); 0 = f32 */
    int64_t head_bytes; /* non-f32: byte offset of this head inside a K/V row */
    int window; /* 0 = full causal */
    int floor; /* keys at positions below it are not attended (0: none; <= pos[0]): bounded replay */
    float scale;
    float softcap; /* 0 = off */
    const float *sinks; /* NULL, or n_q sink logits (one per query head of the group) */
    attn_prec prec; /* ATTN_PREC_F32 (0, the zero-initialised default) or ATTN_PREC_BF16 */
    int v_dim; /* 0: V rows head_dim wide in their own layout; > 0: shared-row MQA (top), f32 only, runs as F32;
                  out rows (token t, head h) at out + t*out_stride + h*v_dim */
    float *scratch; /* attn_scratch_floats(n_tok, n_q, head_dim) floats */
} attn_args;

/* Whether `prec` runs as itself on this CPU with the active kernels
 * (ATTN_PREC_BF16 needs AVX-512 kernels and avx512_bf16); else it runs as F32. */
bool attn_prec_native(attn_prec prec);
/* The precision a user gets without asking (`--attn-precision` absent on
 * serve / bench): ATTN_PREC_BF16 where it runs natively (AMX or AVX-512
 * BF16: about twice the f32 FMA rate, so long prefills keep pace with short
 * ones), else ATTN_PREC_F32. The engine option's zero value stays F32. */
attn_prec attn_prec_default(void);
/* "f32" / "bf16"; attn_prec_parse returns -1 for anything else. */
const char *attn_prec_name(attn_prec prec);
int attn_prec_parse(const char *s, attn_prec *out);
/* What `prec` runs as here, for logs: "f32", "bf16 (AMX)", "bf16 (AVX-512
 * BF16)" or "f32 (bf16 unsupported here)". */
const char *attn_prec_describe(attn_prec prec);

/* Scratch floats kern_attention / _part / _merge need for a call (either
 * precision: includes one segment's K and V converted for the BF16 path;
 * the last attn_kv_tile_floats: one decoded segment of a non-f32 cache). */
size_t attn_scratch_floats(int n_tok, int n_q, int head_dim);
/* Floats of the decoded K/V tile of one segment (the end of the scratch). */
size_t attn_kv_tile_floats(int head_dim);
/* Floats of one segment's partial state (kern_attention_part's output). */
size_t attn_part_floats(int n_tok, int n_q, int head_dim);
/* The segments [*first, *end) holding keys some row of the call sees. */
void attn_segments(const attn_args *a, int *first, int *end);

/* The whole attention of the call into a->out. */
void kern_attention(const attn_args *a);
/* Segment `seg`'s partial state of every row into part
 * (attn_part_floats floats; uses a->scratch). */
void kern_attention_part(const attn_args *a, int seg, float *part);
/* Merges the partials of segments attn_segments() first..end-1, the i-th at
 * parts + i * part_stride, in that order, into a->out (uses a->scratch). */
void kern_attention_merge(const attn_args *a, const float *parts, int64_t part_stride);

#endif
