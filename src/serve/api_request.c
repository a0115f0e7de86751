/* api_request.c - the request half of the recipe-backed chat APIs (see api.h):
 * body -> recipe canonical request -> gen_params, errors in each API's shape.
 *
 * Canonical request -> chat-template messages: system/developer -> "system";
 * TEXT parts are concatenated into "content"; assistant REASONING ->
 * "reasoning_content"; TOOL_CALL -> "tool_calls" [{id, type: function,
 * function{name, arguments}}] with arguments decoded to an object when they
 * are one (templates apply tojson); a TOOL message -> {role: tool,
 * tool_call_id, content}. Images are refused (text-only models). Tools ->
 * the template variable `tools` in OpenAI's shape. Thinking on/off (Anthropic
 * thinking, reasoning effort) -> template variable enable_thinking, plus the
 * request's chat_template_kwargs. The reasoning budget of the request goes to the
 * engine through api_think.c (called by api_job_prepare).
 *
 * Responses continuation: the stored conversation of previous_response_id is
 * put after this request's instructions and before its input; the new
 * conversation (without instructions, as OpenAI does not carry them over)
 * plus the output is stored under the new id unless store is false.
 */
#include "serve/api.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "serve/resume.h"
#include "serve/spec_opts.h"
#include "serve/structured.h"
#include "serve/traffic.h"

