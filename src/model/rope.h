/* rope.h - rotary position tables shared by the forward passes
 * (forward_llama.c, forward_deepseek2.c): per token the (cos, sin) of every
 * rotated pair, with linear and YaRN context scaling as llama.cpp's
 * ggml_rope_ext computes them. Pure functions; no state. */
#ifndef CINFER_MODEL_ROPE_H
#define CINFER_MODEL_ROPE_H

#include <stdint.h>

#include "model/model.h"

/* cs[t * rope_dim + 2i], [.. + 2i + 1] = cos, sin of pair i at pos[t], times
 * attn_factor (and YaRN's 1 + 0.1 ln(factor) when YaRN extrapolates).
 * freq_factors: rope_dim/2 divisors (llama3 rope_freqs) or NULL. */
void rope_fill_table(const model_hparams *hp, const float *freq_factors, float attn_factor, const int32_t *pos,
                     int32_t n, float *cs);

#endif
