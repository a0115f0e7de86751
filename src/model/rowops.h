/* rowops.h - the row operations every forward pass shares, in one place:
 * RMS norm, SwiGLU (separate and stacked gate|up), GeGLU, residual add, bias add,
 * RoPE tables (linear and YaRN context scaling as llama.cpp's ggml_rope_ext
 * computes them) and the rotation in both pair layouts (NORM: adjacent
 * pairs, NEOX: halves), over strided rows.
 *
 * Invariants: pure functions of their arguments (no state, no allocation);
 * each row's result depends only on that row, however the rows are split
 * over the pool (batch invariance). Work under ROWS_SERIAL_MAX elements runs
 * on the calling thread. */
#ifndef CINFER_MODEL_ROWOPS_H
#define CINFER_MODEL_ROWOPS_H

#include <stdint.h>

#include "base/threadpool.h"
#include "model/model.h"

#define ROWS_SERIAL_MAX 32768

/* cs[t * rope_dim + 2i], [.. + 2i + 1] = cos, sin of pair i at pos[t], times
 * attn_factor (and YaRN's 1 + 0.1 ln(factor) when YaRN extrapolates).
 * freq_factors: rope_dim/2 divisors (llama3 rope_freqs) or NULL. */
void rope_fill_table(const model_hparams *hp, const float *freq_factors, float attn_factor, const int32_t *pos,
                     int32_t n, float *cs);

/* Rotates rope_dim floats at x + t*tstride + h*hstride + off for n tokens
 * and `heads` heads, with the (cos, sin) table of rope_fill_table. */
void rows_rope(const float *cs, int rope_dim, rope_mode mode, float *x, int32_t n, int heads, int64_t tstride,
               int64_t hstride, int64_t off);

/* dst rows = rmsnorm(src rows) * w (w NULL: no weight); strides in floats (in place allowed). */
void rows_rmsnorm(thread_pool *pool, float eps, const float *src, int64_t src_stride, const float *w, float *dst,
                  int64_t dst_stride, int32_t n, int64_t width);
/* g rows = silu(g) * u. */
void rows_silu_mul(thread_pool *pool, float *g, const float *u, int32_t n, int64_t width);
/* g rows = gelu(g) * u, gelu in the tanh approximation (GeGLU). */
void rows_gelu_mul(thread_pool *pool, float *g, const float *u, int32_t n, int64_t width);
/* dst rows = silu(gate) * up where gu rows = [gate | up] (2 * width). */
void rows_swiglu_stacked(thread_pool *pool, float *dst, const float *gu, int32_t n, int64_t width);
/* dst rows += a (+ b when not NULL: dst += a + b, summed in that order). */
void rows_add(thread_pool *pool, float *dst, const float *a, const float *b, int32_t n, int64_t width);
/* y rows += bias (NULL: nothing). Serial. */
void rows_add_bias(float *y, const float *bias, int32_t n, int64_t width);

#endif
