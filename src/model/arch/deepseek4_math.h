/* deepseek4_math.h - the small numeric pieces of the DeepSeek V4 forward
 * pass, as pure functions so unit tests can check each one against a
 * float64 reference (tests/unit/model/test_ds4_math.c). Not a public
 * header. No allocation, no state; results depend only on the arguments. */
#ifndef CINFER_MODEL_DEEPSEEK4_MATH_H
#define CINFER_MODEL_DEEPSEEK4_MATH_H

#include <stdint.h>

/* mHC split of one token's mixes[(2 + n) * n] (the hc_fn projection of the
 * RMS-normalized flat streams): pre = sigmoid(m * s0 + b) + eps, post =
 * 2 sigmoid(m * s1 + b), comb[src * n + dst] = Sinkhorn(m * s2 + b): a
 * softmax over dst, + eps, a column (src) normalization, then iters - 1
 * rounds of row and column normalization, each sum + eps. */
void ds4_hc_split(const float *mixes, const float *scale, const float *base, int n, int iters, float eps, float *pre,
                  float *post, float *comb);

/* out[d] = sum_e softmax_e(score[e][d]) * kv[e][d] over n entries of width
 * w (the compressor's gated pooling; n >= 1). */
void ds4_softmax_pool(const float *const *kv, const float *const *score, int n, int w, float *out);

/* The k highest of score[0..n) into idx[0..k) (k <= n), highest first; equal
 * scores: the lower index first; O(n log k). Returns k. */
int ds4_topk(const float *score, int n, int k, int32_t *idx);

/* Attention of one head with an attention sink: out = sum_j p_j key_j where
 * p_j = exp(s_j - mx) / (sum_i exp(s_i - mx) + exp(sink - mx)), s_j = scale
 * q.key_j, mx = max_j s_j (values = keys, width d). s: n + 2 floats scratch. */
void ds4_attend_sink(const float *q, const float *const *keys, int n, int d, float scale, float sink, float *s,
                     float *out);
/* ds4_attend_sink for h heads sharing the keys: head i has query q + i*d,
 * sink sinks[i], output out + i*d; each head's result is bit-identical to
 * ds4_attend_sink's. s: h * (n + 2) floats scratch. */
void ds4_attend_sink_heads(const float *q, int h, const float *const *keys, int n, int d, float scale,
                           const float *sinks, float *s, float *out);

/* Rotates the last r dims of x (interleaved pairs (2i, 2i+1)) by the table
 * cs[2i] = cos, cs[2i+1] = sin; inverse: by the negative angle. */
void ds4_rope_tail(float *x, int d, int r, const float *cs, int inverse);

#endif
