/* openai_out.h - (openai_out.c) the OpenAI Chat / Completions output side shared by stream.c,
 * chat.c and codec.c: the streaming writer for RECIPE_API_CHAT (several choices, logprobs,
 * Completions chunks), the logprobs objects, the Completions response body. Internal. */
#ifndef CINFER_RECIPE_OPENAI_OUT_H
#define CINFER_RECIPE_OPENAI_OUT_H

#include "recipe/recipe_json.h"

typedef struct chat_stream chat_stream;
/* `id`: the response id (minted by the caller when info->id is NULL). NULL when out of memory. */
chat_stream *chat_stream_new(const recipe_stream_info *info, const char *id);
void chat_stream_free(chat_stream *c);
int chat_stream_event(chat_stream *c, const recipe_event *ev, recipe_buf *out, recipe_error *err);
bool chat_stream_done(const chat_stream *c);
/* The logprobs object of n tokens appended to b: Chat {"content":[...]} or Completions parallel
 * arrays, whose text_offset starts at *offset and leaves it after the last token (offset may be
 * NULL: from 0). 0, or -1 when out of memory (b->failed). */
int oai_logprobs_json(recipe_buf *b, const recipe_logprob *lp, size_t n, bool completion, int64_t *offset);
/* The Completions response body ("text_completion"). New reference or NULL + err. */
json_t *completions_response_encode(const recipe_response *r, recipe_error *err);

#endif
