/* api_output.c - the output half of the recipe-backed chat APIs (see api.h):
 * engine text -> recipe parser -> stream encoder (SSE) or response body, and
 * saving Responses into the store.
 *
 * Output: one parser per streamed response (events -> stream encoder); the
 * final body re-parses the accumulated text with the same id seed, so the
 * tool-call ids of a stream and of its stored object agree. Finish: EOS /
 * stop string -> tool_calls when a call was parsed, else EOS; length ->
 * LENGTH (cancelled too; Chat patches it to "abort"); engine error -> ERROR.
 * A part_acc holds at most 64 output parts (reasoning / text / calls); more are dropped. */
#include "serve/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static recipe_finish finish_of(const api_job *a, const gen_choice *c, int tool_calls) {
    (void)a;
    switch (c->finish) {
    case CINFER_FINISH_LENGTH:
    case CINFER_FINISH_CANCELLED: return tool_calls ? RECIPE_FINISH_TOOL_CALLS : RECIPE_FINISH_LENGTH;
    case CINFER_FINISH_ERROR: return RECIPE_FINISH_ERROR;
    default: return tool_calls ? RECIPE_FINISH_TOOL_CALLS : RECIPE_FINISH_EOS;
    }
}

static recipe_usage usage_of(const gen_job *g) {
    recipe_usage u = {.prompt = g->usage.prompt_tokens, .cache_read = g->usage.cached_tokens,
                      .output = g->usage.completion_tokens};
    return u;
}

void api_job_prompt_check(api_job *a, const gen_job *g, const tokenizer *tok) {
    char tail[96];
    size_t n = 0;
    int32_t from = g->n_prompt > 3 ? g->n_prompt - 3 : 0;
    for (int32_t i = from; i < g->n_prompt; i++) {
        size_t k = tokenizer_token_bytes(tok, g->prompt[i], true, tail + n, sizeof tail - 1 - n);
        n += k < sizeof tail - 1 - n ? k : sizeof tail - 1 - n;
    }
    while (n && (tail[n - 1] == '\n' || tail[n - 1] == ' ' || tail[n - 1] == '\r')) n--;
    tail[n] = 0;
    if (n >= 7 && !strcmp(tail + n - 7, "<think>")) a->flags |= RECIPE_PARSER_IN_REASONING;
}

int api_job_begin(api_job *a, const gen_job *g, const char *model) {
    recipe_stream_info info = {.id = a->id, .model = model, .created = a->created, .prompt_tokens = g->n_prompt,
                               .cache_read = 0, .include_usage = a->req.include_usage == 1, .req = &a->req};
    a->parser = recipe_parser_new(a->kind, a->flags);
    a->enc = recipe_stream_encoder_new(a->api, &info);
    if (!a->parser || !a->enc) return -1;
    recipe_parser_set_id_seed(a->parser, a->seed);
    return 0;
}

static int encode_events(api_job *a, const recipe_event *ev, size_t n) {
    recipe_error re;
    for (size_t i = 0; i < n; i++)
        if (recipe_stream_encoder_event(a->enc, &ev[i], &a->out, &re)) return -1;
    return 0;
}

/* Recipe has no "cancelled" finish; Chat's is vLLM's "abort" (the shutdown deadline): the
 * finish chunk written from `from` on says "length" and is patched. */
static void chat_abort_patch(recipe_buf *b, size_t from) {
    static const char len_s[] = "\"finish_reason\":\"length\"", abort_s[] = "\"finish_reason\":\"abort\"";
    for (size_t i = from; i + sizeof len_s - 1 <= b->len; i++)
        if (!memcmp(b->data + i, len_s, sizeof len_s - 1)) {
            memcpy(b->data + i, abort_s, sizeof abort_s - 1);
            memmove(b->data + i + sizeof abort_s - 1, b->data + i + sizeof len_s - 1, b->len - i - (sizeof len_s - 1));
            b->len -= 1;
        }
}

int api_job_delta(api_job *a, const char *text, size_t len) {
    const recipe_event *ev;
    size_t n;
    recipe_parser_feed(a->parser, text, len, &ev, &n);
    return encode_events(a, ev, n);
}

int api_job_finish(api_job *a, const gen_job *g) {
    const gen_choice *c = &g->choices[0];
    const recipe_event *ev;
    size_t n;
    recipe_parser_finish(a->parser, &ev, &n);
    if (encode_events(a, ev, n)) return -1;
    recipe_event fin = {.type = RECIPE_EV_FINISH, .finish = finish_of(a, c, recipe_parser_tool_calls(a->parser)),
                        .has_usage = true, .usage = usage_of(g)};
    if (fin.finish == RECIPE_FINISH_ERROR) {
        fin.type = RECIPE_EV_ERROR;
        fin.text = c->error[0] ? c->error : "generation failed";
        fin.len = strlen(fin.text);
    }
    size_t from = a->out.len;
    if (encode_events(a, &fin, 1)) return -1;
    if (a->api == RECIPE_API_CHAT && c->finish == CINFER_FINISH_CANCELLED && fin.finish == RECIPE_FINISH_LENGTH)
        chat_abort_patch(&a->out, from);
    return 0;
}

/* Appends events to response parts (adjacent text / reasoning merged). */
typedef struct part_acc {
    recipe_response *r;
    recipe_buf text[64];
    recipe_part parts[64];
    size_t n;
} part_acc;

