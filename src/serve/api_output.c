/* api_output.c - the output half of every API (see api.h): engine text -> recipe output parser
 * (one per choice) -> recipe stream encoder (SSE) or response body, and saving Responses into
 * the store. There is one streaming path for all APIs (api_stream_*): each choice's parser
 * events go to the encoder with the choice index and the read's log-probabilities (recipe's
 * OpenAI writer uses them; Anthropic / Responses have one choice and no logprobs).
 *
 * The final body re-parses the accumulated text with the same id seed, so the tool-call ids of a
 * stream and of its stored object agree. Every parser first consumes the forced tool-call opener
 * (tool_choice required / named, which the prompt already ends with), so a forced call is parsed
 * and its opener is never echoed as content. Finish: EOS / stop string -> tool_calls when a call
 * was parsed, else EOS, or STOP_STRING + the matched string when the engine reports one
 * (Anthropic stop_sequence); length -> LENGTH (cancelled too, except Chat / Completions:
 * CANCELLED, "abort"); engine error -> ERROR. Usage reasoning tokens: see
 * api_job_reasoning_tokens (summed over choices).
 * Streamed, a read's logprobs ride on its first text event, or on an empty delta when the parser
 * held all of its text back. Token strings are the tokens' bytes (recipe writes "bytes:\xNN"
 * forms when needed). A part_acc holds at most 64 output parts (reasoning / text / calls); more
 * are dropped. Called from the HTTP loop thread (server.c); SSE text is written into a->out. */
#include "serve/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

recipe_finish api_finish_of(const gen_choice *c, int tool_calls) {
    switch (c->finish) {
    case CINFER_FINISH_LENGTH: return RECIPE_FINISH_LENGTH; /* a call cut by max_tokens is incomplete: length */
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
    recipe_usage u = {.prompt = g->usage.prompt_tokens,
                      .cache_read = g->usage.cached_tokens,
                      .replayed = g->usage.replayed_tokens,
                      .output = g->usage.completion_tokens,
                      .reasoning = a->reasoning_tokens,
                      .accepted_draft = g->usage.accepted_draft_tokens};
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
    int phase; /* 0 before any output, 1 last output was reasoning, 2 content / tool call */
    int64_t pending; /* tokens consumed since the last output */
    int64_t n; /* counted */
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
    r.finish = api_finish_for(a, &g->choices[0], calls);
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
        rstore_put(ctx->store, a->id, a->tenant, conv, response_json, ctx->now);
    }
    if (o) json_decref(o);
    if (conv) json_decref(conv);
    recipe_response_free(&r);
}

void api_job_free(api_job *a) {
    if (!a->active) return;
    recipe_request_free(&a->req);
    recipe_request_free(&a->history);
    for (int32_t i = 0; i < a->n_parsers && a->parsers; i++) recipe_parser_free(a->parsers[i]);
    free(a->parsers);
    recipe_stream_encoder_free(a->enc);
    recipe_buf_free(&a->out);
    free(a->forced);
    if (a->conversation) json_decref(a->conversation);
    memset(a, 0, sizeof *a);
}

/* ---- streaming (every API) and the bodies of several choices / logprobs ---- */

/* n tokens (ids, logprobs, k alternatives each) as recipe_logprobs; the token bytes live in
 * *pool. NULL when n is 0 or out of memory (then *failed). Free with lp_free. */
typedef struct lp_set {
    recipe_logprob *lp; /* n entries, then n * k alternatives */
    recipe_buf pool;
    size_t n;
} lp_set;

static void lp_free(lp_set *s) {
    free(s->lp);
    recipe_buf_free(&s->pool);
    memset(s, 0, sizeof *s);
}

static int lp_build(lp_set *s, const tokenizer *tok, const int32_t *ids, const float *lps, const int32_t *top_ids,
                    const float *top_lps, int32_t n, int32_t k) {
    memset(s, 0, sizeof *s);
    if (n <= 0 || !ids || !lps) return 0;
    if (!top_ids || !top_lps || k < 0) k = 0;
    size_t total = (size_t)n * (1 + (size_t)k);
    if (!(s->lp = calloc(total, sizeof *s->lp))) return -1;
    size_t *off = malloc(total * sizeof *off);
    if (!off) return lp_free(s), -1;
    char buf[256];
    for (size_t i = 0; i < total; i++) {
        size_t t = i < (size_t)n ? i : (i - (size_t)n) / (size_t)k, a = i < (size_t)n ? 0 : (i - (size_t)n) % (size_t)k;
        int32_t id = i < (size_t)n ? ids[t] : top_ids[t * (size_t)k + a];
        size_t len = tokenizer_token_bytes(tok, id, false, buf, sizeof buf);
        if (len > sizeof buf) len = sizeof buf;
        off[i] = s->pool.len;
        recipe_buf_append(&s->pool, buf, len);
        s->lp[i].len = len;
        s->lp[i].logprob = i < (size_t)n ? lps[t] : top_lps[t * (size_t)k + a];
    }
    if (s->pool.failed) {
        free(off);
        return lp_free(s), -1;
    }
    for (size_t i = 0; i < total; i++) s->lp[i].token = s->pool.data ? s->pool.data + off[i] : "";
    for (size_t t = 0; t < (size_t)n; t++) {
        s->lp[t].top = k ? &s->lp[(size_t)n + t * (size_t)k] : NULL;
        s->lp[t].n_top = (size_t)k;
    }
    free(off);
    s->n = (size_t)n;
    return 0;
}

