/* common.c - pieces shared by every codec: API names, finish-reason / effort
 * mappings (protocols.md §4.2, LiteLLM budget defaults), the canonical
 * request/response lifetimes, OpenAI tool_choice, the sampling fields common to
 * Chat and Responses, and the extension fields (vLLM top_k/min_p/
 * repetition_penalty/cache_salt/chat_template_kwargs, cinfer.traffic_class)
 * that every format accepts and emits. */
#include <stdio.h>
#include <stdlib.h>

#include "recipe/recipe_internal.h"
#include "recipe/writer.h"

int recipe_api_from_name(const char *name) {
    if (!name) return -1;
    if (!strcmp(name, "chat") || !strcmp(name, "openai") || !strcmp(name, "chat_completions")) return RECIPE_API_CHAT;
    if (!strcmp(name, "messages") || !strcmp(name, "anthropic")) return RECIPE_API_MESSAGES;
    if (!strcmp(name, "responses")) return RECIPE_API_RESPONSES;
    return -1;
}

const char *recipe_role_template_name(recipe_role r) {
    switch (r) {
    case RECIPE_ROLE_SYSTEM:
    case RECIPE_ROLE_DEVELOPER: return "system";
    case RECIPE_ROLE_USER: return "user";
    case RECIPE_ROLE_ASSISTANT: return "assistant";
    default: return "tool";
    }
}

const char *recipe_api_name(recipe_api api) {
    switch (api) {
    case RECIPE_API_CHAT: return "chat";
    case RECIPE_API_MESSAGES: return "messages";
    case RECIPE_API_RESPONSES: return "responses";
    default: return "?";
    }
}

const char *recipe_finish_chat(recipe_finish f) {
    switch (f) {
    case RECIPE_FINISH_LENGTH: return "length";
    case RECIPE_FINISH_TOOL_CALLS: return "tool_calls";
    case RECIPE_FINISH_CONTENT_FILTER: return "content_filter";
    case RECIPE_FINISH_CANCELLED: return "abort";
    case RECIPE_FINISH_NONE: return NULL;
    default: return "stop";
    }
}

const char *recipe_finish_messages(recipe_finish f) {
    switch (f) {
    case RECIPE_FINISH_STOP_STRING: return "stop_sequence";
    case RECIPE_FINISH_LENGTH:
    case RECIPE_FINISH_CANCELLED: return "max_tokens";
    case RECIPE_FINISH_TOOL_CALLS: return "tool_use";
    case RECIPE_FINISH_CONTENT_FILTER: return "refusal";
    case RECIPE_FINISH_NONE: return NULL;
    default: return "end_turn";
    }
}

recipe_finish recipe_finish_from_chat(const char *s) {
    if (!s) return RECIPE_FINISH_NONE;
    if (!strcmp(s, "length")) return RECIPE_FINISH_LENGTH;
    if (!strcmp(s, "tool_calls") || !strcmp(s, "function_call")) return RECIPE_FINISH_TOOL_CALLS;
    if (!strcmp(s, "content_filter")) return RECIPE_FINISH_CONTENT_FILTER;
    if (!strcmp(s, "error")) return RECIPE_FINISH_ERROR;
    if (!strcmp(s, "abort")) return RECIPE_FINISH_CANCELLED;
    return RECIPE_FINISH_EOS;
}

recipe_finish recipe_finish_from_messages(const char *s) {
    if (!s) return RECIPE_FINISH_NONE;
    if (!strcmp(s, "stop_sequence")) return RECIPE_FINISH_STOP_STRING;
    if (!strcmp(s, "max_tokens") || !strcmp(s, "model_context_window_exceeded")) return RECIPE_FINISH_LENGTH;
    if (!strcmp(s, "tool_use")) return RECIPE_FINISH_TOOL_CALLS;
    if (!strcmp(s, "refusal")) return RECIPE_FINISH_CONTENT_FILTER;
    return RECIPE_FINISH_EOS; /* end_turn, pause_turn, unknown (as vLLM / LiteLLM) */
}

