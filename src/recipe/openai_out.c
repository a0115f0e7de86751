/* openai_out.c - the OpenAI Chat Completions and Completions output side: the one SSE writer of
 * each (chat.completion.chunk / text_completion chunks, any number of choices side by side, with
 * log-probabilities), the logprobs objects of both APIs, and the Completions response body.
 * The Chat response body with several choices is written by chat.c through oai_logprobs_json.
 *
 * Stream invariants: the Chat role chunk of every choice comes first (one per choice); each
 * choice finishes on its own (its finish chunk: tool_calls when it began a call, the canonical
 * finish otherwise, "abort" when cancelled); once every choice has finished the usage chunk
 * (stream_options.include_usage) and "data: [DONE]" end the stream - unless the event that ended
 * the last choice was an error: then the error object is the stream's last event. Completions
 * text_offset continues across the chunks of a choice (the sum of the token strings so far).
 * Token strings: the token's bytes when they are valid UTF-8, else "bytes:\xNN..." (OpenAI's form);
 * Chat adds the raw "bytes". Per-delta chunks are written by hand into the caller's buffer.
 * Callers: stream.c (recipe_stream_encoder for RECIPE_API_CHAT), codec.c / chat.c (bodies). */
#include <stdio.h>
#include <stdlib.h>

#include "recipe/openai_out.h"
#include "recipe/recipe_internal.h"

typedef struct oc_choice {
    bool done, any_tool;
    int *tools; /* tool call indexes begun (arguments for others are a misuse) */
    size_t n_tools, cap_tools;
    int64_t text_offset;
} oc_choice;

struct chat_stream {
    bool completion, include_usage, started;
    char *id, *model;
    int64_t created;
    oc_choice *ch;
    int n, n_done;
    recipe_buf prefix; /* "data: {"id":..,"object":..,"created":..,"model":..,"choices":[{"index":" */
};

/* ---------------------------------------------------------------- token strings and logprobs */

/* The token string as a JSON string (see the file comment); its length in characters of the
 * string value goes to *vlen (Completions text_offset). */
static int put_token(recipe_buf *b, const char *s, size_t n, size_t *vlen) {
    if (rj_utf8_valid(s, n)) {
        if (vlen) *vlen = n;
        return rb_json_str(b, s, n);
    }
    size_t at0 = b->len;
    rb_puts(b, "\"bytes:");
    for (size_t i = 0; i < n; i++) rb_printf(b, "\\\\x%02x", (unsigned char)s[i]);
    rb_puts(b, "\"");
    if (vlen) *vlen = 6 + 4 * n;
    return b->failed || b->len < at0 ? -1 : 0;
}

static void put_bytes(recipe_buf *b, const char *s, size_t n) {
    rb_puts(b, "[");
    for (size_t i = 0; i < n; i++) rb_printf(b, i ? ",%u" : "%u", (unsigned)(unsigned char)s[i]);
    rb_puts(b, "]");
}

