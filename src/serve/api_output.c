/* api_output.c - the output half of the recipe-backed chat APIs (see api.h):
 * engine text -> recipe parser -> stream encoder (SSE) or response body, and
 * saving Responses into the store.
 *
 * Output: one parser per streamed response (events -> stream encoder); the
 * final body re-parses the accumulated text with the same id seed, so the
 * tool-call ids of a stream and of its stored object agree. Every parser
 * first consumes the forced tool-call opener (tool_choice required / named,
 * which the prompt already ends with), so a forced call is parsed and its
 * opener is never echoed as content. Finish: EOS / stop string -> tool_calls
 * when a call was parsed, else EOS, or STOP_STRING + the matched string when
 * the engine reports one (Anthropic stop_sequence); length -> LENGTH
 * (cancelled too, except Chat: CANCELLED, "abort"); engine error -> ERROR. Usage
 * reasoning tokens: see api_job_reasoning_tokens.
 * A part_acc holds at most 64 output parts (reasoning / text / calls); more are dropped. */
#include "serve/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

recipe_finish api_finish_of(const gen_choice *c, int tool_calls) {
    switch (c->finish) {
    case CINFER_FINISH_LENGTH:
    case CINFER_FINISH_CANCELLED: return tool_calls ? RECIPE_FINISH_TOOL_CALLS : RECIPE_FINISH_LENGTH;
    case CINFER_FINISH_ERROR: return RECIPE_FINISH_ERROR;
    default:
        if (tool_calls) return RECIPE_FINISH_TOOL_CALLS;
        return c->stop_string >= 0 ? RECIPE_FINISH_STOP_STRING : RECIPE_FINISH_EOS;
    }
}

const char *api_stop_of(const gen_job *g, const gen_choice *c) {
    return c->stop_string >= 0 && c->stop_string < g->p.n_stop ? g->p.stop[c->stop_string] : NULL;
}

static recipe_usage usage_of(const api_job *a, const gen_job *g) {
    recipe_usage u = {.prompt = g->usage.prompt_tokens, .cache_read = g->usage.cached_tokens,
                      .output = g->usage.completion_tokens, .reasoning = a->reasoning_tokens};
    return u;
}

void api_job_prompt_check(api_job *a, const gen_job *g, const tokenizer *tok) {
    a->tok = tok;
    /* the kind's start marker (Mistral [THINK]), as gen.c decides think_open; "<think>" for kinds
     * without one (a prompt that opened <think> still means the output starts inside reasoning) */
    const char *start, *end;
    if (!api_think_markers(a->kind, &start, &end)) start = "<think>";
    if (gen_ids_end_with(tok, g->prompt, g->n_prompt - g->n_suffix, start)) a->flags |= RECIPE_PARSER_IN_REASONING;
}

recipe_parser *api_job_parser(const api_job *a, const gen_job *g, int32_t ci, const recipe_event **ev, size_t *n) {
    *ev = NULL;
    *n = 0;
    recipe_parser *ps = recipe_parser_new(a->kind, a->flags);
    if (!ps) return NULL;
    recipe_parser_set_id_seed(ps, a->seed ^ (uint64_t)ci * 0x9E3779B97F4A7C15ull); /* choices: distinct ids */
    if (a->forced) {
        const char *t = g->suffix_think && a->forced_think ? a->forced_think : "";
        size_t tl = strlen(t), fl = strlen(a->forced);
        char *s = malloc(tl + fl + 1);
        if (!s) {
            recipe_parser_free(ps);
            return NULL;
        }
        memcpy(s, t, tl);
        memcpy(s + tl, a->forced, fl + 1);
        recipe_parser_feed(ps, s, tl + fl, ev, n);
        free(s);
    }
    return ps;
}

/* ---- reasoning tokens (usage) ----
 * Rule: the emitted tokens are re-detokenized one by one (the same streaming detokenizer as the
 * engine, so the pieces concatenate to the engine's text) and fed, token by token, to a fresh
 * parser of the job's kind. A token counts as reasoning when the parser emitted reasoning text
 * for it - a token whose text straddles the end of the reasoning block counts as reasoning - and
 * so does a token the parser consumed without output while the block was open (the <think> /
 * </think> markers, text held back inside the block); such held tokens are attributed once the
 * parser emits again: to reasoning if that emission contains reasoning or the block was open
 * before it. A token that closes the block and starts content in one piece counts as content.
 * Tokens that end generation (EOS, stop ids) are never emitted and never counted. */
