/* oai_request.h - OpenAI request bodies -> gen_params (the generation core's
 * input), with OpenAI's validation rules and vLLM's extensions (top_k, min_p,
 * repetition_penalty, cache_salt, ignore_eos). Pure functions of the body
 * bytes and the limits: no model, no network (fuzzed by
 * tests/fuzz/fuzz_serve_request.c). Every rejection is a 400 serve_error
 * naming the field. Unknown fields are ignored, as OpenAI's servers do.
 *
 * This is the piece the protocol library (recipe/) will replace; the server
 * only depends on the gen_params it produces. */
#ifndef CINFER_SERVE_OAI_REQUEST_H
#define CINFER_SERVE_OAI_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "serve/gen.h"
#include "serve/serve_error.h"

typedef struct oai_limits {
    int32_t n_vocab; /* token ids (prompt arrays, logit_bias keys) must be below it */
    int32_t max_n;   /* largest n accepted */
} oai_limits;

/* POST /v1/completions (prompt: string, [string], [ids] or [[ids]] with one element). */
int oai_parse_completion(const char *body, size_t len, const oai_limits *lim, gen_params *out, serve_error *err);

/* POST /tokenize: {"prompt": text, "add_special_tokens": bool} or
 * {"messages": [...], "add_generation_prompt": bool}. Exactly one of
 * *prompt (malloc'd text) or *messages (a new reference) is set. */
int oai_parse_tokenize(const char *body, size_t len, char **prompt, size_t *prompt_len, json_t **messages,
                       bool *add_special, char **model, serve_error *err);
/* POST /detokenize: {"tokens": [ids]}. *ids is malloc'd. */
int oai_parse_detokenize(const char *body, size_t len, const oai_limits *lim, int32_t **ids, int32_t *n_ids,
                         char **model, serve_error *err);

#endif
