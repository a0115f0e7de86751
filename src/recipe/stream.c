/* stream.c - stateful SSE encoders, one object per streamed response
 * (protocols.md §1.3, §2.3, §3.3, §4.4). Input: canonical events (the output
 * parser's events plus FINISH/ERROR/PING). The encoder tracks the one open
 * content block / output item, block and output indexes, Responses sequence
 * numbers and the assembled output (for Responses' final snapshot and
 * Anthropic's signature), and writes complete SSE events into the caller's
 * buffer. Per-delta events are written by hand (escaped strings, no jansson
 * allocation); only the opening/closing snapshots go through jansson.
 * Caller: src/serve (one encoder per streaming request), python/ bindings. */
#include <stdio.h>
#include <stdlib.h>

#include "recipe/openai_out.h"
#include "recipe/recipe_internal.h"

typedef enum { B_NONE = -1, B_REASONING = 0, B_TEXT, B_TOOL } block_kind;

typedef struct block {
    block_kind kind;
    int tool_index; /* event index of a tool call */
    char *id, *name; /* tool call id/name */
    char item_id[64]; /* Responses item id */
    recipe_buf text; /* reasoning / text / arguments so far */
} block;

struct recipe_stream_encoder {
    recipe_api api;
    char *id, *model;
    int64_t created, prompt_tokens, cache_read;
    bool include_usage, started, done, any_tool;
    int64_t seq; /* Responses sequence_number */
    block *blocks;
    size_t n_blocks, cap_blocks;
    int open; /* index of the open block, -1 none */
    json_t *echo; /* Responses: echoed request settings */
    chat_stream *chat; /* Chat / Completions: the writer of openai_out.c */
    recipe_buf tmp;
};