static int oom(serve_error *e) { return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory"); }

static int from_recipe(serve_error *e, const recipe_error *re) {
    static const struct {
        int status;
        const char *type, *code;
    } k[RECIPE_ERR_COUNT] = {
        [RECIPE_ERR_INVALID_REQUEST] = {400, "invalid_request_error", NULL},
        [RECIPE_ERR_CONTEXT_LENGTH] = {400, "invalid_request_error", "context_length_exceeded"},
        [RECIPE_ERR_AUTHENTICATION] = {401, "invalid_request_error", "invalid_api_key"},
        [RECIPE_ERR_PERMISSION] = {403, "permission_error", NULL},
        [RECIPE_ERR_NOT_FOUND] = {404, "invalid_request_error", "not_found"},
        [RECIPE_ERR_TOO_LARGE] = {413, "invalid_request_error", "request_too_large"},
        [RECIPE_ERR_RATE_LIMIT] = {429, "rate_limit_exceeded", "rate_limit_exceeded"},
        [RECIPE_ERR_SERVER] = {500, "server_error", NULL},
        [RECIPE_ERR_OVERLOADED] = {503, "server_error", "overloaded"},
    };
    unsigned i = (unsigned)re->kind < RECIPE_ERR_COUNT ? (unsigned)re->kind : RECIPE_ERR_SERVER;
    return serve_fail(e, k[i].status, k[i].type, k[i].code, re->param[0] ? re->param : NULL, "%s", re->message);
}

char *api_error_json(recipe_api api, const serve_error *e, const char *request_id, int *status) {
    *status = e->status;
    if (api != RECIPE_API_MESSAGES) return serve_error_json(e);
    recipe_error re = {0};
    recipe_err_kind kind;
    switch (e->status) {
    case 400:
        kind = e->code && !strcmp(e->code, "context_length_exceeded") ? RECIPE_ERR_CONTEXT_LENGTH
                                                                      : RECIPE_ERR_INVALID_REQUEST;
        break;
    case 401: kind = RECIPE_ERR_AUTHENTICATION; break;
    case 403: kind = RECIPE_ERR_PERMISSION; break;
    case 404: kind = RECIPE_ERR_NOT_FOUND; break;
    case 413: kind = RECIPE_ERR_TOO_LARGE; break;
    case 429:
    case 503: kind = RECIPE_ERR_OVERLOADED; break; /* Anthropic: 529 overloaded_error */
    case 405: kind = RECIPE_ERR_INVALID_REQUEST; break;
    default: kind = RECIPE_ERR_SERVER; break;
    }
    recipe_fail(&re, kind, e->param[0] ? e->param : NULL, "%s", e->message);
    int maxc, np, nmax;
    long long n;
    /* Anthropic's wordings, which clients match on, saying which limit was hit */
    if (kind == RECIPE_ERR_CONTEXT_LENGTH &&
        sscanf(e->message,
               "This model's maximum context length is %d tokens. However, you requested %lld tokens (%d "
               "in the %*[^,], %d in the completion)",
               &maxc, &n, &np, &nmax) == 4)
        recipe_fail(&re, kind, "max_tokens",
                    "input length and `max_tokens` exceed context limit: max_tokens %d + "
                    "prompt %d tokens exceeds the context of %d tokens; decrease input length or `max_tokens` and "
                    "try again",
                    nmax, np, maxc);
    else if (kind == RECIPE_ERR_CONTEXT_LENGTH &&
             sscanf(e->message, "This model's maximum context length is %d tokens. However, your prompt has %lld",
                    &maxc, &n) == 2)
        recipe_fail(&re, kind, e->param[0] ? e->param : NULL, "prompt is too long: %lld tokens > %d maximum", n, maxc);
    *status = e->status == 405 ? 405 : recipe_error_status(api, &re);
    recipe_buf b = {0};
    if (recipe_error_body_text(api, &re, request_id, &b)) {
        recipe_buf_free(&b);
        return NULL;
    }
    return b.data; /* malloc'd, NUL-terminated: the caller frees it */
}

/* ---- request -> template messages ---- */

/* Concatenated TEXT of parts; images refused. New string or NULL (+err). */
static json_t *parts_text(const recipe_part *parts, size_t n, const char *where, serve_error *err) {
    recipe_buf b = {0};
    for (size_t i = 0; i < n; i++) {
        if (parts[i].type == RECIPE_PART_IMAGE) {
            serve_bad(err, where, "%s: images are not supported (text-only model)", where);
            recipe_buf_free(&b);
            return NULL;
        }
        if (parts[i].type != RECIPE_PART_TEXT || !parts[i].text) continue;
        size_t l = strlen(parts[i].text);
        if (b.len + l + 1 > b.cap) {
            size_t cap = b.cap ? b.cap : 256;
            while (cap < b.len + l + 1) cap *= 2;
            char *q = realloc(b.data, cap);
            if (!q) {
                recipe_buf_free(&b);
                oom(err);
                return NULL;
            }
            b.data = q;
            b.cap = cap;
        }
        memcpy(b.data + b.len, parts[i].text, l);
        b.len += l;
    }
    json_t *s = json_stringn(b.data ? b.data : "", b.len);
    recipe_buf_free(&b);
    if (!s) oom(err);
    return s;
}

static json_t *tool_call_json(const recipe_part *p) {
    json_t *args = NULL;
    if (p->args) {
        args = json_loads(p->args, JSON_DECODE_ANY, NULL);
        if (args && !json_is_object(args)) json_decref(args), args = NULL;
    }
    if (!args) args = json_string(p->args ? p->args : "{}");
    return json_pack("{s:s, s:s, s:{s:s, s:o}}", "id", p->id ? p->id : "", "type", "function", "function", "name",
                     p->name ? p->name : "", "arguments", args);
}

json_t *api_template_message(const recipe_message *m, size_t i, serve_error *err) {
    char where[48];
    snprintf(where, sizeof where, "messages[%zu]", i);
    json_t *o = json_pack("{s:s}", "role", recipe_role_template_name(m->role));
    if (!o) return oom(err), NULL;
    if (m->role == RECIPE_ROLE_TOOL) {
        const recipe_part *r = m->n_parts ? &m->parts[0] : NULL;
        json_t *c = r ? parts_text(r->parts, r->n_parts, where, err) : json_string("");
        if (!c || json_object_set_new(o, "content", c) ||
            json_object_set_new(o, "tool_call_id", json_string(r && r->id ? r->id : ""))) {
            json_decref(o);
            return NULL;
        }
        return o;
    }
    json_t *c = parts_text(m->parts, m->n_parts, where, err);
    if (!c || json_object_set_new(o, "content", c)) {
        json_decref(o);
        return NULL;
    }
    if (m->name) json_object_set_new(o, "name", json_string(m->name));
    json_t *calls = NULL;
    for (size_t k = 0; k < m->n_parts; k++) {
        const recipe_part *p = &m->parts[k];
        if (p->type == RECIPE_PART_REASONING && p->text && m->role == RECIPE_ROLE_ASSISTANT)
            json_object_set_new(o, "reasoning_content", json_string(p->text));
        if (p->type != RECIPE_PART_TOOL_CALL) continue;
        if (!calls && !(calls = json_array())) break;
        json_array_append_new(calls, tool_call_json(p));
    }
    if (calls) json_object_set_new(o, "tool_calls", calls);
    return o;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* n, logprobs, logit_bias (Chat). */
static int fill_choices(recipe_api api, const recipe_request *r, const api_ctx *ctx, gen_params *p, serve_error *err) {
    if (r->n != RECIPE_UNSET) {
        if (r->n > ctx->max_n)
            return serve_bad(err, "n", "'n' must be in [1, %d], got %lld", ctx->max_n, (long long)r->n);
        p->n = (int32_t)r->n;
    }
    p->logprobs = r->logprobs == 1;
    if (r->top_logprobs != RECIPE_UNSET) {
        if (api != RECIPE_API_CHAT)
            return serve_bad(err, "top_logprobs", "'top_logprobs' is not supported on this endpoint");
        if (!p->logprobs && r->top_logprobs > 0)
            return serve_bad(err, "top_logprobs", "'top_logprobs' requires 'logprobs' to be true");
        p->top_logprobs = (int32_t)r->top_logprobs;
    }
    if (r->n_bias) {
        if (!(p->bias = calloc(r->n_bias, sizeof *p->bias))) return oom(err);
        for (size_t i = 0; i < r->n_bias; i++) {
            if (r->bias[i].token >= ctx->n_vocab)
                return serve_bad(err, "logit_bias", "'logit_bias' key '%d' is not a token id in [0, %d)",
                                 (int)r->bias[i].token, ctx->n_vocab);
            p->bias[i].token = r->bias[i].token;
            p->bias[i].bias = (float)r->bias[i].bias;
        }
        p->sampling.n_bias = (int32_t)r->n_bias;
    }
    return 0;
}

/* vLLM extras (docs/serve.md "vLLM extensions"). */
static int fill_extras(const recipe_request *r, const api_ctx *ctx, gen_params *p, serve_error *err) {
    if (r->min_tokens != RECIPE_UNSET) {
        if (r->max_tokens != RECIPE_UNSET && r->min_tokens > r->max_tokens)
            return serve_bad(err, "min_tokens", "'min_tokens' (%lld) must not exceed max_tokens (%lld)",
                             (long long)r->min_tokens, (long long)r->max_tokens);
        p->min_tokens = (int32_t)r->min_tokens;
    }
    p->ignore_eos = r->ignore_eos == 1;
    p->include_stop_str = r->include_stop_str_in_output == 1;
    p->keep_special = r->skip_special_tokens == 0;
    if (r->priority != RECIPE_UNSET) p->priority = (int32_t)r->priority;
    if (r->n_stop_token_ids) {
        if (!(p->stop_ids = malloc(r->n_stop_token_ids * sizeof *p->stop_ids))) return oom(err);
        for (size_t i = 0; i < r->n_stop_token_ids; i++) {
            if (r->stop_token_ids[i] >= ctx->n_vocab)
                return serve_bad(err, "stop_token_ids", "'stop_token_ids' must hold token ids in [0, %d)",
                                 ctx->n_vocab);
            p->stop_ids[i] = r->stop_token_ids[i];
        }
        p->n_stop_ids = (int32_t)r->n_stop_token_ids;
    }
    if (r->cache_salt && !*r->cache_salt)
        return serve_bad(err, "cache_salt", "'cache_salt' must be a non-empty string");
    return 0;
}

/* Sampling / limits from the canonical request (every API). */
static int fill_params(recipe_api api, const recipe_request *r, const api_ctx *ctx, gen_params *p, serve_error *err) {
    cinfer_sampling *s = &p->sampling;
    if (ctx->defaults) gen_defaults_apply(ctx->defaults, s);
    if (!isnan(r->temperature)) s->temperature = (float)r->temperature;
    if (!isnan(r->top_p)) {
        if (r->top_p <= 0 && api != RECIPE_API_MESSAGES) return serve_bad(err, "top_p", "'top_p' must be in (0, 1]");
        s->top_p = (float)r->top_p;
    }
    if (!isnan(r->min_p)) s->min_p = (float)r->min_p;
    if (!isnan(r->repetition_penalty)) {
        if (r->repetition_penalty <= 0) return serve_bad(err, "repetition_penalty", "'repetition_penalty' must be > 0");
        s->repetition_penalty = (float)r->repetition_penalty;
    }
    if (!isnan(r->presence_penalty)) s->presence_penalty = (float)r->presence_penalty;
    if (!isnan(r->frequency_penalty)) s->frequency_penalty = (float)r->frequency_penalty;
    if (r->top_k != RECIPE_UNSET) s->top_k = r->top_k < 0 ? 0 : (int32_t)r->top_k;
    if (r->seed != RECIPE_UNSET) {
        p->has_seed = true;
        s->seed = (uint64_t)r->seed;
    }
    if (r->max_tokens != RECIPE_UNSET) {
        if (r->max_tokens < 1 || r->max_tokens > INT32_MAX / 2)
            return serve_bad(err, "max_tokens", "max_tokens must be in [1, %d]", INT32_MAX / 2);
        p->max_tokens = (int32_t)r->max_tokens;
    }
    p->stream = r->stream;
    p->include_usage = r->include_usage == 1;
    if (r->n_stop) {
        if (!(p->stop = calloc(r->n_stop, sizeof *p->stop))) return oom(err);
        for (size_t i = 0; i < r->n_stop; i++) {
            if (!r->stop[i] || !*r->stop[i]) continue;
            if (!(p->stop[p->n_stop] = strdup(r->stop[i]))) return oom(err);
            p->n_stop++;
        }
    }
    if (r->swa_replay == 0) p->swa_exact = true; /* cinfer.swa_replay: false */
    if (r->traffic_class) { /* cinfer.traffic_class, kept as text by recipe */
        p->traffic_class = traffic_class_from_text(r->traffic_class);
        if (p->traffic_class < 0)
            return serve_bad(err, "cinfer.traffic_class", "'%.60s' is not a traffic class (agent, chat or default)",
                             r->traffic_class);
    }
    if (spec_opts_parse(r->cinfer, &p->speculative, err) || resume_parse(r->cinfer, p, err)) return -1;
    if (r->model && !*r->model) return serve_bad(err, "model", "'model' must not be empty");
    if ((r->model && !(p->model = strdup(r->model))) || (r->cache_salt && !(p->cache_salt = strdup(r->cache_salt))) ||
        (r->user && !(p->user = dup_or_null(r->user))))
        return oom(err);
    if (fill_choices(api, r, ctx, p, err) || fill_extras(r, ctx, p, err)) return -1;
    return 0;
}

static unsigned parser_flags(const recipe_request *r) {
    return r->n_tools == 0 || r->tool_choice == RECIPE_TOOL_CHOICE_NONE ? RECIPE_PARSER_NO_TOOLS : 0u;
}

static uint64_t fresh_seed(void) {
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s) s = (uint64_t)(uintptr_t)&s;
    return s;
}

static int parse_body(recipe_api api, const char *body, size_t len, bool count_only, recipe_request *req,
                      serve_error *err) {
    recipe_error re = {0};
    if (recipe_request_parse_text(api, body, len, count_only ? RECIPE_PARSE_COUNT_TOKENS : 0u, req, &re))
        return from_recipe(err, &re);
    return 0;
}

static bool has_image(const recipe_part *ps, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ps[i].type == RECIPE_PART_IMAGE ||
            (ps[i].type == RECIPE_PART_TOOL_RESULT && has_image(ps[i].parts, ps[i].n_parts)))
            return true;
    return false;
}