static int acc_put(recipe_buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 128;
        while (cap < b->len + n + 1) cap *= 2;
        char *q = realloc(b->data, cap);
        if (!q) return -1;
        b->data = q;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
    return 0;
}

static void acc_events(part_acc *pa, const recipe_event *ev, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const recipe_event *e = &ev[i];
        recipe_part_type t;
        if (e->type == RECIPE_EV_REASONING) t = RECIPE_PART_REASONING;
        else if (e->type == RECIPE_EV_TEXT) t = RECIPE_PART_TEXT;
        else if (e->type == RECIPE_EV_TOOL_BEGIN) t = RECIPE_PART_TOOL_CALL;
        else if (e->type == RECIPE_EV_TOOL_ARGS) {
            for (size_t k = pa->n; k-- > 0;)
                if (pa->parts[k].type == RECIPE_PART_TOOL_CALL) {
                    acc_put(&pa->text[k], e->text, e->len);
                    break;
                }
            continue;
        } else continue;
        bool merge = t != RECIPE_PART_TOOL_CALL && pa->n && pa->parts[pa->n - 1].type == t;
        if (!merge) {
            if (pa->n == 64) continue;
            memset(&pa->parts[pa->n], 0, sizeof pa->parts[0]);
            pa->parts[pa->n].type = t;
            if (t == RECIPE_PART_TOOL_CALL) {
                pa->parts[pa->n].id = recipe_response_strdup(pa->r, e->id ? e->id : "");
                pa->parts[pa->n].name = recipe_response_strdup(pa->r, e->name ? e->name : "");
            }
            pa->n++;
        }
        if (t != RECIPE_PART_TOOL_CALL) acc_put(&pa->text[pa->n - 1], e->text, e->len);
    }
}

/* Parses choice 0's text into r's parts; returns the number of tool calls. */
static int build_parts(api_job *a, const gen_job *g, recipe_response *r) {
    const gen_choice *c = &g->choices[0];
    recipe_parser *ps = recipe_parser_new(a->kind, a->flags);
    part_acc *pa = calloc(1, sizeof *pa);
    int calls = 0;
    if (ps && pa) {
        pa->r = r;
        recipe_parser_set_id_seed(ps, a->seed);
        const recipe_event *ev;
        size_t n;
        recipe_parser_feed(ps, c->text ? c->text : "", c->text_len, &ev, &n);
        acc_events(pa, ev, n);
        recipe_parser_finish(ps, &ev, &n);
        acc_events(pa, ev, n);
        calls = recipe_parser_tool_calls(ps);
        r->parts = recipe_response_alloc(r, (pa->n ? pa->n : 1) * sizeof *r->parts);
        if (r->parts) {
            for (size_t i = 0; i < pa->n; i++) {
                r->parts[i] = pa->parts[i];
                const char *s = recipe_response_strdup(r, pa->text[i].data ? pa->text[i].data : "");
                if (pa->parts[i].type == RECIPE_PART_TOOL_CALL) r->parts[i].args = pa->text[i].len ? s : "{}";
                else r->parts[i].text = s;
            }
            r->n_parts = pa->n;
        }
        for (size_t i = 0; i < 64; i++) recipe_buf_free(&pa->text[i]);
    }
    free(pa);
    recipe_parser_free(ps);
    return calls;
}

char *api_job_response(api_job *a, const gen_job *g, const char *model) {
    recipe_response r;
    recipe_response_init(&r);
    r.id = a->id;
    r.model = model;
    r.created = a->created;
    int calls = build_parts(a, g, &r);
    r.finish = finish_of(a, &g->choices[0], calls);
    if (r.finish == RECIPE_FINISH_ERROR) r.error_message = g->choices[0].error;
    r.has_usage = true;
    r.usage = usage_of(g);
    recipe_error re;
    json_t *o = recipe_response_encode(a->api, &r, &a->req, &re);
    if (o && a->api == RECIPE_API_CHAT && g->choices[0].finish == CINFER_FINISH_CANCELLED &&
        r.finish == RECIPE_FINISH_LENGTH) /* see chat_abort_patch */
        json_object_set_new(json_array_get(json_object_get(o, "choices"), 0), "finish_reason", json_string("abort"));
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (o) json_decref(o);
    recipe_response_free(&r);
    return s;
}

void api_job_save(api_job *a, const api_ctx *ctx, const gen_job *g, const char *response_json) {
    if (!a->store || !ctx->store || !a->conversation || !response_json) return;
    recipe_response r;
    recipe_response_init(&r);
    build_parts(a, g, &r);
    recipe_message m = {.role = RECIPE_ROLE_ASSISTANT, .parts = r.parts, .n_parts = r.n_parts};
    serve_error e;
    json_t *conv = json_copy(a->conversation), *o = api_template_message(&m, 0, &e);
    if (conv && o && !json_array_append_new(conv, o)) {
        o = NULL;
        rstore_put(ctx->store, a->id, conv, response_json, ctx->now);
    }
    if (o) json_decref(o);
    if (conv) json_decref(conv);
    recipe_response_free(&r);
}

void api_job_free(api_job *a) {
    if (!a->active) return;
    recipe_request_free(&a->req);
    recipe_parser_free(a->parser);
    recipe_stream_encoder_free(a->enc);
    recipe_buf_free(&a->out);
    if (a->conversation) json_decref(a->conversation);
    memset(a, 0, sizeof *a);
}