const char *recipe_effort_name(recipe_effort e) {
    static const char *names[] = {NULL, "none", "minimal", "low", "medium", "high"};
    return (unsigned)e < sizeof names / sizeof *names ? names[e] : NULL;
}

recipe_effort effort_parse(const char *s) {
    if (!s) return RECIPE_EFFORT_UNSET;
    for (int e = RECIPE_EFFORT_NONE; e <= RECIPE_EFFORT_HIGH; e++)
        if (!strcmp(s, recipe_effort_name((recipe_effort)e))) return (recipe_effort)e;
    return RECIPE_EFFORT_UNSET;
}

recipe_effort recipe_effort_from_budget(int64_t b) {
    if (b >= 4096) return RECIPE_EFFORT_HIGH;
    if (b >= 2048) return RECIPE_EFFORT_MEDIUM;
    if (b >= 1024) return RECIPE_EFFORT_LOW;
    return RECIPE_EFFORT_MINIMAL;
}

int64_t recipe_budget_from_effort(recipe_effort e) {
    switch (e) {
    case RECIPE_EFFORT_HIGH: return 4096;
    case RECIPE_EFFORT_MEDIUM: return 2048;
    default: return 1024; /* Anthropic's minimum */
    }
}

const char *recipe_event_type_name(recipe_event_type t) {
    static const char *n[] = {"reasoning", "text", "tool_begin", "tool_args", "tool_end", "finish", "error", "ping"};
    return (unsigned)t < sizeof n / sizeof *n ? n[t] : "?";
}

/* ---------------------------------------------------------------- request lifetime */

void recipe_request_init(recipe_request *r) {
    memset(r, 0, sizeof *r);
    r->max_tokens = r->top_k = r->seed = r->n = r->top_logprobs = r->thinking_budget = RECIPE_UNSET;
    r->min_tokens = r->priority = r->best_of = RECIPE_UNSET;
    r->echo = r->swa_replay = -1;
    r->ignore_eos = r->include_stop_str_in_output = r->skip_special_tokens = -1;
    r->temperature = r->top_p = r->min_p = r->repetition_penalty = r->presence_penalty = r->frequency_penalty = NAN;
    r->parallel_tool_calls = r->format_strict = r->include_usage = r->logprobs = r->thinking = r->store = -1;
}

void recipe_request_reset(recipe_request *r) {
    recipe_arena a = r->arena;
    ra_reset(&a);
    recipe_request_init(r);
    r->arena = a;
}

void recipe_request_free(recipe_request *r) {
    ra_free(&r->arena);
    recipe_request_init(r);
}

void *recipe_request_alloc(recipe_request *r, size_t bytes) { return ra_alloc(&r->arena, bytes); }

const char *recipe_request_strdup(recipe_request *r, const char *s) {
    return s ? ra_strndup(&r->arena, s, strlen(s)) : NULL;
}

void recipe_response_init(recipe_response *r) { memset(r, 0, sizeof *r); }

void recipe_response_reset(recipe_response *r) {
    recipe_arena a = r->arena;
    ra_reset(&a);
    recipe_response_init(r);
    r->arena = a;
}

void recipe_response_free(recipe_response *r) {
    ra_free(&r->arena);
    recipe_response_init(r);
}

void *recipe_response_alloc(recipe_response *r, size_t bytes) { return ra_alloc(&r->arena, bytes); }

const char *recipe_response_strdup(recipe_response *r, const char *s) {
    return s ? ra_strndup(&r->arena, s, strlen(s)) : NULL;
}

/* ---------------------------------------------------------------- OpenAI tool_choice */

