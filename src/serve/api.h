/* api.h - (api_request.c, api_output.c, api_tokenize.c, api_think.c) the server's protocol
 * layer for the chat APIs that go through the recipe library
 * (include/cinfer/recipe.h): Anthropic Messages (POST /v1/messages,
 * /v1/messages/count_tokens), OpenAI Responses (POST /v1/responses, with
 * previous_response_id from the response store) and OpenAI Chat Completions (every
 * Chat request) and OpenAI Completions. The body is parsed once, by recipe;
 * there is no other Chat parser and no fallback.
 *
 * The pipeline per request: body -> recipe_request_parse -> gen_params
 * (template messages + tools + sampling) -> gen core -> engine text deltas ->
 * recipe parser (reasoning / content / tool calls) -> recipe stream encoder
 * (SSE) or, at the end, recipe_response_encode (one JSON body).
 *
 * Ownership: an api_job is embedded in the server's per-request job and owns
 * its parsed request, parser, encoder, output buffer and conversation. All
 * calls come from the HTTP loop thread. */
#ifndef CINFER_SERVE_API_H
#define CINFER_SERVE_API_H

#include <stdbool.h>
#include <stdint.h>

#include "cinfer/recipe.h"
#include "serve/gen.h"
#include "serve/response_store.h"
#include "serve/serve_error.h"

typedef struct api_ctx {
    recipe_parser_kind parser; /* output parser for the model (detected or from flags) */
    response_store *store; /* Responses store, NULL: none */
    double now; /* for the store's TTL */
    int32_t max_n; /* Chat: largest n */
    int32_t n_vocab; /* token ids in logit_bias / stop_token_ids must be below it */
    bool mistral_args; /* the vocabulary has [ARGS] (Mistral v11+ tool calls: NAME[ARGS]{...}) */
    const tokenizer *tok; /* reasoning budget markers (api_think.c); NULL: budgets not enforced */
    bool has_think_default; /* --reasoning-budget-default: the budget of requests that set none ... */
    int32_t think_default; /* ... (>= 0 tokens) unless they turn thinking off */
    const gen_defaults *defaults; /* the model's sampling defaults, under the request's values; NULL: none */
} api_ctx;

typedef struct api_job {
    recipe_api api;
    recipe_request req;
    recipe_request history; /* Responses continuation: the stored conversation read back; req's merged
                                * messages point into it (api_request.c) */
    recipe_parser_kind kind;
    unsigned flags; /* RECIPE_PARSER_* */
    uint64_t seed; /* tool-call id seed: stream and final body agree */
    recipe_stream_encoder *enc; /* streaming only */
    char *forced; /* forced tool-call opener (tool_choice required / named), fed to every
                                * parser before the model's text; NULL: none (owned) */
    const char *forced_think; /* fed before `forced` when the prompt ended inside <think> (static) */
    const tokenizer *tok; /* set by api_job_prompt_check (reasoning token count) */
    int64_t reasoning_tokens; /* usage (api_job_response) */
    recipe_buf out; /* SSE text produced by the latest call (caller drains: len = 0) */
    json_t *conversation; /* Responses: template messages before the output (owned ref) */
    bool store; /* Responses: keep the result in the store */
    bool active; /* parsed (api_job_free has work to do) */
    bool multi; /* Chat with n > 1 or logprobs, Completions: the body has recipe choices */
    bool completion; /* OpenAI Completions (text_completion shapes) */
    recipe_parser **parsers; /* streaming: one per choice (owned) */
    int32_t n_parsers;
    char id[64]; /* response id (msg_..., resp_..., chatcmpl-...) */
    char tenant[33]; /* the request's tenant (serve/tenant.h): its stored responses only */
    int64_t created;
    size_t resume_skip; /* streaming, cinfer.resume: new output bytes still to discard (api_output.c) */
} api_job;

/* Parses a request body of `api` into a->req and the gen core's params (sampling, n, logprobs,
 * logit_bias within ctx->n_vocab, the vLLM extras; structured outputs and guided_* refused with a
 * 400 naming the field). The caller sets a->id / a->created / a->tenant first. Chat with n > 1 or
 * logprobs sets a->multi (api_multi_response). On failure the caller still calls api_job_free. */
int api_job_parse(api_job *a, recipe_api api, const char *body, size_t len, const api_ctx *ctx, gen_params *p,
                  serve_error *err);
/* Output-side settings, after api_job_parse succeeded with a->active: the emitted ids are kept
 * (reasoning token count), the reasoning budget goes into p->think_* (api_job_think), and with tool_choice required or named the parser family's tool-call
 * opener goes into p->prompt_suffix (and a->forced) so that the model continues a call
 * (docs/serve.md). 400 when the tool-call format is unknown (plain / think parser) or the named
 * tool is not offered. On failure the caller frees *p. */
int api_job_prepare(api_job *a, const api_ctx *ctx, gen_params *p, serve_error *err);
/* api_think.c (docs/serve.md "Reasoning budget"): the request's reasoning budget in tokens, or -1:
 * none when thinking is off (Anthropic disabled, effort none) or adaptive; Anthropic
 * thinking.budget_tokens; else an OpenAI effort via recipe_budget_from_effort. */
int64_t api_think_budget(const recipe_request *r);
/* The reasoning-block markers of a parser kind ("<think>"/"</think>", Mistral "[THINK]"/"[/THINK]");
 * false for kinds without a block (plain, llama3, deepseek_v3). */
bool api_think_markers(recipe_parser_kind k, const char **start, const char **end);
/* Sets p->think_* (the budget, else ctx's default unless thinking is off, and the kind's markers as
 * token ids, from ctx->tok) for gen_job_start; nothing when there is no budget, the kind has no
 * block, or the vocabulary cannot write a marker as ids that detokenize back to its text. Called
 * by api_job_prepare. */
