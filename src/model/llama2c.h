/* llama2c.h - import of karpathy/llama2.c checkpoints (run.c format) and
 * their tokenizer files into GGUF, laid out as llama.cpp's
 * convert-llama2c-to-ggml does (architecture "llama", all tensors F32, weights
 * copied as-is: llama2.c and GGUF llama rope both rotate adjacent pairs).
 * Called by `cinfer convert llama2c` and tests. */
#ifndef CINFER_MODEL_LLAMA2C_H
#define CINFER_MODEL_LLAMA2C_H

#include <stdint.h>

#include "base/error.h"

/* The checkpoint's header (7 int32). vocab_size < 0 in the file means the
 * classifier is stored separately; here vocab_size is made positive and
 * `shared_classifier` records the sign. */
typedef struct llama2c_config {
    int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
    int shared_classifier;
} llama2c_config;

/* Converts MODEL.bin + TOKENIZER.bin into OUT.gguf (written atomically).
 * Sizes are checked against the config before anything is written; any
 * problem gives a one-line message naming the file. */
int llama2c_convert(const char *model_path, const char *tok_path, const char *out_path, cf_err *err);

#endif