int tool_choice_parse_openai(recipe_request *r, const rj *tc, bool responses, recipe_error *err) {
    if (!tc || rj_is_null(tc)) return 0;
    if (rj_is_string(tc)) {
        const char *s = rj_str(tc);
        if (!strcmp(s, "none")) r->tool_choice = RECIPE_TOOL_CHOICE_NONE;
        else if (!strcmp(s, "auto")) r->tool_choice = RECIPE_TOOL_CHOICE_AUTO;
        else if (!strcmp(s, "required")) r->tool_choice = RECIPE_TOOL_CHOICE_REQUIRED;
        else
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "tool_choice",
                               "'tool_choice' must be none, auto, required or a function object");
        return 0;
    }
    const char *name = NULL;
    if (rj_is_object(tc)) {
        const char *type = rj_gets(tc, "type");
        if (type && !strcmp(type, "function"))
            name = responses ? rj_gets(tc, "name") : rj_gets(rj_get(tc, "function"), "name");
        /* tolerate the other API's shape too */
        if (!name) name = rj_gets(tc, "name");
        if (!name) name = rj_gets(rj_get(tc, "function"), "name");
    }
    if (!name)
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "tool_choice",
                           "'tool_choice' object must be {\"type\":\"function\",%s}",
                           responses ? "\"name\":NAME" : "\"function\":{\"name\":NAME}");
    r->tool_choice = RECIPE_TOOL_CHOICE_NAMED;
    r->tool_choice_name = name;
    return 0;
}

void write_tool_openai(struct rw *w, const recipe_tool *t, bool responses) {
    rw_obj(w);
    rw_kstr(w, "type", "function");
    if (!responses) rw_kobj(w, "function"); /* Chat nests the definition, Responses flattens it */
    rw_kstr(w, "name", t->name);
    rw_kstr(w, "description", t->description);
    rw_kraw(w, "parameters", t->parameters);
    rw_ktri(w, "strict", t->strict);
    if (!responses) rw_end(w);
    rw_end(w);
}

bool write_tool_choice_openai(struct rw *w, const recipe_request *r, bool responses) {
    switch (r->tool_choice) {
    case RECIPE_TOOL_CHOICE_NONE: rw_str(w, "none"); return true;
    case RECIPE_TOOL_CHOICE_AUTO: rw_str(w, "auto"); return true;
    case RECIPE_TOOL_CHOICE_REQUIRED: rw_str(w, "required"); return true;
    case RECIPE_TOOL_CHOICE_NAMED:
        rw_obj(w);
        rw_kstr(w, "type", "function");
        if (!responses) rw_kobj(w, "function");
        rw_kstr(w, "name", r->tool_choice_name);
        if (!responses) rw_end(w);
        rw_end(w);
        return true;
    default: return false;
    }
}

/* ---------------------------------------------------------------- common fields */

/* stop_token_ids: an array of token ids (>= 0, < 2^31). */
static int parse_stop_ids(recipe_request *r, const rj *v, recipe_error *err) {
    if (rj_is_absent(v)) return 0;
    if (!rj_is_array(v))
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "stop_token_ids",
                           "'stop_token_ids' must be an array of "
                           "token ids");
    size_t n = rj_size(v);
    int32_t *ids = ra_alloc(&r->arena, (n ? n : 1) * sizeof *ids);
    if (!ids) return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const rj *x = rj_at(v, i);
        if (!rj_is_integer(x) || rj_int(x) < 0 || rj_int(x) > INT32_MAX)
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "stop_token_ids",
                               "'stop_token_ids[%zu]' must be a token id (an integer >= 0)", i);
        ids[i] = (int32_t)rj_int(x);
    }
    r->stop_token_ids = ids;
    r->n_stop_token_ids = n;
    return 0;
}