static int put_event(api_job *a, const recipe_event *ev) {
    recipe_error re;
    return recipe_stream_encoder_event(a->enc, ev, &a->out, &re);
}

/* Events of choice c into the encoder; *lp (may be empty) rides on the first text event. */
static int put_events(api_job *a, int32_t c, const recipe_event *ev, size_t n, lp_set *lp) {
    for (size_t i = 0; i < n; i++) {
        recipe_event e = ev[i];
        e.choice = (int)c;
        if (lp->n && (e.type == RECIPE_EV_TEXT || e.type == RECIPE_EV_REASONING)) {
            e.logprobs = lp->lp;
            e.n_logprobs = lp->n;
            lp->n = 0;
        }
        if (put_event(a, &e)) return -1;
    }
    return 0;
}

int api_stream_begin(api_job *a, const gen_job *g, const char *model) {
    a->parsers = calloc((size_t)g->p.n, sizeof *a->parsers);
    if (!a->parsers) return -1;
    a->n_parsers = g->p.n;
    recipe_stream_info info = {.id = a->id,
                               .model = model,
                               .created = a->created,
                               .prompt_tokens = g->n_prompt - g->n_resumed,
                               .include_usage = g->p.include_usage,
                               .req = &a->req,
                               .n_choices = g->p.n,
                               .completion = a->completion};
    if (!(a->enc = recipe_stream_encoder_new(a->api, &info))) return -1;
    recipe_event start = {.type = RECIPE_EV_TEXT}; /* the opening events (Chat: role chunks), nothing else */
    if (put_event(a, &start)) return -1;
    for (int32_t c = 0; c < g->p.n; c++) {
        const recipe_event *ev;
        size_t n;
        lp_set none = {0};
        if (!(a->parsers[c] = api_job_parser(a, g, c, &ev, &n)) || put_events(a, c, ev, n, &none)) return -1;
    }
    if (!g->p.has_resume) return 0;
    /* cinfer.resume (serve/resume.h): the first worker sent the opening events and the resumed
     * text's; run them through parser and encoder so their state continues, and send none */
    a->resume_skip = g->resume_skip;
    const recipe_event *ev;
    size_t n = 0;
    lp_set none = {0};
    if (g->resume_text_len) recipe_parser_feed(a->parsers[0], g->resume_text, g->resume_text_len, &ev, &n);
    if (recipe_parser_failed(a->parsers[0]) || (n && put_events(a, 0, ev, n, &none))) return -1;
    a->out.len = 0;
    return 0;
}

/* Feeds the first a->resume_skip bytes of choice 0's new text (the client has them from the first
 * worker) with their events discarded; returns how many bytes of o->text it consumed. */
static size_t skip_resumed(api_job *a, const cinfer_output *o) {
    size_t k = a->resume_skip < o->text_len ? a->resume_skip : o->text_len, keep = a->out.len, n = 0;
    const recipe_event *ev;
    lp_set none = {0};
    if (!k) return 0;
    recipe_parser_feed(a->parsers[0], o->text, k, &ev, &n);
    if (n) put_events(a, 0, ev, n, &none);
    a->out.len = keep;
    a->resume_skip -= k;
    return k;
}

int api_stream_delta(api_job *a, const gen_job *g, int32_t c, const tokenizer *tok) {
    if (c < 0 || c >= a->n_parsers || !a->parsers[c]) return -1;
    const cinfer_output *o = &g->choices[c].out;
    const recipe_event *ev;
    size_t n = 0, from = a->resume_skip ? skip_resumed(a, o) : 0;
    if (o->text_len > from) recipe_parser_feed(a->parsers[c], o->text + from, o->text_len - from, &ev, &n);
    if (recipe_parser_failed(a->parsers[c])) return -1;
    lp_set lp = {0};
    if (g->p.logprobs && lp_build(&lp, tok, o->tokens, o->logprobs, o->top_ids, o->top_logprobs, o->n_tokens, o->n_top))
        return -1;
    int rc = n ? put_events(a, c, ev, n, &lp) : 0;
    if (!rc && lp.n) { /* all text held back (or only tool events): the logprobs alone */
        recipe_event e = {.type = RECIPE_EV_TEXT, .choice = (int)c, .logprobs = lp.lp, .n_logprobs = lp.n};
        rc = put_event(a, &e);
    }
    lp_free(&lp);
    return rc;
}

/* The usage of the whole job (final once every choice finished), reasoning tokens summed. */
static recipe_usage multi_usage(const api_job *a, const gen_job *g) {
    recipe_usage u = {.prompt = g->usage.prompt_tokens,
                      .cache_read = g->usage.cached_tokens,
                      .replayed = g->usage.replayed_tokens,
                      .output = g->usage.completion_tokens,
                      .accepted_draft = g->usage.accepted_draft_tokens};
    for (int32_t c = 0; c < g->p.n && !a->completion && gen_job_done(g); c++)
        u.reasoning += api_job_reasoning_tokens(a, g, c);
    return u;
}

