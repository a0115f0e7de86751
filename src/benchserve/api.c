/* api.c - see api.h. Bodies are built with jansson (one allocation per
 * request, never on a per-token path); events are parsed with jansson. */
#include "benchserve/api.h"
#include "base/log.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = {"chat", "completions", "messages", "responses"};
static const char *const paths[] = {"/chat/completions", "/completions", "/messages", "/responses"};

int bs_api_parse(const char *name, bs_api *out) {
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, names[i])) return *out = (bs_api)i, 0;
    return -1;
}

const char *bs_api_name(bs_api a) { return names[a]; }
const char *bs_api_path(bs_api a) { return paths[a]; }

static json_t *msg(const char *role, const char *text) {
    return json_pack("{s:s, s:s}", "role", role, "content", text);
}

static json_t *message_list(const bs_prompt *p, int with_system) {
    json_t *a = json_array();
    if (with_system && p->system) json_array_append_new(a, msg("system", p->system));
    for (size_t i = 0; i < p->n_msgs; i++) {
        /* Anthropic rejects empty turns: an empty answer is sent as one space. */
        const char *t = p->msgs[i][0] ? p->msgs[i] : " ";
        json_array_append_new(a, msg(i % 2 ? "assistant" : "user", t));
    }
    return a;
}

static json_t *flat_prompt(const bs_prompt *p) {
    if (p->ids) {
        json_t *a = json_array();
        for (size_t i = 0; i < p->n_ids; i++) json_array_append_new(a, json_integer(p->ids[i]));
        return a;
    }
    bs_buf b = {0};
    int rc = 0;
    if (p->system) rc |= bs_buf_puts(&b, p->system) | bs_buf_puts(&b, "\n");
    for (size_t i = 0; i < p->n_msgs; i++) rc |= bs_buf_puts(&b, p->msgs[i]) | bs_buf_puts(&b, "\n");
    json_t *s = rc ? NULL : json_string(bs_buf_str(&b));
    bs_buf_free(&b);
    return s;
}

int bs_api_body(bs_api a, const bs_prompt *p, const bs_gen_opts *g, bs_buf *out) {
    json_t *o = json_object();
    if (!o) return -1;
    if (g->model) json_object_set_new(o, "model", json_string(g->model));
    switch (a) {
    case BS_API_CHAT: json_object_set_new(o, "messages", message_list(p, 1)); break;
    case BS_API_COMPLETIONS: json_object_set_new(o, "prompt", flat_prompt(p)); break;
    case BS_API_MESSAGES:
        if (p->system) json_object_set_new(o, "system", json_string(p->system));
        json_object_set_new(o, "messages", message_list(p, 0));
        break;
    case BS_API_RESPONSES:
        if (p->system) json_object_set_new(o, "instructions", json_string(p->system));
        json_object_set_new(o, "input", message_list(p, 0));
        break;
    }
    json_object_set_new(o, a == BS_API_RESPONSES ? "max_output_tokens" : "max_tokens", json_integer(g->max_tokens));
    json_object_set_new(o, "stream", json_true());
    if (a == BS_API_CHAT || a == BS_API_COMPLETIONS)
        json_object_set_new(o, "stream_options", json_pack("{s:b}", "include_usage", 1));
    if (g->temperature >= 0) json_object_set_new(o, "temperature", json_real(g->temperature));
    if (g->ignore_eos) json_object_set_new(o, "ignore_eos", json_true());
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s) return -1;
    int rc = bs_buf_puts(out, s);
    free(s);
    return rc;
}

static long num(json_t *o, const char *k) {
    json_t *x = json_object_get(o, k);
    return json_is_integer(x) ? (long)json_integer_value(x) : 0;
}

static int fail(bs_stream *s, const char *what, json_t *err) {
    const char *m = NULL;
    json_t *e = json_object_get(err, "error");
    if (json_is_object(e)) m = json_string_value(json_object_get(e, "message"));
    if (!m) m = json_string_value(json_object_get(err, "message"));
    snprintf(s->error, sizeof s->error, "%s%s%s", what, m ? ": " : "", m ? m : "");
    s->failed = 1;
    return -1;
}

/* OpenAI-style usage (Chat, Completions). */
static void openai_usage(bs_stream *s, json_t *u) {
    if (!json_is_object(u)) return;
    s->prompt_tokens = num(u, "prompt_tokens");
    s->output_tokens = num(u, "completion_tokens");
    s->cached_tokens = num(json_object_get(u, "prompt_tokens_details"), "cached_tokens");
    s->replayed_tokens = num(json_object_get(u, "prompt_tokens_details"), "replayed_tokens"); /* cinfer */
    s->have_usage = 1;
}

static int add_text(bs_stream *s, json_t *t, int answer) {
    const char *v = json_string_value(t);
    size_t n = json_string_length(t); /* text may hold U+0000 (JSON_ALLOW_NUL) */
    if (!v || !n) return 0;
    if (answer && bs_buf_append(&s->text, v, n)) return fail(s, "out of memory", NULL);
    return 1;
}

