/* oai_response.c - OpenAI response and chunk JSON (see oai_response.h).
 *
 * Token strings in logprobs are the token's bytes; when those are not valid
 * UTF-8 on their own (a piece of a multi-byte character) the string is
 * "bytes:\xNN..." as OpenAI writes it, and "bytes" always carries the raw
 * values. Finish reasons: stop (EOS, stop token, stop string), length,
 * abort (cancelled at shutdown). */
#include "serve/oai_response.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dump(json_t *o) {
    if (!o) return NULL;
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

char *oai_error_json(const serve_error *e) {
    json_t *err = json_pack("{s:s, s:s, s:o, s:o}", "message", e->message, "type", e->type ? e->type : "server_error",
                            "param", e->param[0] ? json_string(e->param) : json_null(), "code",
                            e->code ? json_string(e->code) : json_null());
    if (!err) { /* message not UTF-8 (it quotes user input): drop it */
        err = json_pack("{s:s, s:s, s:n, s:n}", "message", "invalid request", "type",
                        e->type ? e->type : "server_error", "param", "code");
    }
    return dump(err ? json_pack("{s:o}", "error", err) : NULL);
}

char *oai_model_json(const char *model, long long created) {
    return dump(json_pack("{s:s, s:s, s:I, s:s}", "id", model, "object", "model", "created", (json_int_t)created,
                          "owned_by", "cinfer"));
}

char *oai_models_json(const char *model, long long created) {
    return dump(json_pack("{s:s, s:[{s:s, s:s, s:I, s:s}]}", "object", "list", "data", "id", model, "object", "model",
                          "created", (json_int_t)created, "owned_by", "cinfer"));
}

static json_t *usage_json(const gen_job *j) {
    const cinfer_usage *u = &j->usage;
    return json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", u->prompt_tokens, "completion_tokens",
                     u->completion_tokens, "total_tokens", u->prompt_tokens + u->completion_tokens,
                     "prompt_tokens_details", "cached_tokens", u->cached_tokens);
}

/* The token's string and bytes (see the file comment). */
static json_t *token_string(const tokenizer *tok, int32_t id, json_t **bytes) {
    char buf[256];
    size_t n = tokenizer_token_bytes(tok, id, false, buf, sizeof buf);
    if (n > sizeof buf) n = sizeof buf;
    if (bytes) {
        *bytes = json_array();
        for (size_t i = 0; *bytes && i < n; i++) json_array_append_new(*bytes, json_integer((unsigned char)buf[i]));
    }
    json_t *s = json_stringn(buf, n);
    if (s) return s;
    char esc[6 + 4 * sizeof buf + 1];
    size_t at = (size_t)snprintf(esc, sizeof esc, "bytes:");
    for (size_t i = 0; i < n; i++) at += (size_t)snprintf(esc + at, sizeof esc - at, "\\x%02x", (unsigned char)buf[i]);
    return json_string(esc);
}

/* Log-probabilities of n tokens: chosen ids and logprobs, and k alternatives
 * per token (top_ids/top_lps [n][k], best first; k may be 0). Chat:
 * {"content":[{token, logprob, bytes, top_logprobs:[{token, logprob, bytes}]}]};
 * completions: parallel arrays (top_logprobs: one {token: logprob} object per token). */
typedef struct lp_view {
    const int32_t *tokens;
    const float *lps;
    const int32_t *top_ids;
    const float *top_lps;
    int32_t n, k;
    size_t offset; /* completions: text_offset of the first token */
} lp_view;