int api_check_text_only(const recipe_request *r, serve_error *err) {
    for (size_t i = 0; i < r->n_messages; i++)
        if (has_image(r->messages[i].parts, r->messages[i].n_parts)) {
            char where[48];
            snprintf(where, sizeof where, "messages[%zu]", i);
            return serve_bad(err, where, "%s: images are not supported (text-only model)", where);
        }
    return 0;
}

/* A Responses continuation: the stored conversation (JSON template messages, a Chat message list)
 * read back into canonical messages by recipe's Chat parser (into a->history, kept with the job),
 * and put into a->req after its top-level system text: the template sees one canonical request. */
static int merge_history(api_job *a, const json_t *prev, serve_error *err) {
    recipe_request *r = &a->req;
    json_t *wrap = json_pack("{s:O}", "messages", (json_t *)prev);
    char *text = wrap ? json_dumps(wrap, JSON_COMPACT) : NULL;
    if (wrap) json_decref(wrap);
    if (!text) return oom(err);
    recipe_request_init(&a->history);
    recipe_error re = {0};
    int rc = recipe_request_parse_text(RECIPE_API_CHAT, text, strlen(text), 0, &a->history, &re);
    free(text);
    if (rc)
        return serve_fail(err, 500, "server_error", NULL, "previous_response_id",
                          "the stored conversation of '%.100s' cannot be read back: %s", r->previous_response_id,
                          re.message);
    size_t n = r->n_messages + a->history.n_messages, k = 0;
    recipe_message *m = recipe_request_alloc(r, (n ? n : 1) * sizeof *m);
    if (!m) return oom(err);
    for (size_t i = 0; i < r->n_messages; i++)
        if (r->messages[i].top_level) m[k++] = r->messages[i];
    for (size_t i = 0; i < a->history.n_messages; i++) {
        m[k] = a->history.messages[i];
        m[k++].top_level = false;
    }
    for (size_t i = 0; i < r->n_messages; i++)
        if (!r->messages[i].top_level) m[k++] = r->messages[i];
    r->messages = m;
    r->n_messages = n;
    return 0;
}

