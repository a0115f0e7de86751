/* chat_template.h - chat templates (the Jinja2 subset Hugging Face chat
 * templates use) rendered like transformers' apply_chat_template.
 *
 * A template is parsed once into an immutable AST (chat_template_parse) and
 * rendered any number of times, from any number of threads, against a JSON
 * context (chat_template_render): an object whose keys become template
 * variables - messages, tools, add_generation_prompt, bos_token, eos_token
 * and anything else. Rendering is bounded (output size, work, recursion);
 * every failure, including the template's own raise_exception(), is a
 * one-line cf_err "chat template line N: ...". See docs/chat-templates.md for
 * the supported subset and the known differences from Jinja2. */
#ifndef CINFER_TEXT_CHAT_TEMPLATE_H
#define CINFER_TEXT_CHAT_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "cinfer/recipe.h"
#include "format/gguf.h"

typedef struct chat_template chat_template;

/* The fallback used when a model carries no template: ChatML
 * (<|im_start|>role\ncontent<|im_end|>\n ..., then <|im_start|>assistant\n
 * when add_generation_prompt). */
extern const char chat_template_chatml[];

/* Parses template text (copied; need not be NUL-terminated). */
int chat_template_parse(const char *text, size_t len, chat_template **out, cf_err *err);
void chat_template_free(chat_template *t);
/* The template source as parsed (NUL-terminated). */
const char *chat_template_source(const chat_template *t);

/* Renders with strftime_now() using the current time (UTC). *out is malloc'd,
 * NUL-terminated; *out_len excludes the NUL. `context` must be a JSON object. */
int chat_template_render(const chat_template *t, const json_t *context, char **out, size_t *out_len, cf_err *err);
/* Same with a fixed clock for strftime_now (seconds since the Unix epoch, UTC). */
int chat_template_render_at(const chat_template *t, const json_t *context, int64_t now, char **out, size_t *out_len,
                            cf_err *err);

/* A render context built straight from recipe's canonical request (chat_template_req.c), without
 * a JSON round trip: the template variables `messages` (the request's messages: top-level system
 * text first, then the rest; roles system/developer -> "system", user,
 * assistant, tool; content = the TEXT parts concatenated; assistant `reasoning_content`,
 * `tool_calls` [{id, type: function, function: {name, arguments}}] with arguments as an object
 * when they are one; tool messages {role, content, tool_call_id}; `name`), `tools` (OpenAI's
 * shape, schemas parsed; only with tools and tool_choice other than none), the request's
 * chat_template_kwargs, `enable_thinking` (thinking / reasoning effort, unless the kwargs set
 * it), `add_generation_prompt`, `bos_token`, `eos_token`. Images are not rendered (the caller
 * refuses them). */
typedef struct chat_template_req {
    const recipe_request *req;
    const char *const *content; /* NULL, or one per req message: the content the template sees instead
                                     * (user-text sentinels); NULL entries keep the message's own */
    bool add_generation_prompt;
    const char *bos_token, *eos_token;
} chat_template_req;
int chat_template_render_req(const chat_template *t, const chat_template_req *in, char **out, size_t *out_len,
                             cf_err *err);
/* A message's content as the template sees it (TEXT parts concatenated; a tool message: its
 * result's), malloc'd; NULL when out of memory. */
char *chat_template_message_text(const recipe_message *m);
/* The template's enable_thinking for a request: 1 / 0, or -1 when the request says nothing
 * (thinking unset and no reasoning effort; effort none -> 0). */
int chat_template_thinking(const recipe_request *r);

/* Parses the GGUF key `tokenizer.chat_template`; when the key is absent the
 * ChatML fallback is used and *is_fallback (if non-NULL) is set. */
int chat_template_from_gguf(const gguf_file *f, chat_template **out, bool *is_fallback, cf_err *err);

#endif