static int chat_event(bs_stream *s, json_t *o) {
    openai_usage(s, json_object_get(o, "usage"));
    json_t *c = json_array_get(json_object_get(o, "choices"), 0);
    if (!c) return 0;
    if (s->api == BS_API_COMPLETIONS) return add_text(s, json_object_get(c, "text"), 1);
    json_t *d = json_object_get(c, "delta");
    int r = add_text(s, json_object_get(d, "content"), 1);
    if (r) return r;
    r = add_text(s, json_object_get(d, "reasoning_content"), 0);
    if (r) return r;
    if (add_text(s, json_object_get(d, "reasoning"), 0)) return 1;
    return json_array_size(json_object_get(d, "tool_calls")) ? 1 : 0;
}

static void anthropic_usage(bs_stream *s, json_t *u) {
    if (!json_is_object(u)) return;
    if (json_object_get(u, "input_tokens")) {
        long read = num(u, "cache_read_input_tokens"), write = num(u, "cache_creation_input_tokens");
        s->prompt_tokens = num(u, "input_tokens") + read + write;
        s->cached_tokens = read;
        s->replayed_tokens = num(u, "cinfer_replayed_input_tokens"); /* inside input_tokens */
    }
    if (json_object_get(u, "output_tokens")) s->output_tokens = num(u, "output_tokens");
    s->have_usage = 1;
}

static int messages_event(bs_stream *s, const char *type, json_t *o) {
    if (!strcmp(type, "message_start")) anthropic_usage(s, json_object_get(json_object_get(o, "message"), "usage"));
    else if (!strcmp(type, "message_delta")) anthropic_usage(s, json_object_get(o, "usage"));
    else if (!strcmp(type, "message_stop")) s->finished = 1;
    else if (!strcmp(type, "error")) return fail(s, "error event", o);
    else if (!strcmp(type, "content_block_delta")) {
        json_t *d = json_object_get(o, "delta");
        int r = add_text(s, json_object_get(d, "text"), 1);
        if (r) return r;
        if (add_text(s, json_object_get(d, "thinking"), 0)) return 1;
        return add_text(s, json_object_get(d, "partial_json"), 0);
    }
    return 0;
}

static int responses_event(bs_stream *s, const char *type, json_t *o) {
    if (!strcmp(type, "response.output_text.delta")) return add_text(s, json_object_get(o, "delta"), 1);
    if (!strncmp(type, "response.reasoning", 18) && strstr(type, ".delta"))
        return add_text(s, json_object_get(o, "delta"), 0);
    if (!strcmp(type, "response.function_call_arguments.delta")) return add_text(s, json_object_get(o, "delta"), 0);
    if (!strcmp(type, "response.completed") || !strcmp(type, "response.incomplete")) {
        json_t *u = json_object_get(json_object_get(o, "response"), "usage");
        if (json_is_object(u)) {
            s->prompt_tokens = num(u, "input_tokens");
            s->output_tokens = num(u, "output_tokens");
            s->cached_tokens = num(json_object_get(u, "input_tokens_details"), "cached_tokens");
            s->replayed_tokens = num(json_object_get(u, "input_tokens_details"), "replayed_tokens"); /* cinfer */
            s->have_usage = 1;
        }
        s->finished = 1;
    } else if (!strcmp(type, "response.failed")) {
        return fail(s, "response.failed", json_object_get(json_object_get(o, "response"), "error"));
    } else if (!strcmp(type, "error")) {
        return fail(s, "error event", o);
    }
    return 0;
}

int bs_stream_event(bs_stream *s, const char *event, const char *data, size_t len) {
    if (s->api <= BS_API_COMPLETIONS && len == 6 && !memcmp(data, "[DONE]", 6)) {
        s->finished = 1;
        return 0;
    }
    json_error_t je;
    /* a model may stream any code point, U+0000 included */
    json_t *o = json_loadb(data, len, JSON_ALLOW_NUL, &je);
    if (!json_is_object(o)) {
        json_decref(o);
        char why[2 * JSON_ERROR_TEXT_LENGTH];
        snprintf(s->error, sizeof s->error, "event is not a JSON object: %.100s",
                 cf_log_escape_str(why, sizeof why, je.text));
        s->failed = 1;
        return -1;
    }
    int r;
    if (s->api <= BS_API_COMPLETIONS) {
        r = json_object_get(o, "error") ? fail(s, "error event", o) : chat_event(s, o);
    } else {
        const char *type = json_string_value(json_object_get(o, "type"));
        if (!type) type = event;
        r = s->api == BS_API_MESSAGES ? messages_event(s, type, o) : responses_event(s, type, o);
    }
    json_decref(o);
    return r;
}

void bs_stream_free(bs_stream *s) { bs_buf_free(&s->text); }