/* The generation path: the template reads a->req directly (p->req; chat_template_render_req), a
 * Responses continuation's stored conversation merged in. Images are refused (text-only models);
 * a->conversation keeps the conversation so far as JSON template messages for the response store. */
static int build_context(api_job *a, const api_ctx *ctx, gen_params *p, serve_error *err) {
    recipe_request *r = &a->req;
    if (api_check_text_only(r, err)) return -1;
    json_t *prev = NULL;
    if (r->previous_response_id &&
        (!ctx->store || !rstore_get(ctx->store, r->previous_response_id, a->tenant, ctx->now, &prev, NULL)))
        return serve_fail(err, 404, "invalid_request_error", "previous_response_not_found", "previous_response_id",
                          "Previous response with id '%.100s' not found.", r->previous_response_id);
    if (a->store) { /* before the merge: the stored part is kept as stored */
        json_t *conv = prev ? json_deep_copy(prev) : json_array();
        for (size_t i = 0; conv && i < r->n_messages; i++) {
            if (r->messages[i].top_level) continue;
            json_t *o = api_template_message(&r->messages[i], i, err);
            if (!o || json_array_append_new(conv, o)) {
                json_decref(conv);
                return o ? oom(err) : -1;
            }
        }
        if (!(a->conversation = conv)) return oom(err);
    }
    if (json_array_size(prev) && merge_history(a, prev, err)) return -1;
    if (r->n_messages == 0) return serve_bad(err, "messages", "the conversation is empty");
    p->req = r;
    return 0;
}