int parse_extensions_v(recipe_request *r, rj *const *v, recipe_error *err) {
    if (rjv_int(v[X_TOP_K], "top_k", &r->top_k, -1, INT32_MAX, err, "")) return -1;
    if (rjv_int(v[X_MIN_TOKENS], "min_tokens", &r->min_tokens, 0, INT32_MAX, err, "")) return -1;
    if (rjv_bool(v[X_IGNORE_EOS], "ignore_eos", &r->ignore_eos, err, "")) return -1;
    if (rjv_bool(v[X_INCLUDE_STOP], "include_stop_str_in_output", &r->include_stop_str_in_output, err, "")) return -1;
    if (rjv_bool(v[X_SKIP_SPECIAL], "skip_special_tokens", &r->skip_special_tokens, err, "")) return -1;
    if (rjv_int(v[X_PRIORITY], "priority", &r->priority, -1000000, 1000000, err, "")) return -1;
    if (parse_stop_ids(r, v[X_STOP_IDS], err)) return -1;
    if (parse_guided(r, v, err)) return -1;
    if (rjv_num(v[X_MIN_P], "min_p", &r->min_p, 0, 1, err, "")) return -1;
    if (rjv_num(v[X_REP], "repetition_penalty", &r->repetition_penalty, 0, 100, err, "")) return -1;
    if (rjv_str(v[X_SALT], "cache_salt", &r->cache_salt, err, "")) return -1;
    rj *o = NULL;
    if (rjv_obj(v[X_CTK], "chat_template_kwargs", &o, err, "")) return -1;
    r->chat_template_kwargs = RAW(r, o);
    o = NULL;
    if (rjv_obj(v[X_CINFER], "cinfer", &o, err, "")) return -1;
    if (o) {
        r->cinfer = RAW(r, o);
        rj *tc = rj_get(o, "traffic_class");
        if (rj_is_string(tc)) r->traffic_class = rj_str(tc);
        else if (rj_is_integer(tc)) {
            char tmp[32];
            snprintf(tmp, sizeof tmp, "%lld", (long long)rj_int(tc));
            r->traffic_class = ra_strndup(&r->arena, tmp, strlen(tmp));
        } else if (tc && !rj_is_null(tc))
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "cinfer.traffic_class",
                               "'cinfer.traffic_class' must be a string or an integer");
        rj *sr = rj_get(o, "swa_replay");
        if (rj_is_boolean(sr)) r->swa_replay = rj_is_true(sr);
        else if (sr && !rj_is_null(sr))
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "cinfer.swa_replay",
                               "'cinfer.swa_replay' must be a boolean");
    }
    return 0;
}

int parse_common_sampling_v(recipe_request *r, rj *const *v, recipe_error *err) {
    if (rjv_num(v[S_TEMP], "temperature", &r->temperature, 0, 2, err, "")) return -1;
    if (rjv_num(v[S_TOP_P], "top_p", &r->top_p, 0, 1, err, "")) return -1;
    if (rjv_int(v[S_TOP_LOGPROBS], "top_logprobs", &r->top_logprobs, 0, 20, err, "")) return -1;
    if (rjv_str(v[S_USER], "user", &r->user, err, "")) return -1;
    rj *o = NULL;
    if (rjv_obj(v[S_METADATA], "metadata", &o, err, "")) return -1;
    r->metadata = RAW(r, o);
    if (rjv_bool(v[S_PTC], "parallel_tool_calls", &r->parallel_tool_calls, err, "")) return -1;
    int stream = 0;
    if (rjv_bool(v[S_STREAM], "stream", &stream, err, "")) return -1;
    r->stream = stream == 1;
    return parse_extensions_v(r, v, err);
}

void write_extensions(struct rw *w, const recipe_request *r) {
    rw_kreal(w, "min_p", r->min_p);
    rw_kint(w, "min_tokens", r->min_tokens);
    rw_ktri(w, "ignore_eos", r->ignore_eos);
    rw_ktri(w, "include_stop_str_in_output", r->include_stop_str_in_output);
    rw_ktri(w, "skip_special_tokens", r->skip_special_tokens);
    rw_kint(w, "priority", r->priority);
    if (r->n_stop_token_ids) {
        rw_karr(w, "stop_token_ids");
        for (size_t i = 0; i < r->n_stop_token_ids; i++) rw_int(w, r->stop_token_ids[i]);
        rw_end(w);
    }
    write_guided(w, r);
    rw_kreal(w, "repetition_penalty", r->repetition_penalty);
    rw_kstr(w, "cache_salt", r->cache_salt);
    rw_kraw(w, "chat_template_kwargs", r->chat_template_kwargs);
    rw_kraw(w, "cinfer", r->cinfer);
}
