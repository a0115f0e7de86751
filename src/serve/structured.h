/* structured.h - (structured.c) what a request asks its output to match, as a grammar spec for the
 * constrained-decoding library (include/cinfer/grammar.h); docs/serve.md "Structured outputs".
 *
 * Sources, by precedence:
 *  1. a forced tool call (tool_choice required / named; Anthropic any / tool): the JSON the model's
 *     tool-call syntax puts after the opener that api_request.c appends to the prompt - one
 *     {"name", "arguments"} object (Llama 3: "parameters"; old Mistral: a one-element array of them)
 *     whose name is the named tool's (a const) or, for `required`, any offered tool's with the
 *     arguments matching that tool's schema (anyOf, one branch per tool); for the families that
 *     write the name outside JSON (DeepSeek, Mistral v11) the named tool's arguments;
 *  2. the output format: Chat response_format, Responses text.format, Messages output_config.format /
 *     output_format (json_object, json_schema);
 *  3. vLLM's guided_* / structured_outputs (json, regex, choice, grammar, json_object);
 *  4. strict tools (strict: true) under tool_choice auto: a lazy grammar for the calls the model
 *     chooses to make (structured_strict_tools).
 * A format and a guided_* field together are a 400 (two constraints); with a forced tool call the
 * call is the output, so a format (which shapes text content) has nothing to apply to and is
 * dropped - the one documented precedence, not a silent fallback.
 *
 * Ownership: a structured_spec owns its text (structured_spec_free). Plain data: usable on any thread. */
#ifndef CINFER_SERVE_STRUCTURED_H
#define CINFER_SERVE_STRUCTURED_H

#include <stdbool.h>
#include <stddef.h>

#include "cinfer/grammar.h"
#include "cinfer/recipe.h"
#include "serve/serve_error.h"

typedef struct structured_spec {
    cinfer_grammar_kind kind; /* 0: unconstrained */
    char *text; /* the spec text (owned, NUL-terminated; NULL for json_object) */
    size_t len;
    char param[64]; /* the request field it came from: compile errors (400) name it */
    const char *trigger; /* static; non-NULL: a lazy grammar that applies after each occurrence of this
                          * text in the output (cinfer_request.grammar_trigger) */
} structured_spec;

/* The tool-call openers of the parser families (api_request.c prompts them) decide what JSON
 * follows; this says which shape the forced call's grammar takes. */
typedef enum structured_call_shape {
    STRUCTURED_CALL_ARGS = 0, /* the opener ends where the arguments begin (DeepSeek, Mistral v11) */
    STRUCTURED_CALL_OBJECT, /* {"name": .., "arguments": ..} (Hermes after "<tool_call>\n") */
    STRUCTURED_CALL_OBJECT_PARAMS, /* {"name": .., "parameters": ..} (Llama 3, no opener) */
    STRUCTURED_CALL_ARRAY, /* [{"name": .., "arguments": ..}] (Mistral before v11, after [TOOL_CALLS]) */
} structured_call_shape;

void structured_spec_free(structured_spec *s);

/* From the output format and guided_* of r (source 2, 3 above); `api` names the fields in errors.
 * 0 (s->kind 0 when r asks for nothing), or -1 + a 400 (two constraints) / 500 (out of memory). */
int structured_from_request(const recipe_request *r, recipe_api api, structured_spec *s, serve_error *err);

/* A forced tool call's grammar: tool `tool` (index into r->tools; < 0: any of them) in `shape`. */
int structured_tool_call(const recipe_request *r, recipe_api api, int tool, structured_call_shape shape,
                         structured_spec *s, serve_error *err);

/* Strict tools (strict: true) under tool_choice auto: nothing when no offered tool is strict; for the
 * Hermes family a lazy grammar triggered by "<tool_call>": the {"name", "arguments"} object, strict
 * tools' arguments under their schemas, the others' any JSON object; the model may also answer in
 * text. Other families: 400 naming the first strict tool (their call syntax puts the name outside
 * JSON or needs an opener the model chooses). A format or guided_* field with strict tools: 400. */
int structured_strict_tools(const recipe_request *r, recipe_api api, recipe_parser_kind kind, structured_spec *s,
                            serve_error *err);

#endif