int api_job_parse(api_job *a, recipe_api api, const char *body, size_t len, const api_ctx *ctx, gen_params *p,
                  serve_error *err) {
    a->api = api;
    a->kind = ctx->parser;
    a->seed = fresh_seed();
    a->active = true;
    recipe_request_init(&a->req);
    gen_params_init(p);
    p->kind = GEN_CHAT;
    if (parse_body(api, body, len, false, &a->req, err) || fill_params(api, &a->req, ctx, p, err)) goto fail;
    a->store = api == RECIPE_API_RESPONSES && a->req.store != 0;
    if (build_context(a, ctx, p, err)) goto fail;
    a->multi = api == RECIPE_API_CHAT && (p->n != 1 || p->logprobs);
    a->flags = parser_flags(&a->req);
    return 0;
fail:
    gen_params_free(p);
    return -1;
}

/* What a constrained request cannot have: ignore_eos (the grammar decides where the output ends). */
static int check_constrained(const gen_params *p, serve_error *err) {
    if (p->grammar.kind && p->ignore_eos)
        return serve_bad(err, "ignore_eos",
                         "'ignore_eos' cannot be combined with structured output ('%s'): the grammar decides where "
                         "the output ends",
                         p->grammar.param);
    return 0;
}

int api_completion_parse(api_job *a, const char *body, size_t len, const api_ctx *ctx, gen_params *p,
                         serve_error *err) {
    a->api = RECIPE_API_CHAT;
    a->kind = RECIPE_PARSER_PLAIN;
    a->flags = RECIPE_PARSER_NO_TOOLS;
    a->seed = fresh_seed();
    a->active = a->multi = a->completion = true;
    recipe_request_init(&a->req);
    recipe_request r;
    recipe_request_init(&r);
    gen_params_init(p);
    p->kind = GEN_COMPLETION;
    recipe_error re = {0};
    int rc = 0;
    if (recipe_request_parse_text(RECIPE_API_CHAT, body, len, RECIPE_PARSE_COMPLETIONS, &r, &re))
        rc = from_recipe(err, &re);
    else if (fill_params(RECIPE_API_CHAT, &r, ctx, p, err) ||
             structured_from_request(&r, RECIPE_API_CHAT, &p->grammar, err) || check_constrained(p, err))
        rc = -1;
    else if (r.echo == 1) rc = serve_bad(err, "echo", "'echo' is not supported");
    else if (r.suffix)
        rc = serve_bad(err, "suffix", "'suffix' is not supported (this server does not fill in the middle)");
    else if (r.best_of != RECIPE_UNSET && r.best_of != p->n)
        rc = serve_bad(err, "best_of", "'best_of' other than n is not supported");
    else if (r.prompt) {
        if (!(p->prompt = malloc(r.prompt_len + 1))) rc = oom(err);
        else {
            memcpy(p->prompt, r.prompt, r.prompt_len + 1);
            p->prompt_len = r.prompt_len;
        }
    } else if (!(p->prompt_ids = malloc(r.n_prompt_ids * sizeof *p->prompt_ids))) rc = oom(err);
    else {
        for (size_t i = 0; i < r.n_prompt_ids && !rc; i++) {
            if (r.prompt_ids[i] >= ctx->n_vocab)
                rc = serve_bad(err, "prompt", "'prompt' must hold token ids in [0, %d)", ctx->n_vocab);
            p->prompt_ids[i] = r.prompt_ids[i];
        }
        p->n_prompt_ids = (int32_t)r.n_prompt_ids;
    }
    recipe_request_free(&r);
    if (rc) gen_params_free(p);
    return rc ? -1 : 0;
}

