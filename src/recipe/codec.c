/* codec.c - the public entry points that dispatch on the API (parse/encode of
 * requests and responses), API-shaped error bodies (protocols.md §1.4, §2.4,
 * §4.5), and the canonical-request dump used by the Python bindings and tests. */
#include <stdio.h>
#include <stdlib.h>

#include "recipe/openai_out.h"
#include "recipe/recipe_internal.h"
#include "recipe/writer.h"

int chat_request_parse(recipe_request *r, rj *b, recipe_error *err);
int completions_request_parse(recipe_request *r, rj *b, recipe_error *err);
int messages_request_parse(recipe_request *r, rj *b, unsigned flags, recipe_error *err);
int responses_request_parse(recipe_request *r, rj *b, recipe_error *err);
int chat_request_write(rw *w, const recipe_request *r, recipe_error *err);
int messages_request_write(rw *w, const recipe_request *r, recipe_error *err);
int responses_request_write(rw *w, const recipe_request *r, recipe_error *err);
int chat_response_parse(recipe_response *r, rj *b, recipe_error *err);
int messages_response_parse(recipe_response *r, rj *b, recipe_error *err);
int responses_response_parse(recipe_response *r, rj *b, recipe_error *err);
json_t *chat_response_encode(const recipe_response *r, recipe_error *err);
json_t *messages_response_encode(const recipe_response *r, recipe_error *err);
json_t *responses_response_encode(const recipe_response *r, const recipe_request *req, recipe_error *err);

/* Body text -> tree in the arena; NULL + err when it is not valid JSON or not an object. */
static rj *parse_body(recipe_arena *a, const char *text, size_t len, const char *what, recipe_error *err) {
    char why[96];
    rj_pool pool;
    rj *b = rj_parse_pool(a, text, len, why, sizeof why, &pool);
    a->pool_lo = pool.lo; /* the writer copies clean strings of this pool without scanning them */
    a->pool_hi = pool.hi;
    if (!b) {
        if (!strncmp(why, "out of memory", 13)) recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
        else recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, NULL, "the body is not valid JSON: %s", why);
        return NULL;
    }
    if (!rj_is_object(b)) {
        recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, NULL, "%s body must be a JSON object", what);
        return NULL;
    }
    return b;
}

int recipe_request_parse_text(recipe_api api, const char *body, size_t len, unsigned flags, recipe_request *out,
                              recipe_error *err) {
    recipe_request_reset(out);
    out->source = api;
    rj *b = parse_body(&out->arena, body, len, "request", err);
    int rc;
    if (!b) rc = -1;
    else switch (api) {
        case RECIPE_API_CHAT:
            rc = flags & RECIPE_PARSE_COMPLETIONS ? completions_request_parse(out, b, err)
                                                  : chat_request_parse(out, b, err);
            break;
        case RECIPE_API_MESSAGES: rc = messages_request_parse(out, b, flags, err); break;
        case RECIPE_API_RESPONSES: rc = responses_request_parse(out, b, err); break;
        default: rc = recipe_fail(err, RECIPE_ERR_SERVER, NULL, "unknown API %d", (int)api);
        }
    if (rc) recipe_request_reset(out);
    return rc;
}

/* jansson value -> compact text (the slow path for callers that hold a tree) */
static char *tree_text(const json_t *body, const char *what, size_t *len, recipe_error *err) {
    if (!json_is_object(body)) {
        recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, NULL, "%s body must be a JSON object", what);
        return NULL;
    }
    char *t = json_dumps(body, JSON_COMPACT);
    if (!t) recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
    else *len = strlen(t);
    return t;
}

int recipe_request_parse(recipe_api api, const json_t *body, recipe_request *out, recipe_error *err) {
    size_t len = 0;
    char *t = tree_text(body, "request", &len, err);
    if (!t) return recipe_request_reset(out), -1;
    int rc = recipe_request_parse_text(api, t, len, 0, out, err);
    free(t);
    return rc;
}

