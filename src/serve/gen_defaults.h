/* gen_defaults.h - the model's own sampling defaults (llama.cpp's
 * general.sampling.* GGUF keys, which a Hugging Face directory's
 * generation_config.json becomes): what a request that sets no temperature /
 * top_p / top_k / min_p / repetition_penalty samples with, as vLLM's
 * `--generation-config auto`. A request's own value always wins. Read once at
 * start-up; afterwards read-only (no locking). */
#ifndef CINFER_SERVE_GEN_DEFAULTS_H
#define CINFER_SERVE_GEN_DEFAULTS_H

#include <jansson.h>
#include <stddef.h>

#include "base/error.h"
#include "cinfer/engine.h"
#include "format/gguf.h"

enum {
    GEN_DEF_TEMPERATURE = 1,
    GEN_DEF_TOP_P = 2,
    GEN_DEF_TOP_K = 4,
    GEN_DEF_MIN_P = 8,
    GEN_DEF_REPETITION_PENALTY = 16,
};

typedef struct gen_defaults {
    unsigned set; /* GEN_DEF_* bits: which fields the model gives */
    float temperature, top_p, min_p, repetition_penalty;
    int32_t top_k;
} gen_defaults;

/* Reads the keys present (absent ones stay unset). A value of the wrong type or
 * out of range (temperature < 0, top_p outside (0, 1], top_k < 0, min_p outside
 * [0, 1], repetition penalty <= 0) is a one-line error naming the key. */
int gen_defaults_read(const gguf_file *f, gen_defaults *d, cf_err *err);
/* Overwrites the fields the model gives (call before the request's values). */
void gen_defaults_apply(const gen_defaults *d, cinfer_sampling *s);
/* {"temperature": ..., ...} with the OpenAI field names (new reference; NULL: out of memory). */
json_t *gen_defaults_json(const gen_defaults *d);
/* {"sampling_defaults": gen_defaults_json(d)}: what /v1/models adds to each model (new reference). */
json_t *gen_defaults_model_fields(const gen_defaults *d);
/* "temperature=0.6 top_p=0.9" (or "none") into buf. */
void gen_defaults_describe(const gen_defaults *d, char *buf, size_t cap);

#endif