void api_job_think(const api_job *a, const api_ctx *ctx, gen_params *p);
/* After gen_job_start: a prompt that ends with "<think>" (R1-0528, Qwen3 thinking templates;
 * "[THINK]" for the mistral parser) means the output starts inside the reasoning block
 * (RECIPE_PARSER_IN_REASONING). Keeps tok. */
void api_job_prompt_check(api_job *a, const gen_job *g, const tokenizer *tok);
/* The whole response body (non-streaming, and the stored Responses object). malloc'd text or NULL. */
char *api_job_response(api_job *a, const gen_job *g, const char *model);
/* Responses: stores conversation + output under a->id when store is on. */
void api_job_save(api_job *a, const api_ctx *ctx, const gen_job *g, const char *response_json);
void api_job_free(api_job *a);

/* Per choice c of the job (api_output.c):
 * a parser of the job's kind and flags that has consumed the forced tool-call opener (its events
 * in *ev / *n; none without an opener), its id seed derived from a->seed and c (choice 0: a->seed),
 * NULL when out of memory; */
recipe_parser *api_job_parser(const api_job *a, const gen_job *g, int32_t c, const recipe_event **ev, size_t *n);
/* choice c's accumulated text parsed into r's parts (allocated in r), returning the tool calls
 * (-1: out of memory, the parts are incomplete); */
int api_job_parts(const api_job *a, const gen_job *g, int32_t c, recipe_response *r);
/* choice c's usage reasoning tokens (the rule: api_output.c, docs/serve.md); */
int64_t api_job_reasoning_tokens(const api_job *a, const gen_job *g, int32_t c);
/* the canonical finish of a finished choice, and the stop string that ended it (NULL: none). */
recipe_finish api_finish_of(const gen_choice *c, int tool_calls);
const char *api_stop_of(const gen_job *g, const gen_choice *c);

/* Streaming, every API (api_output.c): one output parser per choice (Completions and plain models:
 * the plain parser) whose events, with the read's log-probabilities, go to recipe's stream
 * encoder for a->api. begin creates them and writes the opening events (Chat: every choice's role
 * chunk; a forced call's opening delta) into a->out; delta / finish write choice c's events
 * (finish: its finish, or an error for an engine error; the last choice's: usage and [DONE] where
 * the API has them). Returns 0, or -1 when out of memory (the output is cut). */
int api_stream_begin(api_job *a, const gen_job *g, const char *model);
int api_stream_delta(api_job *a, const gen_job *g, int32_t c, const tokenizer *tok);
int api_stream_finish(api_job *a, const gen_job *g, int32_t c);
/* Chat with n > 1 or logprobs, and Completions (a->multi): the whole body, recipe's choices with
 * their logprobs. malloc'd text, or NULL when out of memory. */
char *api_multi_response(const api_job *a, const gen_job *g, const char *model, const tokenizer *tok);
/* The canonical finish of a finished choice for a->api: a cancel is Chat / Completions "abort"
 * (RECIPE_FINISH_CANCELLED); Messages and Responses report the length limit. */
recipe_finish api_finish_for(const api_job *a, const gen_choice *c, int tool_calls);

/* An error in `api`'s shape; *status gets the HTTP status (Anthropic: 529 for
 * overload, which OpenAI spells 429/503). malloc'd text. */
char *api_error_json(recipe_api api, const serve_error *e, const char *request_id, int *status);

/* One canonical message as a JSON template message (api_request.c): the response store's format
 * (a Responses turn and its output, read back as a continuation's history). New reference, or
 * NULL + err (images: 400). */
json_t *api_template_message(const recipe_message *m, size_t index, serve_error *err);

/* POST /v1/completions: the body parsed by recipe (RECIPE_PARSE_COMPLETIONS) -> *p (kind
 * GEN_COMPLETION, the prompt as text or ids within ctx->n_vocab, the same sampling / extras as
 * Chat), and *a set up for the output (multi + completion, plain parser). echo, suffix and
 * best_of != n are refused with a 400 naming the field. On failure the caller still calls
 * api_job_free. */
int api_completion_parse(api_job *a, const char *body, size_t len, const api_ctx *ctx, gen_params *p, serve_error *err);

/* 400 naming messages[i] when a message holds an image (the models are text-only). */
int api_check_text_only(const recipe_request *r, serve_error *err);

/* api_tokenize.c: POST /tokenize: {"prompt": text, "add_special_tokens": bool} or {"messages": [...],
 * "add_generation_prompt": bool} (Chat messages, parsed by recipe into *req, which the caller
 * initialized and frees; the template reads it). *prompt (malloc'd text) is set for the first
 * form, NULL for the second. */
int api_tokenize_parse(const char *body, size_t len, char **prompt, size_t *prompt_len, recipe_request *req,
                       bool *add_special, char **model, serve_error *err);
/* POST /detokenize: {"tokens": [ids in [0, n_vocab)]}. *ids is malloc'd (NULL when empty). */
int api_detokenize_parse(const char *body, size_t len, int32_t n_vocab, int32_t **ids, int32_t *n_ids, char **model,
                         serve_error *err);

/* POST /v1/messages/count_tokens: the Messages body (no max_tokens needed) into a->req, which *p
 * points at for the template (p->req). The caller frees *p, then a (api_job_free), also on failure. */
int api_count_tokens_parse(api_job *a, const char *body, size_t len, const api_ctx *ctx, gen_params *p,
                           serve_error *err);

#endif
