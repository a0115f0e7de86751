/* api.h - the four HTTP APIs the serving benchmark speaks: request bodies
 * and the meaning of their stream events.
 *
 * Bodies always stream. Chat and completions ask for usage in the stream
 * (stream_options.include_usage); Messages and Responses always send it.
 * Cached input comes from usage.prompt_tokens_details.cached_tokens (Chat,
 * Completions), usage.cache_read_input_tokens (Messages; its input_tokens
 * excludes cache reads and writes, so prompt = input + read + creation) and
 * usage.input_tokens_details.cached_tokens (Responses). Replayed input
 * (cinfer's bounded replay: cached tokens recomputed to rebuild window state)
 * comes from prompt_tokens_details.replayed_tokens (Chat, Completions),
 * input_tokens_details.replayed_tokens (Responses) and
 * cinfer_replayed_input_tokens (Messages, inside input_tokens); 0 when absent.
 * Callers: runner.c (live runs), workload dump, tests. */
#ifndef CINFER_BENCHSERVE_API_H
#define CINFER_BENCHSERVE_API_H

#include <stddef.h>
#include <stdint.h>

#include "benchserve/bs_buf.h"

typedef enum { BS_API_CHAT, BS_API_COMPLETIONS, BS_API_MESSAGES, BS_API_RESPONSES } bs_api;

/* "chat" etc. -> api; -1 when unknown. */
int bs_api_parse(const char *name, bs_api *out);
const char *bs_api_name(bs_api a);
/* The endpoint path below /v1, e.g. "/chat/completions". */
const char *bs_api_path(bs_api a);

/* One conversation: an optional system text, then messages alternating
 * user (even index) / assistant (odd index), ending with a user message. A
 * token-id prompt (ids != NULL) replaces everything (completions only). */
typedef struct bs_prompt {
    const char *system;
    const char *const *msgs;
    size_t n_msgs;
    const int32_t *ids;
    size_t n_ids;
} bs_prompt;

typedef struct bs_gen_opts {
    const char *model;
    long max_tokens;
    double temperature; /* < 0: not sent */
    int ignore_eos; /* sends "ignore_eos": true (vLLM / cinfer extension) */
} bs_gen_opts;

/* Appends the JSON body of a streaming request. -1 on out-of-memory. */
int bs_api_body(bs_api a, const bs_prompt *p, const bs_gen_opts *g, bs_buf *out);

/* What a response's stream said so far. */
typedef struct bs_stream {
    bs_api api;
    long prompt_tokens, cached_tokens, replayed_tokens, output_tokens;
    int have_usage;
    int finished; /* saw the API's end: [DONE], message_stop, response.completed/incomplete */
    int failed; /* an error event or a malformed event */
    char error[160]; /* its message */
    bs_buf text; /* the answer text (not reasoning) */
} bs_stream;

/* Interprets one SSE event. Returns 1 when it carried generated text or
 * reasoning (a token event), 0 otherwise, -1 when the stream reports an error
 * or the event is not the JSON the API promises (details in s->error). */
int bs_stream_event(bs_stream *s, const char *event, const char *data, size_t len);
void bs_stream_free(bs_stream *s);

#endif
