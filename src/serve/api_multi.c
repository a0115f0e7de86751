/* api_multi.c - Chat Completions with n > 1 or logprobs through the recipe output parsers (see
 * api.h, a->multi). Recipe's response and stream encoders describe one choice without logprobs,
 * so these requests keep OpenAI's shapes (oai_response.c builds the body, the logprobs and the
 * usage) and only the message of each choice comes from parsing: one parser per choice, fed the
 * forced tool-call opener first (api_job_parser), like the single-choice path.
 *
 * Non-streaming: each choice's message and finish_reason are replaced by what recipe's Chat
 * encoder writes for that choice alone (content / reasoning_content / tool_calls; tool_calls,
 * stop + vLLM stop_reason, length, abort), its logprobs are kept; usage gains
 * completion_tokens_details.reasoning_tokens (summed over the choices).
 * Streaming: per read, the parser's events become chunks of that choice (reasoning_content,
 * content, tool_calls deltas as recipe's Chat stream encoder writes them); the read's logprobs
 * ride on its first chunk, or on an empty delta when the parser held all of its text back. The
 * finish chunk says tool_calls when the choice's parser found a call.
 * Called from the HTTP loop thread (server.c); everything is written into a->out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/api.h"
#include "serve/oai_response.h"

/* "data: {chunk}\n\n" for choice c into a->out; takes delta and lp (either may be NULL). */
static int put_chunk(api_job *a, const oai_meta *m, int32_t c, json_t *delta, json_t *lp, const char *finish) {
    json_t *choice = json_pack("{s:i, s:o, s:o, s:o}", "index", (int)c, "delta", delta ? delta : json_object(),
                               "logprobs", lp ? lp : json_null(), "finish_reason",
                               finish ? json_string(finish) : json_null());
    json_t *o = choice ? json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", m->id, "object", "chat.completion.chunk",
                                   "created", (json_int_t)m->created, "model", m->model, "choices", choice)
                       : NULL;
    if (o && m->include_usage) json_object_set_new(o, "usage", json_null());
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (o) json_decref(o);
    if (!s) return -1;
    bool bad = recipe_buf_append(&a->out, "data: ", 6) || recipe_buf_append(&a->out, s, strlen(s)) ||
               recipe_buf_append(&a->out, "\n\n", 2);
    int rc = bad ? -1 : 0;
    free(s);
    return rc;
}

/* The Chat delta for one parser event (new reference), or NULL for events that write none. */
static json_t *event_delta(const recipe_event *ev) {
    switch (ev->type) {
    case RECIPE_EV_REASONING:
    case RECIPE_EV_TEXT: {
        if (!ev->len) return NULL;
        json_t *t = json_stringn(ev->text, ev->len);
        return t ? json_pack("{s:o}", ev->type == RECIPE_EV_TEXT ? "content" : "reasoning_content", t) : NULL;
    }
    case RECIPE_EV_TOOL_BEGIN:
        return json_pack("{s:[{s:i, s:s, s:s, s:{s:s, s:s}}]}", "tool_calls", "index", ev->index, "id",
                         ev->id ? ev->id : "", "type", "function", "function", "name", ev->name ? ev->name : "",
                         "arguments", "");
    case RECIPE_EV_TOOL_ARGS: {
        json_t *t = json_stringn(ev->text, ev->len);
        return t ? json_pack("{s:[{s:i, s:{s:o}}]}", "tool_calls", "index", ev->index, "function", "arguments", t)
                 : NULL;
    }
    default: return NULL;
    }
}

/* Chunks for events of choice c; *lp (may hold NULL) rides on the first one and is cleared. */
static int put_events(api_job *a, const oai_meta *m, int32_t c, const recipe_event *ev, size_t n, json_t **lp) {
    for (size_t i = 0; i < n; i++) {
        json_t *d = event_delta(&ev[i]);
        if (!d) continue;
        if (put_chunk(a, m, c, d, *lp, NULL)) {
            *lp = NULL;
            return -1;
        }
        *lp = NULL;
    }
    return 0;
}

int api_multi_begin(api_job *a, const oai_meta *m, const gen_job *g) {
    a->parsers = calloc((size_t)g->p.n, sizeof *a->parsers);
    if (!a->parsers) return -1;
    a->n_parsers = g->p.n;
    for (int32_t c = 0; c < g->p.n; c++) {
        const recipe_event *ev;
        size_t n;
        json_t *none = NULL;
        if (!(a->parsers[c] = api_job_parser(a, g, c, &ev, &n))) return -1;
        json_t *role = json_pack("{s:s, s:s}", "role", "assistant", "content", "");
        if (!role || put_chunk(a, m, c, role, NULL, NULL) || put_events(a, m, c, ev, n, &none)) return -1;
    }
    return 0;
}

