/* api_multi.c - OpenAI Chat with n > 1 or logprobs, and every OpenAI Completions request
 * (a->multi; see api.h): one output parser per choice (Completions: the plain parser, all text),
 * whose events go to recipe's OpenAI writer with the choice's index and the read's
 * log-probabilities (recipe_event.choice / .logprobs), so the chunks and bodies are recipe's
 * (src/recipe/openai_out.c) like every other response. Each parser first consumes the forced
 * tool-call opener (api_job_parser).
 * Streaming: begin writes every choice's role chunk (Chat) and a forced call's first deltas; per
 * read, the parser's events become chunks of that choice and the read's logprobs ride on its
 * first text chunk, or on an empty delta when there is none; finish writes the choice's finish
 * chunk (tool_calls when its parser found a call, "abort" when cancelled, an error object for an
 * engine error); the last one adds the usage chunk (reasoning tokens summed) and [DONE].
 * Non-streaming: recipe_response.choices, one per choice, with its logprobs.
 * Token strings are the tokens' bytes (recipe writes "bytes:\xNN" forms when needed).
 * Called from the HTTP loop thread (server.c); everything is written into a->out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/api.h"

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

int api_multi_begin(api_job *a, const gen_job *g, const char *model) {
    a->parsers = calloc((size_t)g->p.n, sizeof *a->parsers);
    if (!a->parsers) return -1;
    a->n_parsers = g->p.n;
    recipe_stream_info info = {.id = a->id, .model = model, .created = a->created, .prompt_tokens = g->n_prompt,
                               .include_usage = g->p.include_usage, .n_choices = g->p.n,
                               .completion = a->completion};
    if (!(a->enc = recipe_stream_encoder_new(RECIPE_API_CHAT, &info))) return -1;
    recipe_event start = {.type = RECIPE_EV_TEXT}; /* writes the role chunks, nothing else */
    if (put_event(a, &start)) return -1;
    for (int32_t c = 0; c < g->p.n; c++) {
        const recipe_event *ev;
        size_t n;
        lp_set none = {0};
        if (!(a->parsers[c] = api_job_parser(a, g, c, &ev, &n)) || put_events(a, c, ev, n, &none)) return -1;
    }
    return 0;
}

int api_multi_delta(api_job *a, const gen_job *g, int32_t c, const tokenizer *tok) {
    if (c < 0 || c >= a->n_parsers || !a->parsers[c]) return -1;
    const cinfer_output *o = &g->choices[c].out;
    const recipe_event *ev;
    size_t n = 0;
    if (o->text_len) recipe_parser_feed(a->parsers[c], o->text, o->text_len, &ev, &n);
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
    recipe_usage u = {.prompt = g->usage.prompt_tokens, .cache_read = g->usage.cached_tokens,
                      .output = g->usage.completion_tokens};
    for (int32_t c = 0; c < g->p.n && !a->completion && gen_job_done(g); c++) u.reasoning += api_job_reasoning_tokens(a, g, c);
    return u;
}

/* The canonical finish of choice c (Chat / Completions: a cancel is "abort"). */
static recipe_finish multi_finish(const gen_choice *ch, int calls) {
    if (ch->finish == CINFER_FINISH_CANCELLED && !calls) return RECIPE_FINISH_CANCELLED;
    return api_finish_of(ch, calls);
}

int api_multi_finish(api_job *a, const gen_job *g, int32_t c) {
    if (c < 0 || c >= a->n_parsers || !a->parsers[c]) return -1;
    const recipe_event *ev;
    size_t n;
    lp_set none = {0};
    recipe_parser_finish(a->parsers[c], &ev, &n);
    if (put_events(a, c, ev, n, &none)) return -1;
    const gen_choice *ch = &g->choices[c];
    recipe_event fin = {.type = RECIPE_EV_FINISH, .choice = (int)c, .has_usage = true,
                        .finish = multi_finish(ch, recipe_parser_tool_calls(a->parsers[c])), .usage = multi_usage(a, g)};
    if (fin.finish == RECIPE_FINISH_STOP_STRING) fin.stop_sequence = api_stop_of(g, ch);
    if (recipe_parser_failed(a->parsers[c])) fin.finish = RECIPE_FINISH_ERROR;
    if (fin.finish == RECIPE_FINISH_ERROR) {
        char msg[200];
        snprintf(msg, sizeof msg, "generation failed: %s",
                 recipe_parser_failed(a->parsers[c]) ? "out of memory" : ch->error[0] ? ch->error : "engine error");
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
        cs[c].finish = multi_finish(ch, calls > 0);
        if (cs[c].finish == RECIPE_FINISH_ERROR) cs[c].finish = RECIPE_FINISH_LENGTH; /* the server answers 500 instead */
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