int api_count_tokens_parse(api_job *a, const char *body, size_t len, const api_ctx *ctx, gen_params *p,
                           serve_error *err) {
    a->api = RECIPE_API_MESSAGES;
    a->active = true;
    recipe_request_init(&a->req);
    gen_params_init(p);
    if (parse_body(RECIPE_API_MESSAGES, body, len, true, &a->req, err) ||
        fill_params(RECIPE_API_MESSAGES, &a->req, ctx, p, err) || build_context(a, ctx, p, err)) {
        gen_params_free(p);
        return -1;
    }
    return 0;
}

/* ---- tool_choice required / named (docs/serve.md "Forced tool calls") ----
 * A forced call is started for the model: the prompt ends with the parser family's tool-call opener
 * (with the tool's name when one is named or only one is offered), the output parsers consume the
 * same opener before the model's text (api_output.c), so the call is parsed and the opener is not
 * echoed as content, and the grammar (structured.c) constrains what follows to the call's JSON with
 * schema-valid arguments. */

typedef struct forced_opener {
    const char *required; /* opener for tool_choice required */
    const char *named_pre; /* named: text before the name ... */
    const char *named_post; /* ... and after it */
    const char *think_close; /* put before the opener when the prompt ends inside <think> */
} forced_opener;

#define DS_CALLS "<｜tool▁calls▁begin｜>"
#define DS_CALL "<｜tool▁call▁begin｜>"
#define DS_SEP "<｜tool▁sep｜>"