int api_multi_delta(api_job *a, const oai_meta *m, const gen_job *g, int32_t c, const tokenizer *tok) {
    if (c < 0 || c >= a->n_parsers || !a->parsers[c]) return -1;
    const cinfer_output *o = &g->choices[c].out;
    const recipe_event *ev;
    size_t n = 0;
    if (o->text_len) recipe_parser_feed(a->parsers[c], o->text, o->text_len, &ev, &n);
    if (recipe_parser_failed(a->parsers[c])) return -1;
    json_t *lp = oai_logprobs_delta(m, g, c, tok);
    int rc = n ? put_events(a, m, c, ev, n, &lp) : 0;
    if (!rc && lp) return put_chunk(a, m, c, NULL, lp, NULL); /* all text held back: the logprobs alone */
    if (lp) json_decref(lp);
    return rc;
}

/* Chat's finish reason for a finished choice (vLLM's "abort" for a cancel). */
static const char *chat_finish(const gen_choice *ch, int calls) {
    if (calls && ch->finish != CINFER_FINISH_ERROR) return "tool_calls";
    return gen_finish_name(ch->finish);
}

int api_multi_finish(api_job *a, const oai_meta *m, const gen_job *g, int32_t c) {
    if (c < 0 || c >= a->n_parsers || !a->parsers[c]) return -1;
    const recipe_event *ev;
    size_t n;
    json_t *none = NULL;
    recipe_parser_finish(a->parsers[c], &ev, &n);
    if (put_events(a, m, c, ev, n, &none)) return -1;
    const gen_choice *ch = &g->choices[c];
    return put_chunk(a, m, c, NULL, NULL, chat_finish(ch, recipe_parser_tool_calls(a->parsers[c])));
}

/* usage.completion_tokens_details.reasoning_tokens over all choices. */
static int add_reasoning(const api_job *a, const gen_job *g, json_t *usage) {
    int64_t k = 0;
    for (int32_t c = 0; c < g->p.n; c++) k += api_job_reasoning_tokens(a, g, c);
    return json_is_object(usage) ? json_object_set_new(usage, "completion_tokens_details",
                                                       json_pack("{s:I}", "reasoning_tokens", (json_int_t)k))
                                 : -1;
}

char *api_multi_usage_chunk(const api_job *a, const oai_meta *m, const gen_job *g) {
    char *s = oai_chunk_usage(m, g);
    json_t *o = s ? json_loads(s, 0, NULL) : NULL;
    free(s);
    s = o && !add_reasoning(a, g, json_object_get(o, "usage")) ? json_dumps(o, JSON_COMPACT) : NULL;
    if (o) json_decref(o);
    return s;
}

/* Choice c's message and finish_reason as recipe's Chat encoder writes them, into `choice`. */
static int patch_choice(const api_job *a, const gen_job *g, int32_t c, json_t *choice) {
    const gen_choice *ch = &g->choices[c];
    recipe_response r;
    recipe_response_init(&r);
    r.id = "";
    r.model = "";
    int calls = api_job_parts(a, g, c, &r);
    if (calls < 0) {
        recipe_response_free(&r);
        return -1;
    }
    r.finish = api_finish_of(ch, calls);
    if (r.finish == RECIPE_FINISH_ERROR) r.finish = RECIPE_FINISH_LENGTH; /* the server answers 500 instead */
    if (r.finish == RECIPE_FINISH_STOP_STRING) r.stop_sequence = api_stop_of(g, ch);
    recipe_error re;
    recipe_buf text = {0};
    json_t *o = recipe_response_encode_text(RECIPE_API_CHAT, &r, &a->req, &text, &re) ? NULL
                                                                                       : json_loads(text.data, 0, NULL);
    recipe_buf_free(&text);
    json_t *enc = json_array_get(json_object_get(o, "choices"), 0);
    json_t *msg = json_object_get(enc, "message");
    int rc = -1;
    if (msg && !json_object_set(choice, "message", msg) &&
        !json_object_set_new(choice, "finish_reason", json_string(chat_finish(ch, calls)))) {
        json_t *sr = json_object_get(enc, "stop_reason");
        rc = sr ? json_object_set(choice, "stop_reason", sr) : 0;
    }
    if (o) json_decref(o);
    recipe_response_free(&r);
    return rc;
}

char *api_multi_response(const api_job *a, const oai_meta *m, const gen_job *g, const tokenizer *tok) {
    char *s = oai_response_json(m, g, tok);
    json_t *o = s ? json_loads(s, 0, NULL) : NULL;
    free(s);
    if (!o) return NULL;
    json_t *choices = json_object_get(o, "choices");
    int rc = add_reasoning(a, g, json_object_get(o, "usage"));
    for (int32_t c = 0; !rc && c < g->p.n; c++) rc = patch_choice(a, g, c, json_array_get(choices, (size_t)c));
    s = rc ? NULL : json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}
