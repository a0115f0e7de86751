/* oai_response.h - OpenAI wire formats out of the generation core's state:
 * error objects, /v1/models, non-streaming chat/completion responses,
 * streaming chunks (the JSON after "data: "). Every function returns a
 * malloc'd, NUL-terminated compact JSON text (caller frees) or NULL when out
 * of memory. Pure formatting: reads the job, changes nothing. Called by the
 * server (server.c) on the HTTP loop thread. */
#ifndef CINFER_SERVE_OAI_RESPONSE_H
#define CINFER_SERVE_OAI_RESPONSE_H

#include <stdint.h>

#include "base/strbuf.h"
#include "serve/gen.h"
#include "serve/serve_error.h"

typedef struct oai_meta {
    gen_kind kind;         /* chat.completion(.chunk) or text_completion */
    const char *id;        /* "chatcmpl-..." / "cmpl-..." */
    long long created;     /* Unix seconds */
    const char *model;     /* served model name */
    bool include_usage;    /* streaming: "usage": null on every chunk, a usage chunk at the end */
} oai_meta;

char *oai_error_json(const serve_error *e);
char *oai_models_json(const char *model, long long created);
char *oai_model_json(const char *model, long long created); /* GET /v1/models/{id} */

/* The whole response of a finished job. */
char *oai_response_json(const oai_meta *m, const gen_job *j, const tokenizer *tok);

/* Streaming chunks for choice c: the assistant role (chat only, first chunk),
 * the delta just read into choices[c].out (NULL result with *empty = true
 * when there is nothing to send), the finish chunk, and the final usage chunk. */
char *oai_chunk_role(const oai_meta *m, int32_t c);
char *oai_chunk_delta(const oai_meta *m, const gen_job *j, int32_t c, const tokenizer *tok, bool *empty);
char *oai_chunk_finish(const oai_meta *m, const gen_job *j, int32_t c);
/* The "logprobs" value of the tokens just read into choices[c].out (new reference), or NULL when
 * the request wants none or there are none (api_multi.c). */
json_t *oai_logprobs_delta(const oai_meta *m, const gen_job *j, int32_t c, const tokenizer *tok);

/* The per-token hot path: a text delta chunk without logprobs, written into
 * a caller-owned buffer that is reused across calls (it grows, it is never
 * shrunk; free p when done). Same JSON as oai_chunk_delta. Returns 0, or -1
 * when out of memory. Text must be valid UTF-8 (engine output is). */
typedef strbuf oai_buf;
int oai_chunk_text_into(const oai_meta *m, int32_t c, const char *text, size_t len, oai_buf *out);
char *oai_chunk_usage(const oai_meta *m, const gen_job *j);

#endif