static bool opener_of(recipe_parser_kind k, bool mistral_args, forced_opener *o) {
    static const char think_close[] = "</think>\n\n";
    switch (k) {
    case RECIPE_PARSER_HERMES:
        *o = (forced_opener){"<tool_call>\n", "<tool_call>\n{\"name\": \"", "\", \"arguments\": ", think_close};
        return true;
    case RECIPE_PARSER_LLAMA3:
        *o = (forced_opener){"{\"name\": \"", "{\"name\": \"", "\", \"parameters\": ", NULL};
        return true;
    case RECIPE_PARSER_MISTRAL:
        *o = mistral_args ? (forced_opener){"[TOOL_CALLS]", "[TOOL_CALLS]", "[ARGS]", NULL}
                          : (forced_opener){"[TOOL_CALLS]", "[TOOL_CALLS][{\"name\": \"", "\", \"arguments\": ", NULL};
        return true;
    case RECIPE_PARSER_DEEPSEEK_R1:
    case RECIPE_PARSER_DEEPSEEK_V3:
        *o = (forced_opener){DS_CALLS DS_CALL "function" DS_SEP, DS_CALLS DS_CALL "function" DS_SEP, "\n```json\n",
                             k == RECIPE_PARSER_DEEPSEEK_R1 ? think_close : NULL};
        return true;
    case RECIPE_PARSER_DEEPSEEK_V31:
        *o = (forced_opener){DS_CALLS DS_CALL, DS_CALLS DS_CALL, DS_SEP, think_close};
        return true;
    default: return false; /* plain, think: no tool-call syntax */
    }
}

/* The named tool's index, 400 when it is not offered or its name cannot be written into a prompt. */
static int named_tool(const recipe_request *r, serve_error *err) {
    const char *name = r->tool_choice_name;
    int found = -1;
    for (size_t i = 0; name && i < r->n_tools && found < 0; i++)
        if (r->tools[i].name && !strcmp(r->tools[i].name, name)) found = (int)i;
    if (found < 0)
        return serve_bad(err, "tool_choice", "tool_choice names the tool '%.80s', which is not in tools",
                         name ? name : "");
    return found;
}

/* prompt_suffix = opener (the tool's name spliced in when `name`), suffix_think, a->forced. */
static int set_opener(api_job *a, gen_params *p, const char *pre, const char *name, const char *post,
                      const char *think_close, serve_error *err) {
    for (const char *c = name; c && *c; c++)
        if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
            return serve_bad(err, "tool_choice",
                             "the forced tool's name '%.80s' contains a quote, backslash or control character", name);
    size_t lp = strlen(pre), nl = name ? strlen(name) : 0, lq = name ? strlen(post) : 0;
    char *s = malloc(lp + nl + lq + 1);
    if (!s) return oom(err);
    memcpy(s, pre, lp);
    if (name) {
        memcpy(s + lp, name, nl);
        memcpy(s + lp + nl, post, lq);
    }
    s[lp + nl + lq] = 0;
    free(p->prompt_suffix);
    free(p->suffix_think);
    free(a->forced);
    p->prompt_suffix = s;
    p->suffix_plain_from = lp;
    p->suffix_plain_to = lp + nl;
    p->suffix_think = think_close ? strdup(think_close) : NULL;
    a->forced = strdup(s);
    a->forced_think = think_close;
    if (!a->forced || (think_close && !p->suffix_think)) return oom(err);
    return 0;
}

/* tool_choice required / named: the parser family's opener ends the prompt and the grammar
 * (structured.c) makes the rest one call with schema-valid arguments. Where the family writes the
 * whole call as JSON (Hermes after "<tool_call>\n", Llama 3 with no opener, Mistral before v11 after
 * [TOOL_CALLS]) the grammar is that JSON, the tool's name a constant in it (the named tool, or any of
 * them for `required`), so the model also writes the call's closing brace itself. The families that
 * write the name outside JSON (DeepSeek, Mistral v11) get the name in the opener and the arguments'
 * schema: one tool (named, or the only one offered); several under `required`: 400. */