int oai_logprobs_json(recipe_buf *b, const recipe_logprob *lp, size_t n, bool completion, int64_t *offset) {
    if (!completion) {
        rb_puts(b, "{\"content\":[");
        for (size_t i = 0; i < n; i++) {
            rb_puts(b, i ? ",{\"token\":" : "{\"token\":");
            put_token(b, lp[i].token, lp[i].len, NULL);
            rb_puts(b, ",\"logprob\":");
            rb_real(b, lp[i].logprob);
            rb_puts(b, ",\"bytes\":");
            put_bytes(b, lp[i].token, lp[i].len);
            rb_puts(b, ",\"top_logprobs\":[");
            for (size_t k = 0; k < lp[i].n_top; k++) {
                const recipe_logprob *t = &lp[i].top[k];
                rb_puts(b, k ? ",{\"token\":" : "{\"token\":");
                put_token(b, t->token, t->len, NULL);
                rb_puts(b, ",\"logprob\":");
                rb_real(b, t->logprob);
                rb_puts(b, ",\"bytes\":");
                put_bytes(b, t->token, t->len);
                rb_puts(b, "}");
            }
            rb_puts(b, "]}");
        }
        rb_puts(b, "]}");
        return b->failed ? -1 : 0;
    }
    int64_t at = offset ? *offset : 0;
    rb_puts(b, "{\"tokens\":[");
    for (size_t i = 0; i < n; i++) {
        if (i) rb_puts(b, ",");
        put_token(b, lp[i].token, lp[i].len, NULL);
    }
    rb_puts(b, "],\"token_logprobs\":[");
    for (size_t i = 0; i < n; i++) {
        if (i) rb_puts(b, ",");
        rb_real(b, lp[i].logprob);
    }
    rb_puts(b, "],\"top_logprobs\":[");
    for (size_t i = 0; i < n; i++) {
        rb_puts(b, i ? ",{" : "{");
        bool first = true;
        for (size_t k = 0; k < lp[i].n_top; k++) { /* an object: a token string repeated is written once */
            const recipe_logprob *t = &lp[i].top[k];
            bool seen = false;
            for (size_t q = 0; q < k && !seen; q++)
                seen = lp[i].top[q].len == t->len && !memcmp(lp[i].top[q].token, t->token, t->len);
            if (seen) continue;
            if (!first) rb_puts(b, ",");
            first = false;
            put_token(b, t->token, t->len, NULL);
            rb_puts(b, ":");
            rb_real(b, t->logprob);
        }
        rb_puts(b, "}");
    }
    rb_puts(b, "],\"text_offset\":[");
    for (size_t i = 0; i < n; i++) {
        recipe_buf tmp = {0};
        size_t vlen = 0;
        put_token(&tmp, lp[i].token, lp[i].len, &vlen);
        recipe_buf_free(&tmp);
        rb_printf(b, i ? ",%lld" : "%lld", (long long)at);
        at += (int64_t)vlen;
    }
    rb_puts(b, "]}");
    if (offset) *offset = at;
    return b->failed ? -1 : 0;
}

/* ---------------------------------------------------------------- stream */