static json_t *logprobs_json(const oai_meta *m, const tokenizer *tok, const lp_view *v) {
    if (m->kind == GEN_CHAT) {
        json_t *content = json_array();
        for (int32_t i = 0; content && i < v->n; i++) {
            json_t *top = json_array();
            for (int32_t a = 0; top && a < v->k; a++) {
                json_t *b = NULL, *ts = token_string(tok, v->top_ids[i * v->k + a], &b);
                json_array_append_new(top, json_pack("{s:o, s:f, s:o}", "token", ts, "logprob",
                                                     (double)v->top_lps[i * v->k + a], "bytes", b ? b : json_null()));
            }
            json_t *bytes = NULL, *s = token_string(tok, v->tokens[i], &bytes);
            json_t *e = json_pack("{s:o, s:f, s:o, s:o}", "token", s, "logprob", (double)v->lps[i], "bytes",
                                  bytes ? bytes : json_null(), "top_logprobs", top ? top : json_array());
            if (!e || json_array_append_new(content, e)) {
                json_decref(content);
                return NULL;
            }
        }
        return content ? json_pack("{s:o}", "content", content) : NULL;
    }
    json_t *toks = json_array(), *lp = json_array(), *top = json_array(), *off = json_array();
    size_t at = v->offset;
    for (int32_t i = 0; toks && lp && top && off && i < v->n; i++) {
        json_t *s = token_string(tok, v->tokens[i], NULL);
        size_t sl = s ? json_string_length(s) : 0;
        json_array_append_new(toks, s);
        json_array_append_new(lp, json_real(v->lps[i]));
        json_t *alt = json_object();
        for (int32_t a = 0; alt && a < v->k; a++) {
            json_t *ts = token_string(tok, v->top_ids[i * v->k + a], NULL);
            if (ts && !json_object_get(alt, json_string_value(ts)))
                json_object_set_new(alt, json_string_value(ts), json_real(v->top_lps[i * v->k + a]));
            if (ts) json_decref(ts);
        }
        json_array_append_new(top, alt);
        json_array_append_new(off, json_integer((json_int_t)at));
        at += sl;
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", toks, "token_logprobs", lp, "top_logprobs", top,
                     "text_offset", off);
}

static json_t *finish_json(const gen_choice *c) {
    const char *f = gen_finish_name(c->finish);
    return f ? json_string(f) : json_null();
}

char *oai_response_json(const oai_meta *m, const gen_job *j, const tokenizer *tok) {
    json_t *choices = json_array();
    for (int32_t i = 0; choices && i < j->p.n; i++) {
        const gen_choice *c = &j->choices[i];
        json_t *text = json_stringn(c->text ? c->text : "", c->text_len);
        if (!text) text = json_string("");
        lp_view v = {c->tokens, c->logprobs, c->top_ids, c->top_lps, c->n_acc, c->top_ids ? j->p.top_logprobs : 0, 0};
        json_t *lp = j->p.logprobs ? logprobs_json(m, tok, &v) : json_null();
        json_t *ch;
        if (m->kind == GEN_CHAT)
            ch = json_pack("{s:i, s:{s:s, s:o}, s:o, s:o}", "index", i, "message", "role", "assistant", "content", text,
                           "logprobs", lp ? lp : json_null(), "finish_reason", finish_json(c));
        else
            ch = json_pack("{s:i, s:o, s:o, s:o}", "index", i, "text", text, "logprobs", lp ? lp : json_null(),
                           "finish_reason", finish_json(c));
        if (!ch || json_array_append_new(choices, ch)) {
            json_decref(choices);
            return NULL;
        }
    }
    if (!choices) return NULL;
    return dump(json_pack("{s:s, s:s, s:I, s:s, s:o, s:o}", "id", m->id, "object",
                          m->kind == GEN_CHAT ? "chat.completion" : "text_completion", "created",
                          (json_int_t)m->created, "model", m->model, "choices", choices, "usage", usage_json(j)));
}

/* {"id","object","created","model","choices":[choice]} (+ "usage": null) */
static char *chunk(const oai_meta *m, json_t *choice) {
    if (!choice) return NULL;
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", m->id, "object",
                          m->kind == GEN_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                          (json_int_t)m->created, "model", m->model, "choices", choice);
    if (o && m->include_usage) json_object_set_new(o, "usage", json_null());
    return dump(o);
}

char *oai_chunk_role(const oai_meta *m, int32_t c) {
    return chunk(m, json_pack("{s:i, s:{s:s, s:s}, s:n, s:n}", "index", c, "delta", "role", "assistant", "content", "",
                              "logprobs", "finish_reason"));
}

char *oai_chunk_delta(const oai_meta *m, const gen_job *j, int32_t ci, const tokenizer *tok, bool *empty) {
    const gen_choice *c = &j->choices[ci];
    const cinfer_output *o = &c->out;
    bool lp = j->p.logprobs && o->n_tokens > 0 && o->logprobs;
    *empty = o->text_len == 0 && !lp;
    if (*empty) return NULL;
    json_t *text = json_stringn(o->text, o->text_len);
    if (!text) text = json_string("");
    lp_view v = {o->tokens, o->logprobs, o->top_ids, o->top_logprobs, o->n_tokens, o->n_top, c->text_before};
    json_t *lpj = lp ? logprobs_json(m, tok, &v) : json_null();
    if (m->kind == GEN_CHAT)
        return chunk(m, json_pack("{s:i, s:{s:o}, s:o, s:n}", "index", ci, "delta", "content", text, "logprobs",
                                  lpj ? lpj : json_null(), "finish_reason"));
    return chunk(m, json_pack("{s:i, s:o, s:o, s:n}", "index", ci, "text", text, "logprobs", lpj ? lpj : json_null(),
                              "finish_reason"));
}

