/* cinfer/recipe.h - protocol conversion and model-output parsing ("recipe").
 *
 * One canonical form for requests, responses and stream events, with codecs for
 * three wire formats (OpenAI Chat Completions, Anthropic Messages, OpenAI
 * Responses) in both directions, stateful SSE stream encoders, API-shaped error
 * bodies, and incremental parsers that split raw model text into reasoning,
 * content and tool calls. Depends only on src/base (jansson inside, never in this header:
 * the tree-typed entry points are internal, src/recipe/recipe_json.h). Used by
 * `cinfer serve` (src/serve/) and by the Python extension (python/).
 * docs/recipe.md has the mapping tables and the lossy cases.
 *
 * Ownership and lifetime:
 *  - A parsed recipe_request / recipe_response owns everything it points to: its
 *    strings, arrays and opaque JSON values (schemas, metadata, cache_control...,
 *    kept as compact JSON text, fields marked "JSON text") live in the object's
 *    own arena and stay valid until *_free()/reset(). Parsing reads the body
 *    text in one pass (src/recipe/rjson.c); nothing borrows from the caller.
 *  - Built by hand (e.g. the server filling a response from engine output):
 *    zero the struct with *_init(), set fields to strings that outlive the
 *    encode call (or copy them with recipe_request_strdup / recipe_response_strdup),
 *    allocate arrays with *_alloc().
 *  - Encoders append JSON or SSE text to a caller buffer; they never keep pointers into their inputs beyond the call, except
 *    the stream encoder, which copies what it needs.
 * Nothing here uses global mutable state; objects are not thread-safe but
 * distinct objects may be used from distinct threads. */
#ifndef CINFER_RECIPE_H
#define CINFER_RECIPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum recipe_api {
    RECIPE_API_CHAT = 0, /* OpenAI Chat Completions  POST /v1/chat/completions */
    RECIPE_API_MESSAGES, /* Anthropic Messages        POST /v1/messages */
    RECIPE_API_RESPONSES, /* OpenAI Responses          POST /v1/responses */
    RECIPE_API_COUNT
} recipe_api;

/* "chat" | "messages" | "responses" (also accepted: "openai", "anthropic"). -1 if unknown. */
int recipe_api_from_name(const char *name);
const char *recipe_api_name(recipe_api api);

/* Growable output buffer; the caller owns it, drains it (len = 0) and frees it. Out of memory is
 * sticky: the first append that cannot grow the buffer sets `failed`, and every later append
 * fails too (the data keeps what was appended before), so a writer may append many pieces and
 * check once at the end. recipe_buf_free clears it. */
typedef struct recipe_buf {
    char *data;
    size_t len, cap;
    bool failed;
} recipe_buf;
void recipe_buf_free(recipe_buf *b);
/* Appends s[0..n) and keeps the data NUL-terminated; 0, or -1 when out of memory now or before
 * (b->failed; the data unchanged). */
int recipe_buf_append(recipe_buf *b, const char *s, size_t n);

#define RECIPE_UNSET INT64_MIN /* integer option not given */
/* double options not given are NAN; tri-state options are -1 (unset), 0, 1 */

/* ---------------------------------------------------------------- errors */

typedef enum recipe_err_kind {
    RECIPE_ERR_INVALID_REQUEST = 0, /* 400 */
    RECIPE_ERR_CONTEXT_LENGTH, /* 400, "prompt is too long: N tokens > M maximum" */
    RECIPE_ERR_AUTHENTICATION, /* 401 */
    RECIPE_ERR_PERMISSION, /* 403 */
    RECIPE_ERR_NOT_FOUND, /* 404 (unknown model / response id) */
    RECIPE_ERR_TOO_LARGE, /* 413 */
    RECIPE_ERR_RATE_LIMIT, /* 429 (queue full) */
    RECIPE_ERR_SERVER, /* 500 */
    RECIPE_ERR_OVERLOADED, /* 503 OpenAI / 529 Anthropic */
    RECIPE_ERR_COUNT
} recipe_err_kind;

