/* hf_internal.h - what the Hugging Face directory reader's files share:
 * hf_config.c (config.json -> GGUF hyper-parameter keys, the family table),
 * hf_vocab.c (tokenizer files -> tokenizer.ggml.* keys) and hf_dir.c (tensor
 * names and the assembled gguf_file). Not for other modules. */
#ifndef CINFER_FORMAT_HF_INTERNAL_H
#define CINFER_FORMAT_HF_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "format/gguf.h"

/* One tensor-name rule: HF name with "{L}" for the layer index -> GGUF name. */
typedef struct hf_name_rule {
    const char *hf, *gguf;
} hf_name_rule;

/* A family: config.json model_type -> GGUF architecture and naming. Rules
 * whose HF name also holds "{E}" (an expert index) name one expert's matrix;
 * hf_dir.c stacks experts 0..n_expert-1 into one 3-D GGUF tensor. */
typedef struct hf_family {
    const char *model_type;
    const char *gguf_arch;
    bool permute_qk; /* llama.cpp stores Q/K rows interleaved per head (rope NORM) */
    bool skip_extra_layers; /* layers >= num_hidden_layers (DeepSeek's MTP layers) are not loaded */
    const hf_name_rule *const *rules; /* NULL-terminated list of NULL-terminated tables */
    /* family keys beyond the common ones (NULL: none); runs after them */
    int (*read_keys)(json_t *cfg, const char *arch, gguf_writer *w, int64_t *n_expert, cf_err *err);
} hf_family;

/* The hyper-parameters hf_dir.c needs after the keys are written. */
typedef struct hf_hparams {
    const hf_family *fam;
    int64_t n_layer, n_head, n_head_kv, vocab_size, n_expert;
} hf_hparams;

/* Reads <dir>/config.json, picks the family and sets general.* and <arch>.* keys. */
int hf_config_read(const char *dir, gguf_writer *w, hf_hparams *hp, cf_err *err);
/* Reads tokenizer.json (+ tokenizer_config.json, generation_config.json when
 * present) and sets tokenizer.ggml.* keys, tokenizer.chat_template and
 * general.sampling.*; the vocabulary is padded to vocab_size. */
int hf_vocab_read(const char *dir, int64_t vocab_size, gguf_writer *w, cf_err *err);

/* tokenizer.json alone, from memory (the fuzz harness): the tokenizer.ggml.*
 * keys it yields, or a one-line error starting "tokenizer.json: ". */
int hf_tokenizer_json_read(const char *text, size_t n, int64_t vocab_size, gguf_writer *w, cf_err *err);

/* A tokenizer.json vocabulary being assembled (owned strings; score NULL unless the model
 * has scores or hf_tokmodels.c made them). Token types are GGUF's (1 normal, 2 unknown,
 * 3 control, 4 user-defined, 5 unused, 6 byte). */
typedef struct hf_vocab {
    char **text;
    int32_t *type;
    double *score; /* as given (tokenizer.json numbers are doubles) */
    int64_t n;
} hf_vocab;

void hf_vocab_free(hf_vocab *v);
/* model.vocab ({text: id} or Unigram's [[text, score], ...]) plus added_tokens; ids must
 * cover 0..n-1. Errors name tokenizer.json and the field. */
int hf_vocab_collect(json_t *map, json_t *added, hf_vocab *v, cf_err *err);
/* tokenizer.ggml.tokens / token_type (/ scores), padded to vocab_size with unused "[PAD<i>]". */
int hf_vocab_write(const hf_vocab *v, int64_t vocab_size, gguf_writer *w, cf_err *err);
/* model.merges as tokenizer.ggml.merges ("a b" strings). */
int hf_merges_write(json_t *model, gguf_writer *w, cf_err *err);

/* hf_tokmodels.c: the SentencePiece-style kinds. A BPE model is "metaspace" when it has
 * byte_fallback, a Metaspace pre-tokenizer or a normalizer (llama-2's Prepend + Replace).
 * Each writes every tokenizer.ggml.* key of its kind or fails with one line. */
bool hf_tok_is_metaspace(json_t *tj);
int hf_tok_spm_bpe(json_t *tj, int64_t vocab_size, gguf_writer *w, hf_vocab *v, cf_err *err);
int hf_tok_wordpiece(json_t *tj, int64_t vocab_size, gguf_writer *w, hf_vocab *v, cf_err *err);
int hf_tok_unigram(json_t *tj, int64_t vocab_size, gguf_writer *w, hf_vocab *v, cf_err *err);
/* hf_normalizer.c: whether "normalizer" is SentencePiece's Precompiled (alone or first in a
 * Sequence), and its GGUF keys (see there). */
bool hf_tok_has_precompiled(json_t *tj);
int hf_tok_precompiled(json_t *tj, gguf_writer *w, cf_err *err);
/* post_processor (TemplateProcessing / BertProcessing / none) as add_bos / add_eos (bert:
 * add_sep) and their token ids. */
int hf_tok_write_post(json_t *tj, const hf_vocab *v, bool bert, gguf_writer *w, cf_err *err);

/* JSON file helpers: load <dir>/<name> (required or optional: *out NULL when
 * absent), and typed fields with one-line errors "<file>: field <name>: ...".
 * Getters return 0 if set, 1 if absent (out untouched), -1 on a bad type. */
int hf_json_load(const char *dir, const char *name, bool required, json_t **out, cf_err *err);
int hf_json_int(json_t *obj, const char *file, const char *field, int64_t *out, cf_err *err);
int hf_json_num(json_t *obj, const char *file, const char *field, double *out, cf_err *err);

#endif