static int forced_call(api_job *a, const api_ctx *ctx, gen_params *p, serve_error *err) {
    const recipe_request *r = &a->req;
    bool named = r->tool_choice == RECIPE_TOOL_CHOICE_NAMED;
    const char *what = named                           ? "a named tool_choice"
                       : a->api == RECIPE_API_MESSAGES ? "tool_choice 'any'"
                                                       : "tool_choice 'required'";
    if (r->n_tools == 0) return serve_bad(err, "tool_choice", "%s needs tools, but the request has none", what);
    int tool = named ? named_tool(r, err) : r->n_tools == 1 ? 0 : -1;
    if (named && tool < 0) return -1;
    forced_opener o;
    if (!opener_of(a->kind, ctx->mistral_args, &o))
        return serve_bad(err, "tool_choice",
                         "%s cannot be enforced: this model's tool-call format is unknown (output parser '%s'); "
                         "start the server with --tool-call-parser NAME (hermes, llama3, mistral, deepseek_v3, "
                         "deepseek_r1, deepseek_v31)",
                         what, recipe_parser_name(a->kind));
    structured_call_shape shape;
    int rc;
    if (a->kind == RECIPE_PARSER_HERMES) {
        shape = STRUCTURED_CALL_OBJECT;
        rc = set_opener(a, p, o.required, NULL, NULL, o.think_close, err);
    } else if (a->kind == RECIPE_PARSER_LLAMA3) {
        shape = STRUCTURED_CALL_OBJECT_PARAMS; /* the model writes the whole {"name", "parameters"} object */
        rc = set_opener(a, p, "", NULL, NULL, o.think_close, err);
    } else if (a->kind == RECIPE_PARSER_MISTRAL && !ctx->mistral_args) {
        shape = STRUCTURED_CALL_ARRAY;
        rc = set_opener(a, p, o.required, NULL, NULL, o.think_close, err);
    } else if (tool >= 0) {
        shape = STRUCTURED_CALL_ARGS;
        rc = set_opener(a, p, o.named_pre, r->tools[tool].name ? r->tools[tool].name : "", o.named_post, o.think_close,
                        err);
    } else
        return serve_bad(err, "tool_choice",
                         "%s with %zu tools cannot be enforced in this model's tool-call format (output parser "
                         "'%s' writes the tool's name outside JSON); name the tool in tool_choice",
                         what, r->n_tools, recipe_parser_name(a->kind));
    return rc ? -1 : structured_tool_call(r, a->api, tool, shape, &p->grammar, err);
}

/* A constrained output must not start inside a reasoning block the prompt opened: the block is
 * closed first (suffix_think, as for forced calls; gen.c adds it only when the prompt ends with
 * <think>), so the grammar shapes the answer. Families without a </think> block: nothing. */
static int close_reasoning(api_job *a, gen_params *p, serve_error *err) {
    const char *start, *end;
    if (p->prompt_suffix || !api_think_markers(a->kind, &start, &end) || strcmp(end, "</think>")) return 0;
    return set_opener(a, p, "", NULL, NULL, "</think>\n\n", err);
}

int api_job_prepare(api_job *a, const api_ctx *ctx, gen_params *p, serve_error *err) {
    p->keep_ids = true; /* usage reasoning tokens (api_output.c) */
    const recipe_request *r = &a->req;
    bool forced = r->tool_choice == RECIPE_TOOL_CHOICE_REQUIRED || r->tool_choice == RECIPE_TOOL_CHOICE_NAMED;
    if (forced ? forced_call(a, ctx, p, err) : structured_from_request(r, a->api, &p->grammar, err)) return -1;
    structured_spec lazy; /* strict tools under auto (400 with a format: p->grammar is empty when it is set) */
    if (!forced && structured_strict_tools(r, a->api, a->kind, &lazy, err)) return -1;
    if (!forced && lazy.kind) p->grammar = lazy; /* moved */
    if (check_constrained(p, err)) return -1;
    if (p->grammar.trigger) return 0; /* calls the model chooses: it may reason first (no budget) */
    if (p->grammar.kind) return close_reasoning(a, p, err); /* no reasoning budget: the block is closed */
    api_job_think(a, ctx, p); /* reasoning budget -> engine options (api_think.c) */
    return 0;
}