/* The canonical finish of choice c for this API: a cancel (the shutdown deadline) is Chat /
 * Completions "abort" (RECIPE_FINISH_CANCELLED); Messages and Responses report the length limit. */
recipe_finish api_finish_for(const api_job *a, const gen_choice *ch, int calls) {
    if (a->api == RECIPE_API_CHAT && ch->finish == CINFER_FINISH_CANCELLED && !calls) return RECIPE_FINISH_CANCELLED;
    return api_finish_of(ch, calls);
}

int api_stream_finish(api_job *a, const gen_job *g, int32_t c) {
    if (c < 0 || c >= a->n_parsers || !a->parsers[c]) return -1;
    const recipe_event *ev;
    size_t n;
    lp_set none = {0};
    recipe_parser_finish(a->parsers[c], &ev, &n);
    if (put_events(a, c, ev, n, &none)) return -1;
    const gen_choice *ch = &g->choices[c];
    recipe_event fin = {.type = RECIPE_EV_FINISH,
                        .choice = (int)c,
                        .has_usage = true,
                        .finish = api_finish_for(a, ch, recipe_parser_tool_calls(a->parsers[c])),
                        .usage = multi_usage(a, g)};
    if (fin.finish == RECIPE_FINISH_STOP_STRING) fin.stop_sequence = api_stop_of(g, ch);
    if (recipe_parser_failed(a->parsers[c])) fin.finish = RECIPE_FINISH_ERROR;
    if (fin.finish == RECIPE_FINISH_ERROR) {
        char msg[200];
        snprintf(msg, sizeof msg, "generation failed: %s",
                 recipe_parser_failed(a->parsers[c]) ? "out of memory while parsing the output"
                 : ch->error[0]                      ? ch->error
                                                     : "engine error");
        fin.type = RECIPE_EV_ERROR;
        fin.text = msg;
        fin.len = strlen(msg);
        return put_event(a, &fin);
    }
    return put_event(a, &fin);
}

char *api_multi_response(const api_job *a, const gen_job *g, const char *model, const tokenizer *tok) {
    recipe_response r;
    recipe_response_init(&r);
    r.id = a->id;
    r.model = model;
    r.created = a->created;
    r.completion = a->completion;
    r.has_usage = true;
    r.usage = multi_usage(a, g);
    int32_t n = g->p.n > 0 ? g->p.n : 1;
    recipe_choice *cs = recipe_response_alloc(&r, (size_t)n * sizeof *cs);
    lp_set *lps = calloc((size_t)n, sizeof *lps);
    bool ok = cs && lps;
    for (int32_t c = 0; ok && c < n; c++) {
        const gen_choice *ch = &g->choices[c];
        recipe_response part;
        recipe_response_init(&part);
        int calls = api_job_parts(a, g, c, &part);
        ok = calls >= 0;
        if (ok) { /* the parts live in part's arena: copied into r's */
            cs[c].parts = recipe_response_alloc(&r, (part.n_parts ? part.n_parts : 1) * sizeof *cs[c].parts);
            ok = cs[c].parts != NULL;
            for (size_t i = 0; ok && i < part.n_parts; i++) {
                recipe_part p = part.parts[i];
                p.text = recipe_response_strdup(&r, p.text);
                p.id = recipe_response_strdup(&r, p.id);
                p.name = recipe_response_strdup(&r, p.name);
                p.args = recipe_response_strdup(&r, p.args);
                cs[c].parts[i] = p;
            }
            cs[c].n_parts = part.n_parts;
        }
        recipe_response_free(&part);
        cs[c].finish = api_finish_for(a, ch, calls > 0);
        if (cs[c].finish == RECIPE_FINISH_ERROR)
            cs[c].finish = RECIPE_FINISH_LENGTH; /* the server answers 500 instead */
        if (cs[c].finish == RECIPE_FINISH_STOP_STRING) cs[c].stop_sequence = api_stop_of(g, ch);
        if (ok && g->p.logprobs) {
            ok = !lp_build(&lps[c], tok, ch->tokens, ch->logprobs, ch->top_ids, ch->top_lps, ch->n_acc,
                           ch->top_ids ? g->p.top_logprobs : 0);
            static const recipe_logprob no_tokens; /* asked for, none generated: an empty list */
            cs[c].logprobs = lps[c].lp ? lps[c].lp : &no_tokens;
            cs[c].n_logprobs = lps[c].n;
        }
    }
    recipe_buf body = {0};
    recipe_error re;
    if (ok) {
        r.choices = cs;
        r.n_choices = (size_t)n;
        if (recipe_response_encode_text(RECIPE_API_CHAT, &r, NULL, &body, &re)) recipe_buf_free(&body);
    }
    for (int32_t c = 0; lps && c < n; c++) lp_free(&lps[c]);
    free(lps);
    recipe_response_free(&r);
    return body.data; /* malloc'd or NULL */
}
