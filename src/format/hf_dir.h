/* hf_dir.h - a Hugging Face model directory read as a GGUF model: config.json
 * (hyper-parameters), *.safetensors (weights, sharded through
 * model.safetensors.index.json), tokenizer.json + tokenizer_config.json +
 * generation_config.json (vocabulary, chat template, special tokens, sampling
 * defaults), presented as a gguf_file in llama.cpp's layout (key names, tensor
 * names, tensor shapes and rope row order), so the model loader, the
 * tokenizer and `cinfer convert hf` read it like any GGUF.
 *
 * Weights are not copied: tensors point into the safetensors mappings, except
 * the few llama.cpp stores in another row order (Q/K of llama-style families,
 * permuted once into owned buffers). F32, F16 and BF16 weights only. Every
 * problem is a one-line error naming the file and the field or tensor. */
#ifndef CINFER_FORMAT_HF_DIR_H
#define CINFER_FORMAT_HF_DIR_H

#include <stdbool.h>

#include "format/gguf.h"

/* True if `path` is a directory holding a config.json. */
bool hf_is_model_dir(const char *path);
/* Opens the directory as a GGUF model (owned by the caller: gguf_close). */
int hf_dir_open(const char *dir, gguf_file **out, cf_err *err);
/* `cinfer convert hf`: the same key/values and tensors written as a GGUF file
 * (llama.cpp's layout; F32/F16/BF16 kept), through path.tmp and a rename. */
int hf_dir_convert(const char *dir, const char *out_path, cf_err *err);

#endif