static char *dupstr(const char *s) {
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

chat_stream *chat_stream_new(const recipe_stream_info *info, const char *id) {
    chat_stream *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->completion = info->completion;
    c->include_usage = info->include_usage;
    c->created = info->created;
    c->n = info->n_choices > 1 ? info->n_choices : 1;
    c->id = dupstr(id);
    c->model = dupstr(info->model ? info->model : "");
    c->ch = calloc((size_t)c->n, sizeof *c->ch);
    recipe_buf *p = &c->prefix;
    if (!c->id || !c->model || !c->ch) goto fail;
    rb_puts(p, "data: {\"id\":");
    rb_json_str(p, c->id, strlen(c->id));
    rb_printf(p, ",\"object\":\"%s\",\"created\":%lld,\"model\":",
              c->completion ? "text_completion" : "chat.completion.chunk", (long long)c->created);
    rb_json_str(p, c->model, strlen(c->model));
    rb_puts(p, ",\"choices\":[{\"index\":");
    if (p->failed) goto fail;
    return c;
fail:
    chat_stream_free(c);
    return NULL;
}

void chat_stream_free(chat_stream *c) {
    if (!c) return;
    for (int i = 0; c->ch && i < c->n; i++) free(c->ch[i].tools);
    free(c->ch);
    free(c->id);
    free(c->model);
    recipe_buf_free(&c->prefix);
    free(c);
}

bool chat_stream_done(const chat_stream *c) { return c->n_done == c->n; }

/* Chunk head up to the choice's payload: prefix + index + ("delta": or "text":). */
static void chunk_begin(chat_stream *c, int choice, recipe_buf *out) {
    rb_put(out, c->prefix.data, c->prefix.len);
    rb_printf(out, "%d,%s", choice, c->completion ? "\"text\":" : "\"delta\":");
}

static void chunk_end(chat_stream *c, oc_choice *ch, recipe_buf *out, const recipe_event *ev, const char *finish) {
    rb_puts(out, ",\"logprobs\":");
    if (ev && ev->n_logprobs) oai_logprobs_json(out, ev->logprobs, ev->n_logprobs, c->completion, &ch->text_offset);
    else rb_puts(out, "null");
    rb_puts(out, ",\"finish_reason\":");
    if (finish) rb_json_str(out, finish, strlen(finish));
    else rb_puts(out, "null");
    rb_puts(out, "}]");
    if (c->include_usage) rb_puts(out, ",\"usage\":null");
    rb_puts(out, "}\n\n");
}

static void start(chat_stream *c, recipe_buf *out) {
    c->started = true;
    for (int i = 0; i < c->n && !c->completion; i++) {
        chunk_begin(c, i, out);
        rb_puts(out, "{\"role\":\"assistant\",\"content\":\"\"}");
        chunk_end(c, &c->ch[i], out, NULL, NULL);
    }
}

/* After the last choice: the usage chunk and [DONE]. */
static void stream_end(chat_stream *c, const recipe_event *ev, recipe_buf *out) {
    if (c->include_usage) {
        rb_puts(out, "data: {\"id\":");
        rb_json_str(out, c->id, strlen(c->id));
        rb_printf(out, ",\"object\":\"%s\",\"created\":%lld,\"model\":",
                  c->completion ? "text_completion" : "chat.completion.chunk", (long long)c->created);
        rb_json_str(out, c->model, strlen(c->model));
        rb_puts(out, ",\"choices\":[],\"usage\":");
        json_t *u = usage_chat(&ev->usage);
        if (c->completion) json_object_del(u, "completion_tokens_details");
        if (u) rb_json(out, u);
        else out->failed = true;
        json_decref(u);
        rb_puts(out, "}\n\n");
    }
    rb_puts(out, "data: [DONE]\n\n");
}

static bool tool_begun(const oc_choice *ch, int index) {
    for (size_t i = 0; i < ch->n_tools; i++)
        if (ch->tools[i] == index) return true;
    return false;
}

static int add_tool(oc_choice *ch, int index) {
    if (ch->n_tools == ch->cap_tools) {
        size_t cap = ch->cap_tools ? 2 * ch->cap_tools : 4;
        int *t = realloc(ch->tools, cap * sizeof *t);
        if (!t) return -1;
        ch->tools = t;
        ch->cap_tools = cap;
    }
    ch->tools[ch->n_tools++] = index;
    return 0;
}

static void text_event(chat_stream *c, oc_choice *ch, const recipe_event *ev, recipe_buf *out) {
    if (!ev->len && !ev->n_logprobs) return;
    chunk_begin(c, ev->choice, out);
    if (c->completion) rb_json_str(out, ev->text ? ev->text : "", ev->len);
    else if (!ev->len) rb_puts(out, "{}"); /* the text was held back: the logprobs alone */
    else {
        rb_puts(out, ev->type == RECIPE_EV_TEXT ? "{\"content\":" : "{\"reasoning_content\":");
        rb_json_str(out, ev->text, ev->len);
        rb_puts(out, "}");
    }
    chunk_end(c, ch, out, ev, NULL);
}

int chat_stream_event(chat_stream *c, const recipe_event *ev, recipe_buf *out, recipe_error *err) {
    if (chat_stream_done(c)) return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "stream already finished");
    if (ev->choice < 0 || ev->choice >= c->n)
        return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "choice %d out of range [0, %d)", ev->choice, c->n);
    oc_choice *ch = &c->ch[ev->choice];
    if (ch->done && ev->type != RECIPE_EV_PING)
        return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "choice %d already finished", ev->choice);
    if (!c->started) start(c, out);
    switch (ev->type) {
    case RECIPE_EV_REASONING:
    case RECIPE_EV_TEXT: text_event(c, ch, ev, out); break;
    case RECIPE_EV_TOOL_BEGIN:
        if (c->completion) break; /* Completions have no tool calls: the plain parser never begins one */
        if (add_tool(ch, ev->index)) out->failed = true;
        ch->any_tool = true;
        chunk_begin(c, ev->choice, out);
        rb_printf(out, "{\"tool_calls\":[{\"index\":%d,\"id\":", ev->index);
        rb_json_str(out, ev->id ? ev->id : "", ev->id ? strlen(ev->id) : 0);
        rb_puts(out, ",\"type\":\"function\",\"function\":{\"name\":");
        rb_json_str(out, ev->name ? ev->name : "", ev->name ? strlen(ev->name) : 0);
        rb_puts(out, ",\"arguments\":\"\"}}]}");
        chunk_end(c, ch, out, NULL, NULL);
        break;
    case RECIPE_EV_TOOL_ARGS:
        if (!tool_begun(ch, ev->index))
            return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "tool arguments for call %d that was not begun",
                               ev->index);
        if (!ev->len) break;
        chunk_begin(c, ev->choice, out);
        rb_printf(out, "{\"tool_calls\":[{\"index\":%d,\"function\":{\"arguments\":", ev->index);
        rb_json_str(out, ev->text, ev->len);
        rb_puts(out, "}}]}");
        chunk_end(c, ch, out, NULL, NULL);
        break;
    case RECIPE_EV_TOOL_END: break;
    case RECIPE_EV_FINISH: {
        recipe_finish f = ch->any_tool && ev->finish != RECIPE_FINISH_ERROR ? RECIPE_FINISH_TOOL_CALLS : ev->finish;
        const char *fr = recipe_finish_chat(f);
        chunk_begin(c, ev->choice, out);
        rb_puts(out, c->completion ? "\"\"" : "{}");
        chunk_end(c, ch, out, NULL, fr ? fr : "stop");
        ch->done = true;
        if (++c->n_done == c->n) stream_end(c, ev, out);
        break;
    }
    case RECIPE_EV_ERROR:
        rb_puts(out, "data: {\"error\":{\"message\":");
        rb_json_str(out, ev->text ? ev->text : "", ev->text ? ev->len : 0);
        rb_puts(out, ",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n");
        ch->done = true;
        ++c->n_done; /* a stream that ends with an error has no [DONE]: the error object is its last event */
        break;
    case RECIPE_EV_PING: rb_puts(out, ": ping\n\n"); break;
    }
    return out->failed ? recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory") : 0;
}