typedef struct rcount {
    int phase;        /* 0 before any output, 1 last output was reasoning, 2 content / tool call */
    int64_t pending;  /* tokens consumed since the last output */
    int64_t n;        /* counted */
} rcount;

static void rcount_step(rcount *rc, const recipe_event *ev, size_t n, int64_t k, bool final) {
    rc->pending += k;
    bool any = false, has_r = false, last_r = false;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type != RECIPE_EV_REASONING && ev[i].type != RECIPE_EV_TEXT && ev[i].type != RECIPE_EV_TOOL_BEGIN &&
            ev[i].type != RECIPE_EV_TOOL_ARGS)
            continue;
        if (ev[i].type != RECIPE_EV_REASONING && ev[i].type != RECIPE_EV_TOOL_ARGS && !ev[i].len && !ev[i].name)
            continue; /* empty text */
        any = true;
        has_r |= ev[i].type == RECIPE_EV_REASONING;
        last_r = ev[i].type == RECIPE_EV_REASONING;
    }
    if (!any) {
        if (final && rc->phase == 1) rc->n += rc->pending, rc->pending = 0;
        return;
    }
    if (has_r) rc->n += rc->pending;
    else if (rc->phase == 1) rc->n += rc->pending - k;
    rc->pending = 0;
    rc->phase = last_r ? 1 : 2;
}

int64_t api_job_reasoning_tokens(const api_job *a, const gen_job *g, int32_t ci) {
    const gen_choice *c = &g->choices[ci];
    if (!a->tok || !c->n_acc || !c->text) return 0;
    size_t cap = 64 + (size_t)tokenizer_max_token_len(a->tok);
    char *buf = malloc(cap);
    const recipe_event *ev;
    size_t n;
    recipe_parser *ps = buf ? api_job_parser(a, g, ci, &ev, &n) : NULL;
    if (!ps) {
        free(buf);
        return 0;
    }
    rcount rc = {0};
    rcount_step(&rc, ev, n, 0, false);
    detok_stream dt;
    detok_init(&dt, a->tok, false, false);
    size_t at = 0;
    for (int32_t i = 0; i < c->n_acc; i++) {
        size_t k = detok_push(&dt, c->tokens[i], buf, cap);
        if (k > c->text_len - at) k = c->text_len - at;
        recipe_parser_feed(ps, c->text + at, k, &ev, &n);
        at += k;
        rcount_step(&rc, ev, n, 1, false);
    }
    if (at < c->text_len) { /* the detokenizer's held bytes (flush) */
        recipe_parser_feed(ps, c->text + at, c->text_len - at, &ev, &n);
        rcount_step(&rc, ev, n, 0, false);
    }
    recipe_parser_finish(ps, &ev, &n);
    rcount_step(&rc, ev, n, 0, true);
    recipe_parser_free(ps);
    free(buf);
    return rc.n;
}

int api_job_begin(api_job *a, const gen_job *g, const char *model) {
    const recipe_event *ev;
    size_t n;
    a->parser = api_job_parser(a, g, 0, &ev, &n);
    if (!a->parser) return -1;
    recipe_stream_info info = {.id = a->id, .model = model, .created = a->created, .prompt_tokens = g->n_prompt,
                               .cache_read = 0, .include_usage = a->req.include_usage == 1, .req = &a->req};
    a->enc = recipe_stream_encoder_new(a->api, &info);
    if (!a->enc) return -1;
    recipe_error re;
    for (size_t i = 0; i < n; i++) /* the forced opener's events (a named call begins) */
        if (recipe_stream_encoder_event(a->enc, &ev[i], &a->out, &re)) return -1;
    return 0;
}

static int encode_events(api_job *a, const recipe_event *ev, size_t n) {
    recipe_error re;
    if (!a->enc) return 0;
    for (size_t i = 0; i < n; i++)
        if (recipe_stream_encoder_event(a->enc, &ev[i], &a->out, &re)) return -1;
    return 0;
}

/* The canonical finish of choice 0 for this API: a cancel (the shutdown deadline) is Chat's "abort"
 * (RECIPE_FINISH_CANCELLED); Messages and Responses report it as the length limit. */
static recipe_finish finish_for(const api_job *a, const gen_choice *c, int calls) {
    if (a->api == RECIPE_API_CHAT && c->finish == CINFER_FINISH_CANCELLED && !calls) return RECIPE_FINISH_CANCELLED;
    return api_finish_of(c, calls);
}

