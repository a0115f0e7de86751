/* resume.h - the server side of `cinfer.resume` (docs/serve.md "Resuming a stream"): a stream that
 * another worker started and lost is continued here. The request carries the token ids that worker
 * generated and how many bytes of their text reached the client; they are appended to the prompt
 * (prefilled, mostly from the prefix cache / store), counted as output (max_tokens, min_tokens,
 * usage) and fed through the output parsers and stream encoder with the output discarded, so the
 * events this server sends continue the first worker's (indices, open blocks, ids) without
 * repeating any of them.
 *
 * Untrusted input: every field is validated (400 naming cinfer.resume.*). Streams with n = 1 only;
 * not combinable with structured outputs or a reasoning budget (their engine state is not rebuilt). */
#ifndef CINFER_SERVE_RESUME_H
#define CINFER_SERVE_RESUME_H

#include <event2/buffer.h>

#include "serve/gen.h"

/* Parses `"cinfer":{"resume":{"tokens":[ids], "text_bytes":N, "id":"...", "created":N}}` (the whole
 * cinfer object as JSON text, may be NULL) into p->resume_*. Absent: 0 and nothing set. */
int resume_parse(const char *cinfer_json, gen_params *p, serve_error *err);

/* At the end of gen_job_prepare (prompt built, j->max_tokens set): checks the ids against the
 * vocabulary and the request, keeps the longest prefix of them whose text the client has whole,
 * appends it to the prompt and sets j->n_resumed, resume_text, resume_skip, max_tokens. */
int resume_prepare(gen_job *j, const gen_model *gm, serve_error *err);

#endif

/* With p->resume_id set, the response keeps the first worker's id and created time. Either way the
 * tool-call id seed becomes a hash of the (random) response id, so a resuming worker mints the same
 * tool-call ids as the first one (a Responses call_id in the final object matches the streamed one). */
void resume_adopt_id(const gen_params *p, char *id, size_t id_cap, int64_t *created, uint64_t *id_seed);

/* The SSE comment a router asked for (X-Cinfer-Stream-Ids) after the events of one read of choice 0
 * (or the opening events when `opening`): `: cinfer {"id","created","n","t","b"}` - the tokens t of
 * the read, which follow n earlier ones, and b bytes of output text the client has once the events
 * before it arrived. SSE clients ignore comment lines. */
int resume_comment(struct evbuffer *out, const gen_job *g, const char *id, int64_t created, bool opening);