static char *dupstr(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

recipe_stream_encoder *recipe_stream_encoder_new(recipe_api api, const recipe_stream_info *info) {
    if ((unsigned)api >= RECIPE_API_COUNT || !info) return NULL;
    recipe_stream_encoder *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->api = api;
    e->open = -1;
    char tmp[64];
    const char *id = info->id;
    if (!id) {
        mint_id(tmp, sizeof tmp,
                api == RECIPE_API_CHAT       ? (info->completion ? "cmpl-" : "chatcmpl-")
                : api == RECIPE_API_MESSAGES ? "msg_"
                                             : "resp_",
                (uint64_t)info->created * 2654435761u ^ (uintptr_t)e);
        id = tmp;
    }
    e->id = dupstr(id);
    e->model = dupstr(info->model ? info->model : "");
    e->created = info->created;
    e->prompt_tokens = info->prompt_tokens;
    e->cache_read = info->cache_read;
    e->include_usage = info->include_usage;
    if (!e->id || !e->model) {
        recipe_stream_encoder_free(e);
        return NULL;
    }
    if (api == RECIPE_API_RESPONSES) {
        e->echo = json_object();
        if (!e->echo) {
            recipe_stream_encoder_free(e);
            return NULL;
        }
        responses_echo(e->echo, info->req);
    }
    if (api == RECIPE_API_CHAT && !(e->chat = chat_stream_new(info, e->id))) { /* openai_out.c */
        recipe_stream_encoder_free(e);
        return NULL;
    }
    return e;
}

void recipe_stream_encoder_free(recipe_stream_encoder *e) {
    if (!e) return;
    for (size_t i = 0; i < e->n_blocks; i++) {
        free(e->blocks[i].id);
        free(e->blocks[i].name);
        recipe_buf_free(&e->blocks[i].text);
    }
    free(e->blocks);
    free(e->id);
    free(e->model);
    json_decref(e->echo);
    chat_stream_free(e->chat);
    recipe_buf_free(&e->tmp);
    free(e);
}

bool recipe_stream_encoder_done(const recipe_stream_encoder *e) {
    return e->chat ? chat_stream_done(e->chat) : e->done;
}

static block *new_block(recipe_stream_encoder *e, block_kind k) {
    if (e->n_blocks == e->cap_blocks) {
        size_t cap = e->cap_blocks ? e->cap_blocks * 2 : 4;
        block *nb = realloc(e->blocks, cap * sizeof *nb);
        if (!nb) return NULL;
        e->blocks = nb;
        e->cap_blocks = cap;
    }
    block *b = &e->blocks[e->n_blocks++];
    memset(b, 0, sizeof *b);
    b->kind = k;
    b->tool_index = -1;
    static const char *pre[] = {"rs_", "msg_", "fc_"};
    uint64_t h = 1469598103934665603ull; /* ids derived from the response id: deterministic */
    for (const char *c = e->id; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    mint_id(b->item_id, sizeof b->item_id, pre[k], h + e->n_blocks);
    return b;
}

/* ---------------------------------------------------------------- SSE writers */

static int sse_named(recipe_buf *out, const char *event, const json_t *data) {
    if (rb_printf(out, "event: %s\ndata: ", event) || rb_json(out, data)) return -1;
    return rb_put(out, "\n\n", 2);
}

/* Responses: adds type + sequence_number to `data` (stolen) and writes it. */
static int resp_event(recipe_stream_encoder *e, recipe_buf *out, const char *type, json_t *data) {
    if (!data) return -1;
    json_object_set_new(data, "type", json_string(type));
    json_object_set_new(data, "sequence_number", json_integer(e->seq++));
    int rc = sse_named(out, type, data);
    json_decref(data);
    return rc;
}

static json_t *resp_snapshot(recipe_stream_encoder *e, recipe_finish f, const recipe_usage *u, const char *errmsg) {
    recipe_response r;
    recipe_response_init(&r);
    json_t *o = json_object();
    jset(o, "id", jsnew(e->id));
    jset(o, "object", json_string("response"));
    jset(o, "created_at", json_integer(e->created));
    responses_status(o, f, errmsg);
    jset(o, "model", jsnew(e->model));
    json_t *output = json_array();
    for (size_t i = 0; i < e->n_blocks && f != RECIPE_FINISH_NONE; i++) {
        block *b = &e->blocks[i];
        recipe_part p = {0};
        p.item_id = b->item_id;
        const char *txt = b->text.data ? b->text.data : "";
        if (b->kind == B_REASONING) p.type = RECIPE_PART_REASONING, p.text = txt;
        else if (b->kind == B_TEXT) p.type = RECIPE_PART_TEXT, p.text = txt;
        else p.type = RECIPE_PART_TOOL_CALL, p.id = b->id, p.name = b->name, p.args = b->text.data ? txt : "{}";
        r.parts = &p;
        r.n_parts = 1;
        json_t *items = responses_output(&r, e->id);
        json_array_extend(output, items);
        json_decref(items);
    }
    jset(o, "output", output);
    json_object_update(o, e->echo);
    jset(o, "usage", u ? usage_responses(u) : json_null());
    return o;
}

static json_t *resp_item(recipe_stream_encoder *e, block *b, bool done) {
    const char *txt = b->text.data ? b->text.data : "";
    const char *status = done ? "completed" : "in_progress";
    (void)e;
    switch (b->kind) {
    case B_REASONING:
        return json_pack("{s:s,s:s,s:[],s:o,s:s}", "type", "reasoning", "id", b->item_id, "summary", "content",
                         done ? json_pack("[{s:s,s:o}]", "type", "reasoning_text", "text", jsnew(txt)) : json_array(),
                         "status", status);
    case B_TEXT:
        return json_pack("{s:s,s:s,s:s,s:s,s:o}", "type", "message", "id", b->item_id, "status", status, "role",
                         "assistant", "content",
                         done ? json_pack("[{s:s,s:o,s:[]}]", "type", "output_text", "text", jsnew(txt), "annotations")
                              : json_array());
    default:
        return json_pack("{s:s,s:s,s:o,s:o,s:o,s:s}", "type", "function_call", "id", b->item_id, "call_id",
                         jsnew(b->id), "name", jsnew(b->name), "arguments",
                         jsnew(done ? (b->text.data ? txt : "{}") : ""), "status", status);
    }
}

static json_t *resp_part(block *b, bool done) {
    const char *txt = done && b->text.data ? b->text.data : "";
    if (b->kind == B_REASONING) return json_pack("{s:s,s:o}", "type", "reasoning_text", "text", jsnew(txt));
    return json_pack("{s:s,s:o,s:[]}", "type", "output_text", "text", jsnew(txt), "annotations");
}

/* ---------------------------------------------------------------- open / close */

static int open_block(recipe_stream_encoder *e, block *b, recipe_buf *out) {
    int idx = (int)(b - e->blocks);
    e->open = idx;
    if (e->api == RECIPE_API_MESSAGES) {
        json_t *cb;
        if (b->kind == B_REASONING) cb = json_pack("{s:s,s:s}", "type", "thinking", "thinking", "");
        else if (b->kind == B_TEXT) cb = json_pack("{s:s,s:s}", "type", "text", "text", "");
        else
            cb = json_pack("{s:s,s:o,s:o,s:{}}", "type", "tool_use", "id", jsnew(b->id), "name", jsnew(b->name),
                           "input");
        json_t *d = json_pack("{s:s,s:i,s:o}", "type", "content_block_start", "index", idx, "content_block", cb);
        int rc = sse_named(out, "content_block_start", d);
        json_decref(d);
        return rc;
    }
    if (e->api == RECIPE_API_RESPONSES) {
        if (resp_event(e, out, "response.output_item.added",
                       json_pack("{s:i,s:o}", "output_index", idx, "item", resp_item(e, b, false))))
            return -1;
        if (b->kind != B_TOOL && resp_event(e, out, "response.content_part.added",
                                            json_pack("{s:s,s:i,s:i,s:o}", "item_id", b->item_id, "output_index", idx,
                                                      "content_index", 0, "part", resp_part(b, false))))
            return -1;
    }
    return 0;
}

static int close_block(recipe_stream_encoder *e, recipe_buf *out) {
    if (e->open < 0) return 0;
    int idx = e->open;
    block *b = &e->blocks[idx];
    e->open = -1;
    const char *txt = b->text.data ? b->text.data : "";
    if (e->api == RECIPE_API_MESSAGES) {
        if (b->kind == B_REASONING) {
            char sig[72];
            synth_signature(sig, txt, b->text.len);
            json_t *d = json_pack("{s:s,s:i,s:{s:s,s:s}}", "type", "content_block_delta", "index", idx, "delta", "type",
                                  "signature_delta", "signature", sig);
            int rc = sse_named(out, "content_block_delta", d);
            json_decref(d);
            if (rc) return -1;
        }
        json_t *d = json_pack("{s:s,s:i}", "type", "content_block_stop", "index", idx);
        int rc = sse_named(out, "content_block_stop", d);
        json_decref(d);
        return rc;
    }
    if (e->api == RECIPE_API_RESPONSES) {
        if (b->kind == B_TOOL) {
            if (resp_event(e, out, "response.function_call_arguments.done",
                           json_pack("{s:s,s:i,s:o}", "item_id", b->item_id, "output_index", idx, "arguments",
                                     jsnew(b->text.data ? txt : "{}"))))
                return -1;
        } else {
            const char *done = b->kind == B_REASONING ? "response.reasoning_text.done" : "response.output_text.done";
            if (resp_event(e, out, done,
                           json_pack("{s:s,s:i,s:i,s:o}", "item_id", b->item_id, "output_index", idx, "content_index",
                                     0, "text", jsnew(txt))) ||
                resp_event(e, out, "response.content_part.done",
                           json_pack("{s:s,s:i,s:i,s:o}", "item_id", b->item_id, "output_index", idx, "content_index",
                                     0, "part", resp_part(b, true))))
                return -1;
        }
        return resp_event(e, out, "response.output_item.done",
                          json_pack("{s:i,s:o}", "output_index", idx, "item", resp_item(e, b, true)));
    }
    return 0;
}

/* ---------------------------------------------------------------- Anthropic / Responses deltas */

static int delta_event(recipe_stream_encoder *e, block *b, const char *s, size_t n, recipe_buf *out) {
    int idx = (int)(b - e->blocks);
    if (rb_put(&b->text, s, n)) return -1;
    if (e->api == RECIPE_API_MESSAGES) {
        static const char *dt[] = {"{\"type\":\"thinking_delta\",\"thinking\":", "{\"type\":\"text_delta\",\"text\":",
                                   "{\"type\":\"input_json_delta\",\"partial_json\":"};
        if (rb_printf(
                out,
                "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":%d,\"delta\":", idx) ||
            rb_puts(out, dt[b->kind]) || rb_json_str(out, s, n) || rb_puts(out, "}}\n\n"))
            return -1;
        return 0;
    }
    static const char *rt[] = {"response.reasoning_text.delta", "response.output_text.delta",
                               "response.function_call_arguments.delta"};
    const char *type = rt[b->kind];
    if (rb_printf(out,
                  "event: %s\ndata: {\"type\":\"%s\",\"sequence_number\":%lld,\"item_id\":\"%s\",\"output_index\":%d,",
                  type, type, (long long)e->seq++, b->item_id, idx) ||
        (b->kind != B_TOOL && rb_puts(out, "\"content_index\":0,")) || rb_puts(out, "\"delta\":") ||
        rb_json_str(out, s, n) || (b->kind == B_TEXT && rb_puts(out, ",\"logprobs\":[]")) || rb_puts(out, "}\n\n"))
        return -1;
    return 0;
}

static int start_stream(recipe_stream_encoder *e, recipe_buf *out) {
    e->started = true;
    if (e->api == RECIPE_API_MESSAGES) {
        recipe_usage u = {.prompt = e->prompt_tokens, .cache_read = e->cache_read, .output = 1};
        json_t *d = json_pack("{s:s,s:{s:o,s:s,s:s,s:o,s:[],s:n,s:n,s:o}}", "type", "message_start", "message", "id",
                              jsnew(e->id), "type", "message", "role", "assistant", "model", jsnew(e->model), "content",
                              "stop_reason", "stop_sequence", "usage", usage_messages(&u));
        int rc = sse_named(out, "message_start", d);
        json_decref(d);
        return rc;
    }
    if (resp_event(e, out, "response.created",
                   json_pack("{s:o}", "response", resp_snapshot(e, RECIPE_FINISH_NONE, NULL, NULL))))
        return -1;
    return resp_event(e, out, "response.in_progress",
                      json_pack("{s:o}", "response", resp_snapshot(e, RECIPE_FINISH_NONE, NULL, NULL)));
}

static block *tool_block(recipe_stream_encoder *e, int index) {
    for (size_t i = e->n_blocks; i-- > 0;)
        if (e->blocks[i].kind == B_TOOL && e->blocks[i].tool_index == index) return &e->blocks[i];
    return NULL;
}

int recipe_stream_encoder_event(recipe_stream_encoder *e, const recipe_event *ev, recipe_buf *out, recipe_error *err) {
    if (e->chat) return chat_stream_event(e->chat, ev, out, err); /* Chat / Completions: openai_out.c */
    if (e->done) return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "stream already finished");
    if (!e->started && start_stream(e, out)) return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
    int rc = 0;
    switch (ev->type) {
    case RECIPE_EV_REASONING:
    case RECIPE_EV_TEXT: {
        if (!ev->len) return 0;
        block_kind k = ev->type == RECIPE_EV_TEXT ? B_TEXT : B_REASONING;
        block *b = e->open >= 0 ? &e->blocks[e->open] : NULL;
        if (!b || b->kind != k) {
            if (close_block(e, out)) goto oom;
            if (!(b = new_block(e, k)) || open_block(e, b, out)) goto oom;
        }
        rc = delta_event(e, b, ev->text, ev->len, out);
        break;
    }
    case RECIPE_EV_TOOL_BEGIN: {
        if (close_block(e, out)) goto oom;
        block *b = new_block(e, B_TOOL);
        if (!b) goto oom;
        b->tool_index = ev->index;
        b->id = dupstr(ev->id ? ev->id : b->item_id);
        b->name = dupstr(ev->name ? ev->name : "");
        e->any_tool = true;
        rc = open_block(e, b, out);
        break;
    }
    case RECIPE_EV_TOOL_ARGS: {
        block *b = tool_block(e, ev->index);
        if (!b || e->open != (int)(b - e->blocks))
            return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "tool arguments for call %d that is not open", ev->index);
        if (!ev->len) return 0;
        rc = delta_event(e, b, ev->text, ev->len, out);
        break;
    }
    case RECIPE_EV_TOOL_END: {
        block *b = tool_block(e, ev->index);
        if (b && e->open == (int)(b - e->blocks)) rc = close_block(e, out);
        break;
    }
    case RECIPE_EV_FINISH: {
        if (close_block(e, out)) goto oom;
        e->done = true;
        recipe_finish f = e->any_tool ? RECIPE_FINISH_TOOL_CALLS : ev->finish;
        if (e->api == RECIPE_API_MESSAGES) {
            const char *sr = recipe_finish_messages(f);
            /* the final usage, cumulative as Anthropic sends it: message_start was written before the
             * prefix cache was consulted, so the input split (cache reads) is only right here */
            json_t *d =
                json_pack("{s:s,s:{s:s,s:o},s:o}", "type", "message_delta", "delta", "stop_reason",
                          sr ? sr : "end_turn", "stop_sequence",
                          f == RECIPE_FINISH_STOP_STRING && ev->stop_sequence ? jsnew(ev->stop_sequence) : json_null(),
                          "usage", usage_messages(&ev->usage));
            rc = sse_named(out, "message_delta", d);
            json_decref(d);
            if (!rc) rc = rb_puts(out, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
        } else {
            const char *type =
                f == RECIPE_FINISH_LENGTH || f == RECIPE_FINISH_CONTENT_FILTER || f == RECIPE_FINISH_CANCELLED
                    ? "response.incomplete"
                : f == RECIPE_FINISH_ERROR ? "response.failed"
                                           : "response.completed";
            rc = resp_event(e, out, type, json_pack("{s:o}", "response", resp_snapshot(e, f, &ev->usage, NULL)));
        }
        break;
    }
    case RECIPE_EV_ERROR: {
        if (close_block(e, out)) goto oom;
        e->done = true;
        json_t *msg = json_stringn(ev->text ? ev->text : "", ev->text ? ev->len : 0);
        if (!msg) msg = json_string("generation failed");
        if (e->api == RECIPE_API_MESSAGES) {
            json_t *d = json_pack("{s:s,s:{s:s,s:o}}", "type", "error", "error", "type", "api_error", "message", msg);
            rc = sse_named(out, "error", d);
            json_decref(d);
        } else {
            rc = resp_event(e, out, "error",
                            json_pack("{s:s,s:O,s:n}", "code", "server_error", "message", msg, "param"));
            if (!rc)
                rc = resp_event(e, out, "response.failed",
                                json_pack("{s:o}", "response",
                                          resp_snapshot(e, RECIPE_FINISH_ERROR, NULL, json_string_value(msg))));
            json_decref(msg);
        }
        break;
    }
    case RECIPE_EV_PING:
        rc = e->api == RECIPE_API_MESSAGES ? rb_puts(out, "event: ping\ndata: {\"type\":\"ping\"}\n\n")
                                           : rb_puts(out, ": ping\n\n");
        break;
    }
    return rc ? recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory") : 0;
oom:
    return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
}