typedef struct recipe_error {
    recipe_err_kind kind;
    char param[64]; /* offending field path ("messages[2].content"), "" if none */
    char message[384]; /* one line, human-readable */
} recipe_error;

/* Fills `e` (if non-NULL) and returns -1. */
int recipe_fail(recipe_error *e, recipe_err_kind kind, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* HTTP status for an error in a given API (overloaded: 503 OpenAI, 529 Anthropic). */
int recipe_error_status(recipe_api api, const recipe_error *e);
/* The API's own error body, appended to `out` as compact JSON: OpenAI
 * {"error":{message,type,param,code}} (Chat and Responses), Anthropic
 * {"type":"error","error":{type,message}} (+ "request_id" when request_id is non-NULL).
 * 0, or -1 when out of memory. */
int recipe_error_body_text(recipe_api api, const recipe_error *e, const char *request_id, recipe_buf *out);

/* ---------------------------------------------------------------- canonical request */

typedef enum recipe_role {
    RECIPE_ROLE_SYSTEM = 0,
    RECIPE_ROLE_DEVELOPER, /* same meaning as system */
    RECIPE_ROLE_USER,
    RECIPE_ROLE_ASSISTANT,
    RECIPE_ROLE_TOOL, /* one tool result (a single RECIPE_PART_TOOL_RESULT part) */
} recipe_role;

/* The role as chat templates name it: system (developer too), user, assistant, tool. */
const char *recipe_role_template_name(recipe_role r);

typedef enum recipe_part_type {
    RECIPE_PART_TEXT = 0, /* text */
    RECIPE_PART_IMAGE, /* url (http(s) or data: URL) or media_type+data (base64), detail */
    RECIPE_PART_REASONING, /* text, signature (Anthropic) / encrypted (Responses), item_id */
    RECIPE_PART_REDACTED, /* Anthropic redacted_thinking: data */
    RECIPE_PART_TOOL_CALL, /* id (call id), name, args (JSON text), item_id (Responses fc_) */
    RECIPE_PART_TOOL_RESULT, /* id (call id), parts (text/image), is_error */
} recipe_part_type;

typedef struct recipe_part {
    recipe_part_type type;
    const char *text; /* TEXT, REASONING (NULL: none) */
    const char *signature; /* REASONING: Anthropic signature / Responses encrypted_content */
    const char *id; /* TOOL_CALL / TOOL_RESULT: call id */
    const char *item_id; /* Responses item id (msg_/rs_/fc_), kept for round trips */
    const char *name; /* TOOL_CALL */
    const char *args; /* TOOL_CALL: arguments as JSON text */
    const char *url; /* IMAGE: URL (also data: URLs from OpenAI formats) */
    const char *media_type; /* IMAGE: base64 source (Anthropic) */
    const char *data; /* IMAGE: base64 data; REDACTED: opaque data */
    const char *detail; /* IMAGE: auto|low|high */
    bool is_error; /* TOOL_RESULT */
    bool content_string; /* TOOL_RESULT: content was a plain string on the wire */
    const char *summary; /* REASONING: Responses summary array (JSON text), NULL if none */
    const char *cache_control; /* Anthropic cache_control (JSON text), dropped toward OpenAI */
    struct recipe_part *parts; /* TOOL_RESULT content */
    size_t n_parts;
} recipe_part;

typedef struct recipe_message {
    recipe_role role;
    recipe_part *parts;
    size_t n_parts;
    const char *name; /* optional participant name (Chat) */
    bool content_string; /* content was a plain string on the wire (round trips) */
    bool content_null; /* Chat assistant "content": null */
    bool top_level; /* system text from Anthropic `system` / Responses `instructions` */
    const char *refusal; /* Chat assistant refusal */
} recipe_message;

typedef struct recipe_tool {
    const char *name;
    const char *description; /* NULL: none */
    const char *parameters; /* JSON Schema (JSON text), NULL: none */
    int strict; /* tri-state */
    const char *cache_control; /* Anthropic (JSON text) */
} recipe_tool;

typedef enum recipe_tool_choice {
    RECIPE_TOOL_CHOICE_UNSET = 0,
    RECIPE_TOOL_CHOICE_NONE,
    RECIPE_TOOL_CHOICE_AUTO,
    RECIPE_TOOL_CHOICE_REQUIRED, /* Anthropic "any" */
    RECIPE_TOOL_CHOICE_NAMED, /* tool_choice_name */
} recipe_tool_choice;

typedef enum recipe_format {
    RECIPE_FORMAT_UNSET = 0,
    RECIPE_FORMAT_TEXT,
    RECIPE_FORMAT_JSON_OBJECT,
    RECIPE_FORMAT_JSON_SCHEMA,
} recipe_format;

/* vLLM's structured-output request kinds (recipe_request.guided_kind). */
typedef enum recipe_guided {
    RECIPE_GUIDED_NONE = 0,
    RECIPE_GUIDED_JSON, /* a JSON Schema */
    RECIPE_GUIDED_REGEX, /* a regular expression over the whole output */
    RECIPE_GUIDED_CHOICE, /* one of a list of strings */
    RECIPE_GUIDED_GRAMMAR, /* a context-free grammar (GBNF) */
    RECIPE_GUIDED_JSON_OBJECT, /* any JSON object (structured_outputs.json_object) */
} recipe_guided;

typedef enum recipe_effort {
    RECIPE_EFFORT_UNSET = 0,
    RECIPE_EFFORT_NONE,
    RECIPE_EFFORT_MINIMAL,
    RECIPE_EFFORT_LOW,
    RECIPE_EFFORT_MEDIUM,
    RECIPE_EFFORT_HIGH,
} recipe_effort;

typedef struct recipe_arena_chunk recipe_arena_chunk;
typedef struct recipe_arena {
    recipe_arena_chunk *head;
    const char *pool_lo, *pool_hi; /* internal: the string pool of the last parse (src/recipe/rjson.h) */
} recipe_arena;

typedef struct recipe_bias {
    int32_t token; /* < 2^31 */
    double bias;
} recipe_bias;

typedef struct recipe_request {
    recipe_api source; /* the format it was parsed from */
    const char *model;
    recipe_message *messages;
    size_t n_messages;
    bool input_string; /* Responses `input` was a plain string */

    recipe_tool *tools;
    size_t n_tools;
    recipe_tool_choice tool_choice;
    const char *tool_choice_name;
    int parallel_tool_calls; /* tri-state (Anthropic: !disable_parallel_tool_use) */

    recipe_format format; /* response_format / output_config.format / text.format */
    const char *format_name; /* json_schema name */
    const char *format_description;
    const char *format_schema; /* JSON text */
    int format_strict; /* tri-state */

    bool stream;
    int include_usage; /* tri-state; stream_options.include_usage */

    int64_t max_tokens; /* output limit incl. reasoning; RECIPE_UNSET */
    bool max_tokens_legacy; /* Chat: came as `max_tokens`, not `max_completion_tokens` */
    double temperature, top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty; /* NAN: unset */
    int64_t top_k, seed, n, top_logprobs; /* RECIPE_UNSET */
    int logprobs; /* tri-state */
    const char *logit_bias; /* JSON text (an object) */
    const char **stop; /* stop strings */
    size_t n_stop;
    bool stop_string; /* Chat `stop` was a single string */

    const char *user; /* Chat/Responses `user`, Anthropic metadata.user_id */
    const char *metadata; /* Chat/Responses metadata object (JSON text) */

    recipe_effort reasoning_effort; /* Chat reasoning_effort, Responses reasoning.effort */
    const char *reasoning_summary; /* Responses reasoning.summary */
    int thinking; /* tri-state: Anthropic thinking enabled/disabled, DeepSeek `thinking` */
    bool thinking_adaptive; /* Anthropic {"type":"adaptive"} */
    int64_t thinking_budget; /* Anthropic budget_tokens; RECIPE_UNSET */
    const char *chat_template_kwargs; /* JSON text (enable_thinking / thinking flags for templates) */

    const char *cache_salt; /* vLLM extension: prefix-cache isolation */
    /* vLLM sampling extensions (top-level or through the SDKs' extra_body), accepted by every
     * format and re-emitted by every request encoder (docs/recipe.md "Extensions") */
    int64_t min_tokens; /* RECIPE_UNSET; >= 0: EOS and stop_token_ids are not honoured before it */
    int ignore_eos; /* tri-state */
    int include_stop_str_in_output; /* tri-state */
    int skip_special_tokens; /* tri-state (vLLM default: true) */
    const int32_t *stop_token_ids; /* token ids that end generation (>= 0) */
    size_t n_stop_token_ids;
    int64_t priority; /* RECIPE_UNSET; lower = scheduled first */
    /* vLLM structured outputs (docs/recipe.md "Structured outputs"): guided_json / guided_regex /
     * guided_choice / guided_grammar, or the `structured_outputs` object ({json | regex | choice |
     * grammar | json_object}); at most one of them (else 400). Checked for shape here (a schema is an
     * object or a string holding one, a regex / grammar a string, choice a non-empty array of
     * strings); whether the server can compile it is the caller's business. */
    recipe_guided guided_kind;
    const char *guided_field; /* where it came from ("guided_json", "structured_outputs.regex"...), NULL: none */
    const char *guided; /* the value as given (JSON text), re-emitted by the encoders */
    const char *guided_text; /* JSON: the schema as JSON text; REGEX: the pattern; GRAMMAR: the grammar */
    const char **guided_choices; /* CHOICE: the strings */
    size_t n_guided_choices;
    /* logit_bias (Chat) parsed: keys are canonical non-negative decimal token ids ("0", "17"; not
     * "01", " 1", "-0", "+1"), values numbers in [-100, 100]; the vocabulary bound is the caller's */
    const recipe_bias *bias;
    size_t n_bias;
    const char *traffic_class; /* cinfer extension: `"cinfer":{"traffic_class":...}` as text */
    int swa_replay; /* cinfer extension `"cinfer":{"swa_replay":bool}`: -1 absent, 0 false (exact), 1 true */
    const char *cinfer; /* the whole `cinfer` object (JSON text), re-emitted as is */

    /* OpenAI Completions only (RECIPE_PARSE_COMPLETIONS): the prompt instead of messages */
    bool completion;
    const char *prompt; /* text prompt (NUL-terminated, prompt_len bytes); NULL: token ids */
    size_t prompt_len;
    const int32_t *prompt_ids; /* token-id prompt (each >= 0; the vocabulary bound is the caller's) */
    size_t n_prompt_ids;
    int echo; /* tri-state */
    const char *suffix; /* text after the insertion point (NULL: none) */
    int64_t best_of; /* RECIPE_UNSET */

    /* Responses only */
    const char *previous_response_id;
    int store; /* tri-state */
    const char *include; /* JSON text (an array) */
    const char *truncation;

    /* owner of everything above */
    recipe_arena arena;
} recipe_request;

void recipe_request_init(recipe_request *r);
/* Releases everything; leaves an initialized (empty) request that can be parsed into again.
 * Keeps one arena chunk so that a reused request does not allocate on the next parse. */
void recipe_request_reset(recipe_request *r);
void recipe_request_free(recipe_request *r);
/* Arena helpers for building a request by hand (memory freed with the request). */
void *recipe_request_alloc(recipe_request *r, size_t bytes);
const char *recipe_request_strdup(recipe_request *r, const char *s);

#define RECIPE_PARSE_COUNT_TOKENS 1u /* Messages count_tokens: max_tokens may be absent */
/* With RECIPE_API_CHAT: the body is an OpenAI Completions request (POST /v1/completions): `prompt`
 * (a string, token ids, or a one-element list of either; more than one prompt: 400), `logprobs`
 * an integer (-> logprobs = 1, top_logprobs), `echo`, `suffix`, `best_of`, and the sampling and
 * extension fields of Chat. Sets `completion`; no messages. The request encoders refuse it. */
#define RECIPE_PARSE_COMPLETIONS 2u

/* Parses the JSON text body[0..len) (an object in `api`'s request format) into `out`
 * (which must be initialized; it is reset first). The text is not referenced afterwards.
 * flags: RECIPE_PARSE_*. On failure returns -1, fills err (kind + message + param; invalid
 * JSON is RECIPE_ERR_INVALID_REQUEST "the body is not valid JSON: <reason> at byte N") and
 * leaves `out` reset. The fast path: one pass, no JSON tree outside the request's arena. */
int recipe_request_parse_text(recipe_api api, const char *body, size_t len, unsigned flags, recipe_request *out,
                              recipe_error *err);
/* Encodes a canonical request as `api`'s request body: compact JSON text appended to `out` (no
 * JSON tree is built). 0, or -1 + err (e.g. no messages) with out unchanged. Lossy cases:
 * docs/recipe.md. */
int recipe_request_encode_text(recipe_api api, const recipe_request *req, recipe_buf *out, recipe_error *err);

/* ---------------------------------------------------------------- canonical response */

typedef enum recipe_finish {
    RECIPE_FINISH_NONE = 0, /* not finished (stream) */
    RECIPE_FINISH_EOS, /* stop / end_turn / completed */
    RECIPE_FINISH_STOP_STRING, /* stop / stop_sequence(+string) / completed */
    RECIPE_FINISH_LENGTH, /* length / max_tokens / incomplete max_output_tokens */
    RECIPE_FINISH_TOOL_CALLS, /* tool_calls / tool_use / completed + function_call items */
    RECIPE_FINISH_CONTENT_FILTER, /* content_filter / refusal / incomplete content_filter */
    RECIPE_FINISH_ERROR, /* error chunk / error event / failed */
    RECIPE_FINISH_CANCELLED, /* stopped by the server (shutdown deadline): Chat / Completions "abort" (vLLM);
                                * Anthropic max_tokens, Responses incomplete */
} recipe_finish;

typedef struct recipe_usage {
    int64_t prompt; /* P: all prompt tokens, cached included */
    int64_t cache_read; /* R: prefix-cache hits */
    int64_t replayed; /* cinfer: cached prompt tokens recomputed by bounded replay (not in R; 0: none) */
    int64_t cache_write; /* W: explicit cache writes (0 for an automatic prefix cache) */
    int64_t output; /* O: generated tokens, reasoning included */
    int64_t reasoning; /* K */
    int64_t accepted_draft; /* generated tokens that speculative decoding drafted and the model accepted
                             * (written when > 0: Chat / Completions
                             * completion_tokens_details.accepted_prediction_tokens, Responses
                             * output_tokens_details.accepted_prediction_tokens, Messages
                             * cinfer_accepted_prediction_tokens) */
} recipe_usage;

/* Log-probabilities of one generated token (Chat logprobs.content[], Completions logprobs). The
 * token is given as its bytes, which may be a piece of a UTF-8 character: encoders write the text
 * when it is valid UTF-8, else "bytes:\xNN..." (as OpenAI), plus Chat's "bytes" array. */
typedef struct recipe_logprob {
    const char *token;
    size_t len;
    double logprob;
    const struct recipe_logprob *top; /* alternatives, best first (their own top is not used) */
    size_t n_top;
} recipe_logprob;

/* One choice of an OpenAI response with several (n > 1) or with logprobs (recipe_response.choices). */
typedef struct recipe_choice {
    recipe_part *parts; /* as recipe_response.parts (Completions: one TEXT part) */
    size_t n_parts;
    recipe_finish finish;
    const char *stop_sequence;
    const recipe_logprob *logprobs; /* NULL: the request asked for none */
    size_t n_logprobs;
} recipe_choice;

typedef struct recipe_response {
    const char *id; /* NULL: minted by the encoder from `created` and a counter */
    const char *model;
    int64_t created; /* unix seconds */
    recipe_part *parts; /* output: REASONING, TEXT, TOOL_CALL parts in order */
    size_t n_parts;
    recipe_finish finish;
    const char *stop_sequence; /* matched stop string (FINISH_STOP_STRING) */
    bool has_usage;
    recipe_usage usage;
    const char *error_message; /* FINISH_ERROR */
    const char *status; /* Responses status when parsed (in_progress, cancelled, ...) */
    /* OpenAI Chat / Completions only (encoders): with choices set, the choices array is written from
     * them (index = position) instead of the single choice above; completion: a Completions
     * "text_completion" object (choices[].text) instead of a chat.completion. */
    const recipe_choice *choices;
    size_t n_choices;
    bool completion;

    recipe_arena arena;
} recipe_response;

void recipe_response_init(recipe_response *r);
void recipe_response_reset(recipe_response *r);
void recipe_response_free(recipe_response *r);
void *recipe_response_alloc(recipe_response *r, size_t bytes);
const char *recipe_response_strdup(recipe_response *r, const char *s);

/* Response bodies, as for requests. */
int recipe_response_parse_text(recipe_api api, const char *body, size_t len, recipe_response *out, recipe_error *err);

/* Encodes a response as `api`'s response body, compact JSON text appended to `out`. `req` (may be
 * NULL) supplies the settings the Responses object echoes (instructions, tools, temperature, ...).
 * 0, or -1 + err with out unchanged. */
int recipe_response_encode_text(recipe_api api, const recipe_response *resp, const recipe_request *req, recipe_buf *out,
                                recipe_error *err);

/* Mapping helpers (docs/recipe.md tables). */
const char *recipe_finish_chat(recipe_finish f); /* stop|length|tool_calls|content_filter */
const char *recipe_finish_messages(recipe_finish f); /* end_turn|stop_sequence|max_tokens|tool_use|refusal */
recipe_finish recipe_finish_from_chat(const char *s);
recipe_finish recipe_finish_from_messages(const char *s);
const char *recipe_effort_name(recipe_effort e);
recipe_effort
recipe_effort_from_budget(int64_t budget_tokens); /* >=4096 high, >=2048 medium, >=1024 low, else minimal */
int64_t recipe_budget_from_effort(recipe_effort e); /* minimal/low 1024, medium 2048, high 4096 */

/* ---------------------------------------------------------------- events (parser output, stream input) */

typedef enum recipe_event_type {
    RECIPE_EV_REASONING = 0, /* text/len: reasoning delta */
    RECIPE_EV_TEXT, /* text/len: content delta */
    RECIPE_EV_TOOL_BEGIN, /* index, id, name */
    RECIPE_EV_TOOL_ARGS, /* index, text/len: argument JSON fragment */
    RECIPE_EV_TOOL_END, /* index */
    RECIPE_EV_FINISH, /* finish, stop_sequence, usage (final totals), has_usage */
    RECIPE_EV_ERROR, /* text: message (mid-stream failure) */
    RECIPE_EV_PING, /* keep-alive (Anthropic `ping`, SSE comment elsewhere) */
} recipe_event_type;

typedef struct recipe_event {
    recipe_event_type type;
    const char *text;
    size_t len;
    int index;
    const char *id, *name;
    recipe_finish finish;
    const char *stop_sequence;
    bool has_usage;
    recipe_usage usage;
    /* OpenAI Chat / Completions streams: the choice the event belongs to (0..n_choices-1), and for
     * TEXT / REASONING the log-probabilities of the tokens of this delta (a delta may be empty and
     * carry only logprobs). Ignored by the other encoders. */
    int choice;
    const recipe_logprob *logprobs;
    size_t n_logprobs;
} recipe_event;

const char *recipe_event_type_name(recipe_event_type t);

/* ---------------------------------------------------------------- SSE stream encoders */

typedef struct recipe_stream_info {
    const char *id; /* response id; NULL: minted */
    const char *model;
    int64_t created; /* unix seconds */
    int64_t prompt_tokens; /* known at the start (Anthropic message_start) */
    int64_t cache_read;
    bool include_usage; /* Chat: stream_options.include_usage */
    const recipe_request *req; /* optional: settings echoed in Responses snapshots (copied) */
    int n_choices; /* Chat / Completions: choices streamed side by side (0 or 1: one) */
    bool completion; /* with RECIPE_API_CHAT: OpenAI Completions chunks ("text_completion") */
} recipe_stream_info;

typedef struct recipe_stream_encoder recipe_stream_encoder;

/* One encoder per streamed response; tracks open blocks/items, indexes, sequence numbers
 * and the assembled output. NULL on allocation failure. */
recipe_stream_encoder *recipe_stream_encoder_new(recipe_api api, const recipe_stream_info *info);
void recipe_stream_encoder_free(recipe_stream_encoder *e);
/* Appends the SSE text for one event (the opening events are written before the first
 * one). After RECIPE_EV_FINISH / RECIPE_EV_ERROR the stream is complete and further
 * events return -1 (Chat / Completions with several choices: each choice finishes on its own;
 * the stream is complete, with the usage chunk and [DONE], once every choice has; the FINISH
 * usage is the whole response's). Returns 0, or -1 with err on a misuse (args for a tool not
 * begun, an event for a finished choice...). */
int recipe_stream_encoder_event(recipe_stream_encoder *e, const recipe_event *ev, recipe_buf *out, recipe_error *err);
bool recipe_stream_encoder_done(const recipe_stream_encoder *e);

/* ---------------------------------------------------------------- model-output parsers */

typedef enum recipe_parser_kind {
    RECIPE_PARSER_PLAIN = 0, /* everything is content */
    RECIPE_PARSER_THINK, /* <think>...</think> reasoning, no tool calls */
    RECIPE_PARSER_DEEPSEEK_R1, /* <think> + DeepSeek V3/R1 tool calls (type, name, fenced JSON) */
    RECIPE_PARSER_DEEPSEEK_V3, /* DeepSeek V3/R1 tool calls, no reasoning */
    RECIPE_PARSER_DEEPSEEK_V31, /* <think> + DeepSeek V3.1 tool calls (name<sep>raw JSON) */
    RECIPE_PARSER_HERMES, /* <think> + <tool_call>{json}</tool_call> (Hermes, Qwen2.5, Qwen3) */
    RECIPE_PARSER_LLAMA3, /* {"name":..,"parameters":..} at output start / <|python_tag|> */
    RECIPE_PARSER_MISTRAL, /* [THINK]..[/THINK] + [TOOL_CALLS][...] / [TOOL_CALLS]f[ARGS]{..} */
    RECIPE_PARSER_COUNT
} recipe_parser_kind;

const char *recipe_parser_name(recipe_parser_kind k);
int recipe_parser_from_name(const char *name); /* -1 if unknown */
/* Chooses a parser from the chat template text and/or GGUF general.architecture (either may be NULL). */
recipe_parser_kind recipe_parser_detect(const char *template_text, const char *arch_name);

/* The reasoning block markers of a parser family ("<think>"/"</think>", Mistral "[THINK]"/"[/THINK]");
 * false (and NULLs) when the family has no reasoning block. */
bool recipe_parser_think_markers(recipe_parser_kind kind, const char **start, const char **end);

#define RECIPE_PARSER_IN_REASONING 1u /* the prompt already opened <think> */
#define RECIPE_PARSER_NO_TOOLS 2u /* tools absent or tool_choice none: no tool parsing */

typedef struct recipe_parser recipe_parser;

recipe_parser *recipe_parser_new(recipe_parser_kind kind, unsigned flags);
void recipe_parser_free(recipe_parser *p);
/* Tool-call ids are "call_" + 24 hex digits derived from this seed and the call index
 * (default: random per parser). */
void recipe_parser_set_id_seed(recipe_parser *p, uint64_t seed);
/* Feeds a text delta. *events receives the events produced (valid until the next call on p),
 * *n_events their count. Incomplete UTF-8 and text that may start a marker are held back. */
void recipe_parser_feed(recipe_parser *p, const char *text, size_t len, const recipe_event **events, size_t *n_events);
/* End of output: flushes what was held back, closes an open tool call. */
void recipe_parser_finish(recipe_parser *p, const recipe_event **events, size_t *n_events);
/* Whether the parser ran out of memory (sticky): its events may have lost text since then; the
 * caller ends the output with an error. */
bool recipe_parser_failed(const recipe_parser *p);
/* Number of tool calls begun so far (any => finish reason tool_calls). */
int recipe_parser_tool_calls(const recipe_parser *p);

#ifdef __cplusplus
}
#endif
#endif
