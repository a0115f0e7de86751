/* quantize.h - re-encoding a GGUF model's weights to another dtype, and the
 * llama.cpp file-type numbers that record it (general.file_type).
 * Called by `cinfer quantize` and tests. */
#ifndef CINFER_MODEL_QUANTIZE_H
#define CINFER_MODEL_QUANTIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "format/gguf.h"
#include "tensor/dtype.h"

/* llama.cpp's LLAMA_FTYPE for a model whose weights are mostly `t`. */
uint32_t quantize_file_type(dtype t);

/* What llama.cpp's per-tensor choices depend on: the layer count (largest
 * "blk.N." + 1) and the query/KV head ratio (attn_q / attn_k rows of layer 0; 1
 * when absent). */
typedef struct quantize_mix {
    int n_layer;
    int n_gqa;
} quantize_mix;
quantize_mix quantize_mix_of(const gguf_file *f);

/* The type tensor `t` gets when a model is re-encoded to `target`: the target
 * for weight matrices (name ending in ".weight", n_dims >= 2, ne[0] a multiple
 * of the target's block size), F32 for everything else (norms, odd widths).
 * Targets Q4_K, Q5_K and IQ4_XS are llama.cpp's Q4_K_M, Q5_K_M and IQ4_XS mixes
 * (llama_tensor_get_type for dense models): output.weight Q6_K; attn_v and
 * ffn_down Q6_K in use_more_bits layers (first/last eighth, every third
 * between) for Q4_K_M / Q5_K_M; for IQ4_XS attn_v Q5_K when n_gqa >= 4 and
 * ffn_down Q5_K in the first eighth of the layers. */
dtype quantize_tensor_type(const gguf_tensor *t, dtype target, const quantize_mix *mix);

/* Re-encodes every tensor of `in_path` per quantize_tensor_type(), copying all
 * key/values and setting general.file_type. Streams row by row (memory: one
 * row); in_path == out_path is allowed (the output replaces it atomically).
 * Fails if a tensor's source type cannot be decoded (not computable). */
int gguf_quantize(const char *in_path, const char *out_path, dtype target, cf_err *err);

#endif