static int request_write(recipe_api api, rw *w, const recipe_request *req, recipe_error *err) {
    if (req->completion)
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "prompt",
                           "a Completions request has no messages to "
                           "encode");
    switch (api) {
    case RECIPE_API_CHAT: return chat_request_write(w, req, err);
    case RECIPE_API_MESSAGES: return messages_request_write(w, req, err);
    case RECIPE_API_RESPONSES: return responses_request_write(w, req, err);
    default: return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "unknown API %d", (int)api);
    }
}

int recipe_request_encode_text(recipe_api api, const recipe_request *req, recipe_buf *out, recipe_error *err) {
    rw w;
    rw_init_text(&w, out);
    w.clean = (rj_pool){req->arena.pool_lo, req->arena.pool_hi};
    size_t len0 = out->len;
    if (request_write(api, &w, req, err)) return -1;
    if (w.failed || w.depth) {
        out->len = len0;
        return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
    }
    return 0;
}

json_t *recipe_request_encode(recipe_api api, const recipe_request *req, recipe_error *err) {
    rw w;
    rw_init_tree(&w);
    if (request_write(api, &w, req, err)) {
        json_decref(rw_finish(&w));
        return NULL;
    }
    json_t *o = rw_finish(&w);
    if (!o) recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory or invalid UTF-8 while encoding");
    return o;
}

int recipe_response_parse_text(recipe_api api, const char *body, size_t len, recipe_response *out, recipe_error *err) {
    recipe_response_reset(out);
    rj *b = parse_body(&out->arena, body, len, "response", err);
    int rc;
    if (!b) rc = -1;
    else switch (api) {
        case RECIPE_API_CHAT: rc = chat_response_parse(out, b, err); break;
        case RECIPE_API_MESSAGES: rc = messages_response_parse(out, b, err); break;
        case RECIPE_API_RESPONSES: rc = responses_response_parse(out, b, err); break;
        default: rc = recipe_fail(err, RECIPE_ERR_SERVER, NULL, "unknown API %d", (int)api);
        }
    if (rc) recipe_response_reset(out);
    return rc;
}

int recipe_response_parse(recipe_api api, const json_t *body, recipe_response *out, recipe_error *err) {
    size_t len = 0;
    char *t = tree_text(body, "response", &len, err);
    if (!t) return recipe_response_reset(out), -1;
    int rc = recipe_response_parse_text(api, t, len, out, err);
    free(t);
    return rc;
}

json_t *recipe_response_encode(recipe_api api, const recipe_response *resp, const recipe_request *req,
                               recipe_error *err) {
    switch (api) {
    case RECIPE_API_CHAT:
        return resp->completion ? completions_response_encode(resp, err) : chat_response_encode(resp, err);
    case RECIPE_API_MESSAGES: return messages_response_encode(resp, err);
    case RECIPE_API_RESPONSES: return responses_response_encode(resp, req, err);
    default: return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "unknown API %d", (int)api), NULL;
    }
}

/* ---------------------------------------------------------------- errors */

static const struct {
    int status;
    const char *openai_type, *openai_code, *anthropic_type;
} k_err[RECIPE_ERR_COUNT] = {
    [RECIPE_ERR_INVALID_REQUEST] = {400, "invalid_request_error", NULL, "invalid_request_error"},
    [RECIPE_ERR_CONTEXT_LENGTH] = {400, "invalid_request_error", "context_length_exceeded", "invalid_request_error"},
    [RECIPE_ERR_AUTHENTICATION] = {401, "invalid_request_error", "invalid_api_key", "authentication_error"},
    [RECIPE_ERR_PERMISSION] = {403, "permission_error", NULL, "permission_error"},
    [RECIPE_ERR_NOT_FOUND] = {404, "invalid_request_error", "model_not_found", "not_found_error"},
    [RECIPE_ERR_TOO_LARGE] = {413, "invalid_request_error", "request_too_large", "request_too_large"},
    [RECIPE_ERR_RATE_LIMIT] = {429, "rate_limit_error", "rate_limit_exceeded", "rate_limit_error"},
    [RECIPE_ERR_SERVER] = {500, "server_error", NULL, "api_error"},
    [RECIPE_ERR_OVERLOADED] = {503, "server_error", "overloaded", "overloaded_error"},
};