json_t *oai_logprobs_delta(const oai_meta *m, const gen_job *j, int32_t ci, const tokenizer *tok) {
    const gen_choice *c = &j->choices[ci];
    const cinfer_output *o = &c->out;
    if (!j->p.logprobs || o->n_tokens == 0 || !o->logprobs) return NULL;
    lp_view v = {o->tokens, o->logprobs, o->top_ids, o->top_logprobs, o->n_tokens, o->n_top, c->text_before};
    return logprobs_json(m, tok, &v);
}

char *oai_chunk_finish(const oai_meta *m, const gen_job *j, int32_t ci) {
    const gen_choice *c = &j->choices[ci];
    if (m->kind == GEN_CHAT)
        return chunk(m, json_pack("{s:i, s:{}, s:n, s:o}", "index", ci, "delta", "logprobs", "finish_reason",
                                  finish_json(c)));
    return chunk(m, json_pack("{s:i, s:s, s:n, s:o}", "index", ci, "text", "", "logprobs", "finish_reason",
                              finish_json(c)));
}

static int ob_put(oai_buf *b, const char *s, size_t n) { return strbuf_append(b, s, n); }

/* s as a JSON string literal, escaped like jansson's compact output. */
static int ob_put_str(oai_buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789ABCDEF";
    if (ob_put(b, "\"", 1)) return -1;
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char esc[7];
        size_t el = 0;
        if (ch == '"' || ch == '\\') esc[0] = '\\', esc[1] = (char)ch, el = 2;
        else if (ch == '\n') esc[0] = '\\', esc[1] = 'n', el = 2;
        else if (ch == '\r') esc[0] = '\\', esc[1] = 'r', el = 2;
        else if (ch == '\t') esc[0] = '\\', esc[1] = 't', el = 2;
        else if (ch == '\b') esc[0] = '\\', esc[1] = 'b', el = 2;
        else if (ch == '\f') esc[0] = '\\', esc[1] = 'f', el = 2;
        else if (ch < 0x20) {
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[ch >> 4];
            esc[5] = hex[ch & 15];
            el = 6;
        }
        if (!el) {
            run++;
            continue;
        }
        if (ob_put(b, s + i - run, run) || ob_put(b, esc, el)) return -1;
        run = 0;
    }
    if (ob_put(b, s + n - run, run)) return -1;
    return ob_put(b, "\"", 1);
}

#define OB_LIT(b, lit) ob_put((b), (lit), sizeof(lit) - 1)

int oai_chunk_text_into(const oai_meta *m, int32_t c, const char *text, size_t len, oai_buf *out) {
    char num[64];
    out->len = 0;
    bool chat = m->kind == GEN_CHAT;
    int rc = OB_LIT(out, "{\"id\":") || ob_put_str(out, m->id, strlen(m->id));
    rc = rc || (chat ? OB_LIT(out, ",\"object\":\"chat.completion.chunk\",\"created\":")
                     : OB_LIT(out, ",\"object\":\"text_completion\",\"created\":"));
    int nl = snprintf(num, sizeof num, "%lld", m->created);
    rc = rc || ob_put(out, num, (size_t)nl) || OB_LIT(out, ",\"model\":") || ob_put_str(out, m->model, strlen(m->model));
    nl = snprintf(num, sizeof num, ",\"choices\":[{\"index\":%d,", (int)c);
    rc = rc || ob_put(out, num, (size_t)nl);
    rc = rc || (chat ? OB_LIT(out, "\"delta\":{\"content\":") : OB_LIT(out, "\"text\":"));
    rc = rc || ob_put_str(out, text, len);
    rc = rc || (chat ? OB_LIT(out, "},") : OB_LIT(out, ","));
    rc = rc || OB_LIT(out, "\"logprobs\":null,\"finish_reason\":null}]");
    if (m->include_usage) rc = rc || OB_LIT(out, ",\"usage\":null");
    rc = rc || OB_LIT(out, "}");
    return rc ? -1 : 0;
}

char *oai_chunk_usage(const oai_meta *m, const gen_job *j) {
    return dump(json_pack("{s:s, s:s, s:I, s:s, s:[], s:o}", "id", m->id, "object",
                          m->kind == GEN_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                          (json_int_t)m->created, "model", m->model, "choices", "usage", usage_json(j)));
}
