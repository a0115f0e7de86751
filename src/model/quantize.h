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

/* The type tensor `t` gets when a model is re-encoded to `target`: the target
 * for weight matrices (name ending in ".weight", n_dims >= 2, ne[0] a multiple
 * of the target's block size), F32 for everything else (norms, odd widths).
 * Target Q4_K means llama.cpp's Q4_K_M mix: output, attn_v and ffn_down
 * matrices get Q6_K. */
dtype quantize_tensor_type(const gguf_tensor *t, dtype target);

/* Re-encodes every tensor of `in_path` per quantize_tensor_type(), copying all
 * key/values and setting general.file_type. Streams row by row (memory: one
 * row); in_path == out_path is allowed (the output replaces it atomically).
 * Fails if a tensor's source type cannot be decoded (not computable). */
int gguf_quantize(const char *in_path, const char *out_path, dtype target, cf_err *err);

#endif