int api_job_delta(api_job *a, const char *text, size_t len) {
    const recipe_event *ev;
    size_t n;
    if (!a->parser) return -1;
    recipe_parser_feed(a->parser, text, len, &ev, &n);
    if (recipe_parser_failed(a->parser)) return -1;
    return encode_events(a, ev, n);
}

int api_job_finish(api_job *a, const gen_job *g) {
    const gen_choice *c = &g->choices[0];
    const recipe_event *ev;
    size_t n;
    a->reasoning_tokens = api_job_reasoning_tokens(a, g, 0);
    if (!a->parser) return -1;
    recipe_parser_finish(a->parser, &ev, &n);
    if (!a->enc) return 0;
    if (encode_events(a, ev, n)) return -1;
    recipe_event fin = {.type = RECIPE_EV_FINISH, .finish = finish_for(a, c, recipe_parser_tool_calls(a->parser)),
                        .has_usage = true, .usage = usage_of(a, g)};
    if (fin.finish == RECIPE_FINISH_STOP_STRING) fin.stop_sequence = api_stop_of(g, c);
    if (recipe_parser_failed(a->parser)) fin.finish = RECIPE_FINISH_ERROR;
    if (fin.finish == RECIPE_FINISH_ERROR) {
        fin.type = RECIPE_EV_ERROR;
        fin.text = recipe_parser_failed(a->parser) ? "out of memory while parsing the output"
                   : c->error[0]                 ? c->error
                                                 : "generation failed";
        fin.len = strlen(fin.text);
    }
    return encode_events(a, &fin, 1);
}

/* Appends events to response parts (adjacent text / reasoning merged). */
typedef struct part_acc {
    recipe_response *r;
    recipe_buf text[64];
    recipe_part parts[64];
    size_t n;
} part_acc;

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
                    recipe_buf_append(&pa->text[k], e->text, e->len);
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
        if (t != RECIPE_PART_TOOL_CALL) recipe_buf_append(&pa->text[pa->n - 1], e->text, e->len);
    }
}

int api_job_parts(const api_job *a, const gen_job *g, int32_t ci, recipe_response *r) {
    const gen_choice *c = &g->choices[ci];
    const recipe_event *ev;
    size_t n;
    recipe_parser *ps = api_job_parser(a, g, ci, &ev, &n);
    part_acc *pa = calloc(1, sizeof *pa);
    int calls = 0;
    if (ps && pa) {
        pa->r = r;
        acc_events(pa, ev, n); /* the forced opener's events */
        recipe_parser_feed(ps, c->text ? c->text : "", c->text_len, &ev, &n);
        acc_events(pa, ev, n);
        recipe_parser_finish(ps, &ev, &n);
        acc_events(pa, ev, n);
        calls = recipe_parser_failed(ps) ? -1 : recipe_parser_tool_calls(ps);
        r->parts = recipe_response_alloc(r, (pa->n ? pa->n : 1) * sizeof *r->parts);
        if (!r->parts) calls = -1;
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
    if (!ps || !pa) calls = -1;
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
    int calls = api_job_parts(a, g, 0, &r);
    if (calls < 0) { /* out of memory while parsing the output */
        recipe_response_free(&r);
        return NULL;
    }
    a->reasoning_tokens = api_job_reasoning_tokens(a, g, 0);
    r.finish = finish_for(a, &g->choices[0], calls);
    if (r.finish == RECIPE_FINISH_ERROR) r.error_message = g->choices[0].error;
    if (r.finish == RECIPE_FINISH_STOP_STRING) r.stop_sequence = api_stop_of(g, &g->choices[0]);
    r.has_usage = true;
    r.usage = usage_of(a, g);
    recipe_error re;
    recipe_buf body = {0};
    if (recipe_response_encode_text(a->api, &r, &a->req, &body, &re)) recipe_buf_free(&body);
    recipe_response_free(&r);
    return body.data; /* malloc'd or NULL */
}

void api_job_save(api_job *a, const api_ctx *ctx, const gen_job *g, const char *response_json) {
    if (!a->store || !ctx->store || !a->conversation || !response_json) return;
    recipe_response r;
    recipe_response_init(&r);
    if (api_job_parts(a, g, 0, &r) < 0) { /* not stored: the output could not be parsed */
        recipe_response_free(&r);
        return;
    }
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
    for (int32_t i = 0; i < a->n_parsers && a->parsers; i++) recipe_parser_free(a->parsers[i]);
    free(a->parsers);
    recipe_stream_encoder_free(a->enc);
    recipe_buf_free(&a->out);
    free(a->forced);
    if (a->conversation) json_decref(a->conversation);
    memset(a, 0, sizeof *a);
}