int recipe_error_status(recipe_api api, const recipe_error *e) {
    unsigned k = e ? (unsigned)e->kind : RECIPE_ERR_SERVER;
    if (k >= RECIPE_ERR_COUNT) k = RECIPE_ERR_SERVER;
    if (k == RECIPE_ERR_OVERLOADED && api == RECIPE_API_MESSAGES) return 529;
    return k_err[k].status;
}

json_t *recipe_error_body(recipe_api api, const recipe_error *e, const char *request_id) {
    unsigned k = e ? (unsigned)e->kind : RECIPE_ERR_SERVER;
    if (k >= RECIPE_ERR_COUNT) k = RECIPE_ERR_SERVER;
    const char *msg = e && e->message[0] ? e->message : "internal error";
    /* messages come from our own formatting of possibly invalid input: validate */
    json_t *jm = json_string(msg);
    if (!jm) jm = json_string("invalid request");
    if (api == RECIPE_API_MESSAGES) {
        json_t *o =
            json_pack("{s:s,s:{s:s,s:o}}", "type", "error", "error", "type", k_err[k].anthropic_type, "message", jm);
        if (request_id) jset(o, "request_id", json_string(request_id));
        return o;
    }
    json_t *param = e && e->param[0] ? json_string(e->param) : json_null();
    if (!param) param = json_null();
    return json_pack("{s:{s:o,s:s,s:o,s:o}}", "error", "message", jm, "type", k_err[k].openai_type, "param", param,
                     "code", k_err[k].openai_code ? json_string(k_err[k].openai_code) : json_null());
}

int recipe_error_body_text(recipe_api api, const recipe_error *e, const char *request_id, recipe_buf *out) {
    json_t *b = recipe_error_body(api, e, request_id);
    size_t len0 = out->len;
    int rc = b ? rb_json(out, b) : -1;
    json_decref(b);
    if (rc) out->len = len0;
    return rc;
}

int recipe_response_encode_text(recipe_api api, const recipe_response *resp, const recipe_request *req, recipe_buf *out,
                                recipe_error *err) {
    json_t *b = recipe_response_encode(api, resp, req, err);
    if (!b) return -1;
    size_t len0 = out->len;
    int rc = rb_json(out, b);
    json_decref(b);
    if (rc) {
        out->len = len0;
        return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
    }
    return 0;
}

/* ---------------------------------------------------------------- dump */

static const char *role_name(recipe_role r) {
    static const char *n[] = {"system", "developer", "user", "assistant", "tool"};
    return (unsigned)r < 5 ? n[r] : "?";
}

static json_t *dump_parts(const recipe_part *ps, size_t n) {
    static const char *tn[] = {"text", "image", "reasoning", "redacted", "tool_call", "tool_result"};
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        const recipe_part *p = &ps[i];
        json_t *o = json_object();
        jset(o, "type", json_string(tn[p->type]));
        jset_str(o, "text", p->text);
        jset_str(o, "signature", p->signature);
        jset_str(o, "id", p->id);
        jset_str(o, "item_id", p->item_id);
        jset_str(o, "name", p->name);
        jset_str(o, "args", p->args);
        jset_str(o, "url", p->url);
        jset_str(o, "media_type", p->media_type);
        jset_str(o, "data", p->data);
        jset_str(o, "detail", p->detail);
        if (p->is_error) jset(o, "is_error", json_true());
        jset(o, "summary", raw_json(p->summary));
        jset(o, "cache_control", raw_json(p->cache_control));
        if (p->type == RECIPE_PART_TOOL_RESULT) jset(o, "content", dump_parts(p->parts, p->n_parts));
        json_array_append_new(arr, o);
    }
    return arr;
}