/* ---------------------------------------------------------------- Completions response body */

static const char *choice_text(recipe_arena *a, const recipe_part *ps, size_t n) {
    const char *t = join_text(a, ps, n, "");
    return t ? t : "";
}

json_t *completions_response_encode(const recipe_response *r, recipe_error *err) {
    recipe_arena a = {0};
    json_t *choices = json_array();
    recipe_choice one = {
        .parts = r->parts, .n_parts = r->n_parts, .finish = r->finish, .stop_sequence = r->stop_sequence};
    const recipe_choice *cs = r->n_choices ? r->choices : &one;
    size_t n = r->n_choices ? r->n_choices : 1;
    for (size_t i = 0; choices && i < n; i++) {
        json_t *c = json_object();
        jset(c, "index", json_integer((json_int_t)i));
        jset(c, "text", jsnew(choice_text(&a, cs[i].parts, cs[i].n_parts)));
        json_t *lp = NULL;
        if (cs[i].logprobs) {
            recipe_buf b = {0};
            int64_t off = 0;
            if (!oai_logprobs_json(&b, cs[i].logprobs, cs[i].n_logprobs, true, &off)) lp = json_loads(b.data, 0, NULL);
            recipe_buf_free(&b);
            if (!lp) {
                json_decref(c);
                json_decref(choices);
                ra_free(&a);
                recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
                return NULL;
            }
        }
        jset(c, "logprobs", lp ? lp : json_null());
        const char *fr = recipe_finish_chat(cs[i].finish);
        jset(c, "finish_reason", fr ? json_string(fr) : json_null());
        if (cs[i].finish == RECIPE_FINISH_STOP_STRING && cs[i].stop_sequence)
            jset_str(c, "stop_reason", cs[i].stop_sequence);
        json_array_append_new(choices, c);
    }
    json_t *o = json_object();
    jset(o, "id", jsnew(r->id ? r->id : default_id(&a, "cmpl-", r)));
    jset(o, "object", json_string("text_completion"));
    jset(o, "created", json_integer(r->created));
    jset(o, "model", jsnew(r->model ? r->model : ""));
    jset(o, "choices", choices);
    if (r->has_usage) {
        json_t *u = usage_chat(&r->usage);
        json_object_del(u, "completion_tokens_details");
        jset(o, "usage", u);
    }
    ra_free(&a);
    return o;
}