json_t *recipe_request_dump(const recipe_request *r) {
    json_t *o = json_object(), *msgs = json_array();
    jset(o, "source", json_string(recipe_api_name(r->source)));
    jset_str(o, "model", r->model);
    for (size_t i = 0; i < r->n_messages; i++) {
        const recipe_message *m = &r->messages[i];
        json_t *jm = json_pack("{s:s,s:o}", "role", role_name(m->role), "parts", dump_parts(m->parts, m->n_parts));
        jset_str(jm, "name", m->name);
        if (m->top_level) jset(jm, "top_level", json_true());
        jset_str(jm, "refusal", m->refusal);
        json_array_append_new(msgs, jm);
    }
    jset(o, "messages", msgs);
    if (r->n_tools) {
        json_t *tools = json_array();
        for (size_t i = 0; i < r->n_tools; i++) {
            json_t *t = json_object();
            jset_str(t, "name", r->tools[i].name);
            jset_str(t, "description", r->tools[i].description);
            jset(t, "parameters", raw_json(r->tools[i].parameters));
            jset_tri(t, "strict", r->tools[i].strict);
            json_array_append_new(tools, t);
        }
        jset(o, "tools", tools);
    }
    static const char *tc[] = {NULL, "none", "auto", "required", "named"};
    jset_str(o, "tool_choice", tc[r->tool_choice]);
    jset_str(o, "tool_choice_name", r->tool_choice_name);
    jset_tri(o, "parallel_tool_calls", r->parallel_tool_calls);
    static const char *fm[] = {NULL, "text", "json_object", "json_schema"};
    jset_str(o, "format", fm[r->format]);
    jset_str(o, "format_name", r->format_name);
    jset(o, "format_schema", raw_json(r->format_schema));
    jset(o, "stream", json_boolean(r->stream));
    jset_tri(o, "include_usage", r->include_usage);
    jset_int(o, "max_tokens", r->max_tokens);
    jset_real(o, "temperature", r->temperature);
    jset_real(o, "top_p", r->top_p);
    jset_int(o, "top_k", r->top_k);
    jset_real(o, "min_p", r->min_p);
    jset_real(o, "repetition_penalty", r->repetition_penalty);
    jset_real(o, "presence_penalty", r->presence_penalty);
    jset_real(o, "frequency_penalty", r->frequency_penalty);
    jset_int(o, "seed", r->seed);
    jset_int(o, "n", r->n);
    if (r->n_stop) {
        json_t *st = json_array();
        for (size_t i = 0; i < r->n_stop; i++) json_array_append_new(st, jsnew(r->stop[i]));
        jset(o, "stop", st);
    }
    jset_str(o, "user", r->user);
    jset_str(o, "reasoning_effort", recipe_effort_name(r->reasoning_effort));
    jset_tri(o, "thinking", r->thinking);
    jset_int(o, "thinking_budget", r->thinking_budget);
    jset_str(o, "cache_salt", r->cache_salt);
    jset_int(o, "min_tokens", r->min_tokens);
    jset_tri(o, "ignore_eos", r->ignore_eos);
    jset_tri(o, "include_stop_str_in_output", r->include_stop_str_in_output);
    jset_tri(o, "skip_special_tokens", r->skip_special_tokens);
    jset_int(o, "priority", r->priority);
    if (r->n_stop_token_ids) {
        json_t *st = json_array();
        for (size_t i = 0; i < r->n_stop_token_ids; i++) json_array_append_new(st, json_integer(r->stop_token_ids[i]));
        jset(o, "stop_token_ids", st);
    }
    if (r->n_bias) {
        json_t *lb = json_array();
        for (size_t i = 0; i < r->n_bias; i++)
            json_array_append_new(lb, json_pack("[i,f]", (int)r->bias[i].token, r->bias[i].bias));
        jset(o, "bias", lb);
    }
    if (r->guided_field) jset(o, r->guided_field, raw_json(r->guided));
    jset_str(o, "traffic_class", r->traffic_class);
    if (r->swa_replay >= 0) jset(o, "swa_replay", json_boolean(r->swa_replay));
    if (r->completion) {
        jset(o, "completion", json_true());
        if (r->prompt) jset(o, "prompt", json_stringn(r->prompt, r->prompt_len));
        if (r->prompt_ids) {
            json_t *ids = json_array();
            for (size_t i = 0; i < r->n_prompt_ids; i++) json_array_append_new(ids, json_integer(r->prompt_ids[i]));
            jset(o, "prompt_ids", ids);
        }
        jset_tri(o, "echo", r->echo);
        jset_str(o, "suffix", r->suffix);
        jset_int(o, "best_of", r->best_of);
        jset_tri(o, "logprobs", r->logprobs);
        jset_int(o, "top_logprobs", r->top_logprobs);
    }
    jset_str(o, "previous_response_id", r->previous_response_id);
    return o;
}
