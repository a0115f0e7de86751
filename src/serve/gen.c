/* gen.c - the generation core (see gen.h): prompt building, context checks,
 * submitting n engine requests, reading and accumulating their outputs.
 *
 * Prompt building: the canonical request (recipe) is rendered with the model's chat template
 * (chat_template_render_req: the template reads the request's structs; add_generation_prompt). The rendered text is tokenized with special-token
 * parsing (the template's own markers such as <|im_start|> must become their
 * control tokens) - unless some message content contains the text of a
 * control token: then the prompt is rendered again with each content replaced
 * by a sentinel, and the pieces are tokenized separately, template text with
 * special parsing and user content without, so user text can never forge a
 * control token. BOS is prepended when the model asks for it and the template
 * did not already write it.
 *
 * Seeds: with a request seed S, choice i samples with seed S + i (choices
 * differ, runs reproduce); without one, each choice gets a random seed.
 *
 * Reasoning budget: gen_params.think_* (set by api_think.c) become the engine
 * request's think_* options (think_options below; docs/serve.md). */
#include "serve/gen.h"

#include "serve/resume.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* ---- params ---- */

void gen_params_init(gen_params *p) {
    memset(p, 0, sizeof *p);
    p->n = 1;
    p->sampling.temperature = 1.0f;
    p->sampling.top_p = 1.0f;
    p->sampling.repetition_penalty = 1.0f;
    p->traffic_class = -1; /* TRAFFIC_UNSET */
    p->think_budget = -1;
}

void gen_params_free(gen_params *p) {
    free(p->prompt);
    free(p->prompt_ids);
    free(p->model);
    free(p->bias);
    free(p->stop_ids);
    for (int32_t i = 0; i < p->n_stop; i++) free(p->stop[i]);
    free(p->stop);
    free(p->cache_salt);
    free(p->user);
    free(p->prompt_suffix);
    free(p->suffix_think);
    free(p->resume_ids);
    structured_spec_free(&p->grammar);
    gen_params_init(p);
}

/* ---- model ---- */

static char *token_text_dup(const tokenizer *t, int32_t id) {
    if (id < 0) return strdup("");
    size_t n = tokenizer_token_bytes(t, id, true, NULL, 0);
    char *s = malloc(n + 1);
    if (!s) return NULL;
    tokenizer_token_bytes(t, id, true, s, n);
    s[n] = 0;
    return s;
}

int gen_model_init(gen_model *gm, cf_err *err) {
    gm->bos_text = token_text_dup(gm->tok, tokenizer_bos(gm->tok));
    gm->eos_text = token_text_dup(gm->tok, tokenizer_eos(gm->tok));
    gm->special = NULL;
    gm->n_special = 0;
    gm->gvocab = cinfer_engine_grammar_vocab(gm->engine);
    if (!gm->bos_text || !gm->eos_text || !(gm->grammars = cinfer_grammar_cache_new(0))) goto oom;
    int32_t nv = tokenizer_n_vocab(gm->tok), cap = 0;
    for (int32_t id = 0; id < nv; id++) {
        int ty = tokenizer_token_type(gm->tok, id);
        if (ty != TOKEN_TYPE_CONTROL && ty != TOKEN_TYPE_UNKNOWN) continue;
        const char *s = tokenizer_token_text(gm->tok, id);
        if (!s || !*s) continue;
        if (gm->n_special == cap) {
            cap = cap ? 2 * cap : 16;
            char **ns = realloc(gm->special, (size_t)cap * sizeof *ns);
            if (!ns) goto oom;
            gm->special = ns;
        }
        if (!(gm->special[gm->n_special] = strdup(s))) goto oom;
        gm->n_special++;
    }
    return 0;
oom:
    gen_model_free(gm);
    return cf_fail(err, "out of memory");
}

void gen_model_free(gen_model *gm) {
    free(gm->bos_text);
    free(gm->eos_text);
    for (int32_t i = 0; i < gm->n_special; i++) free(gm->special[i]);
    free(gm->special);
    cinfer_grammar_cache_free(gm->grammars);
    gm->grammars = NULL;
    gm->bos_text = gm->eos_text = NULL;
    gm->special = NULL;
    gm->n_special = 0;
}

/* ---- prompts ---- */

/* ids buffer that grows */
typedef struct id_vec {
    int32_t *p;
    int32_t n, cap;
} id_vec;

static int idv_push(id_vec *v, const int32_t *ids, size_t n) {
    if ((size_t)v->n + n > (size_t)INT32_MAX / 2) return -1;
    if (v->n + (int32_t)n > v->cap) {
        int32_t cap = v->cap ? v->cap : 64;
        while (cap < v->n + (int32_t)n) cap *= 2;
        int32_t *q = realloc(v->p, (size_t)cap * sizeof *q);
        if (!q) return -1;
        v->p = q;
        v->cap = cap;
    }
    if (n) memcpy(v->p + v->n, ids, n * sizeof *ids);
    v->n += (int32_t)n;
    return 0;
}

static int encode_into(const gen_model *gm, id_vec *v, const char *s, size_t len, bool parse_special,
                       serve_error *err) {
    int32_t *ids = NULL;
    size_t n = 0;
    cf_err e = {0};
    if (tokenizer_encode(gm->tok, s, len, false, parse_special, &ids, &n, &e)) {
        free(ids);
        return serve_bad(err, "messages", "cannot tokenize the prompt: %s", e.msg);
    }
    int rc = idv_push(v, ids, n);
    free(ids);
    if (rc) return serve_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    return 0;
}

/* Prepends BOS when the model wants one and the text does not start with it. */
static int maybe_bos(const gen_model *gm, id_vec *v, const char *text, size_t len, serve_error *err) {
    int32_t bos = tokenizer_bos(gm->tok);
    if (!tokenizer_add_bos(gm->tok) || bos < 0) return 0;
    size_t bl = strlen(gm->bos_text);
    if (bl && len >= bl && !memcmp(text, gm->bos_text, bl)) return 0;
    if (idv_push(v, &bos, 1)) return serve_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    return 0;
}

int gen_text_prompt(const gen_model *gm, const char *text, size_t len, bool add_special, int32_t **ids, int32_t *n_ids,
                    serve_error *err) {
    id_vec v = {0};
    if ((add_special && maybe_bos(gm, &v, "", 0, err)) || encode_into(gm, &v, text, len, false, err)) {
        free(v.p);
        return -1;
    }
    *ids = v.p;
    *n_ids = v.n;
    return 0;
}

static bool has_special_text(const gen_model *gm, const char *s) {
    for (int32_t i = 0; i < gm->n_special; i++)
        if (strstr(s, gm->special[i])) return true;
    return false;
}

#define SENT_OPEN '\x02'
#define SENT_CLOSE '\x03'

/* Rendered text with sentinels -> ids: template text with special parsing, sentinel k replaced by
 * user text content(k) without. */
static int encode_sentinels(const gen_model *gm, id_vec *v, const char *text, size_t len,
                            const char *(*content)(const void *arg, size_t k), const void *arg, serve_error *err) {
    size_t at = 0;
    while (at < len) {
        const char *o = memchr(text + at, SENT_OPEN, len - at);
        const char *cl = o ? memchr(o, SENT_CLOSE, (size_t)(text + len - o)) : NULL;
        size_t seg_end = o && cl ? (size_t)(o - text) : len;
        if (seg_end > at && encode_into(gm, v, text + at, seg_end - at, true, err)) return -1;
        if (!(o && cl)) break;
        const char *c = content(arg, strtoul(o + 1, NULL, 10));
        if (c && encode_into(gm, v, c, strlen(c), false, err)) return -1;
        at = (size_t)(cl - text) + 1;
    }
    return 0;
}

typedef struct req_texts {
    char **msg; /* per request message: its content as the template sees it */
    size_t n;
} req_texts;

static const char *req_text(const void *arg, size_t k) {
    const req_texts *t = arg;
    return k < t->n ? t->msg[k] : NULL;
}

int gen_req_prompt(const gen_model *gm, const recipe_request *req, bool add_gen, int32_t **ids, int32_t *n_ids,
                   serve_error *err) {
    size_t n = req->n_messages;
    req_texts t = {.msg = calloc(n ? n : 1, sizeof(char *)), .n = n};
    char **sent = calloc(n + 1, sizeof(char *));
    id_vec v = {0};
    char *text = NULL;
    size_t len = 0;
    bool unsafe = false;
    int rc = -1;
    if (!t.msg || !sent) goto oom;
    for (size_t i = 0; i < n; i++) {
        if (!(t.msg[i] = chat_template_message_text(&req->messages[i]))) goto oom;
        unsafe |= has_special_text(gm, t.msg[i]);
    }
    chat_template_req in = {
        .req = req, .add_generation_prompt = add_gen, .bos_token = gm->bos_text, .eos_token = gm->eos_text};
    if (unsafe) { /* every content becomes a sentinel; user text is tokenized without special parsing */
        for (size_t k = 0; k < n; k++) {
            if (!(sent[k] = malloc(32))) goto oom;
            snprintf(sent[k], 32, "%c%zu%c", SENT_OPEN, k, SENT_CLOSE);
        }
        in.content = (const char *const *)sent;
    }
    cf_err e = {0};
    if (chat_template_render_req(gm->tmpl, &in, &text, &len, &e)) {
        serve_bad(err, "messages", "cannot apply the chat template: %s", e.msg);
        goto done;
    }
    if (maybe_bos(gm, &v, text, len, err) ||
        (unsafe ? encode_sentinels(gm, &v, text, len, req_text, &t, err) : encode_into(gm, &v, text, len, true, err)))
        goto done;
    *ids = v.p;
    *n_ids = v.n;
    v.p = NULL;
    rc = 0;
    goto done;
oom:
    serve_fail(err, 500, "server_error", NULL, NULL, "out of memory");
done:
    for (size_t i = 0; t.msg && i < n; i++) free(t.msg[i]);
    for (size_t k = 0; sent && k < n; k++) free(sent[k]);
    free(t.msg);
    free(sent);
    free(text);
    free(v.p);
    return rc;
}

bool gen_ids_end_with(const tokenizer *tok, const int32_t *ids, int32_t n, const char *s) {
    char tail[96];
    size_t k = 0, sl = strlen(s);
    for (int32_t i = n > 3 ? n - 3 : 0; i < n; i++) {
        size_t b = tokenizer_token_bytes(tok, ids[i], true, tail + k, sizeof tail - 1 - k);
        k += b < sizeof tail - 1 - k ? b : sizeof tail - 1 - k;
    }
    while (k && (tail[k - 1] == '\n' || tail[k - 1] == ' ' || tail[k - 1] == '\r')) k--;
    return k >= sl && !memcmp(tail + k - sl, s, sl);
}

/* Appends p->prompt_suffix (after suffix_think when the prompt ends inside <think>) to j->prompt.
 * The suffix is tokenized in one piece (as if the template had written it) unless its plain range
 * holds the text of a control token: then in three, the plain range without special parsing. */
static int add_suffix(gen_job *j, const gen_model *gm, serve_error *err) {
    const gen_params *q = &j->p;
    id_vec v = {.p = j->prompt, .n = j->n_prompt, .cap = j->n_prompt};
    size_t len = strlen(q->prompt_suffix), a = q->suffix_plain_from, b = q->suffix_plain_to;
    if (a > b || b > len) a = b = len;
    char *plain = strndup(q->prompt_suffix + a, b - a);
    if (!plain) return serve_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    bool split = has_special_text(gm, plain);
    free(plain);
    int rc = 0;
    if (q->suffix_think && gen_ids_end_with(gm->tok, v.p, v.n, "<think>")) {
        j->suffix_think = true;
        rc = encode_into(gm, &v, q->suffix_think, strlen(q->suffix_think), true, err);
    }
    if (!split) {
        if (!rc) rc = encode_into(gm, &v, q->prompt_suffix, len, true, err);
    } else {
        if (!rc && a) rc = encode_into(gm, &v, q->prompt_suffix, a, true, err);
        if (!rc && b > a) rc = encode_into(gm, &v, q->prompt_suffix + a, b - a, false, err);
        if (!rc && len > b) rc = encode_into(gm, &v, q->prompt_suffix + b, len - b, true, err);
    }
    j->prompt = v.p;
    j->n_suffix = v.n - j->n_prompt;
    j->n_prompt = v.n;
    return rc;
}

/* ---- jobs ---- */

/* The reasoning budget of q as engine options (none unless think_budget >= 0 with an end marker).
 * Inside at the start: the prompt before the suffix ends with the start marker (the rule of
 * api_job_prompt_check) and no suffix_think closed the block. */
static void think_options(const gen_job *j, const gen_model *gm, cinfer_request *r) {
    const gen_params *q = &j->p;
    if (j->grammar || q->think_budget < 0 || q->n_think_end <= 0 || q->n_think_end > CINFER_MAX_THINK_MARKER ||
        q->n_think_start < 0 || q->n_think_start > CINFER_MAX_THINK_MARKER)
        return;
    r->think_budget = q->think_budget;
    r->think_start = q->think_start;
    r->n_think_start = q->n_think_start;
    r->think_end = q->think_end;
    r->n_think_end = q->n_think_end;
    r->think_open = !j->suffix_think && q->think_start_text[0] &&
                    gen_ids_end_with(gm->tok, j->prompt, j->n_prompt - j->n_suffix, q->think_start_text);
}

static uint64_t random_seed(void) {
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        s = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec;
    }
    return s;
}

/* The request's grammar through the compile cache (on the prompt worker: compiles take up to the
 * limit's milliseconds). An unsupported feature, a syntax error or an exceeded limit is a 400 naming
 * the field the spec came from, with the library's message (which names the keyword). */
static int compile_grammar(gen_job *j, const gen_model *gm, serve_error *err) {
    const structured_spec *s = &j->p.grammar;
    if (!s->kind) return 0;
    cinfer_grammar_spec spec = {.kind = s->kind, .text = s->text, .len = s->len};
    cinfer_grammar_error ge = {0};
    int hit = 0;
    j->grammar = cinfer_grammar_cache_get(gm->grammars, &spec, &gm->grammar_limits, &hit, &ge);
    if (!j->grammar) {
        if (ge.keyword[0] && !strstr(ge.msg, ge.keyword))
            return serve_bad(err, s->param, "'%s' cannot be enforced: %s (keyword '%s')", s->param, ge.msg, ge.keyword);
        return serve_bad(err, s->param, "'%s' cannot be enforced: %s", s->param, ge.msg);
    }
    j->grammar_cached = hit != 0;
    return 0;
}

int gen_job_start(gen_job *j, const gen_model *gm, gen_params *p, serve_error *err) {
    return gen_job_prepare(j, gm, p, err) || gen_job_submit(j, gm, err) ? -1 : 0;
}

int gen_job_prepare(gen_job *j, const gen_model *gm, gen_params *p, serve_error *err) {
    memset(j, 0, sizeof *j);
    j->p = *p;
    gen_params_init(p);
    gen_params *q = &j->p;
    int rc;
    if (q->kind == GEN_CHAT) {
        rc = q->req ? gen_req_prompt(gm, q->req, true, &j->prompt, &j->n_prompt, err)
                    : serve_bad(err, "messages", "no messages"); /* the protocol layer always sets req */
        if (!rc && q->prompt_suffix) rc = add_suffix(j, gm, err);
    } else if (q->prompt_ids) {
        j->prompt = malloc((size_t)q->n_prompt_ids * sizeof(int32_t));
        if (!j->prompt) return serve_fail(err, 500, "server_error", NULL, NULL, "out of memory");
        memcpy(j->prompt, q->prompt_ids, (size_t)q->n_prompt_ids * sizeof(int32_t));
        j->n_prompt = q->n_prompt_ids;
        rc = 0;
    } else rc = gen_text_prompt(gm, q->prompt ? q->prompt : "", q->prompt_len, true, &j->prompt, &j->n_prompt, err);
    if (rc) return -1;
    if (j->n_prompt == 0)
        return serve_bad(err, q->kind == GEN_CHAT ? "messages" : "prompt", "the prompt is empty (0 tokens)");
    int32_t nv = tokenizer_n_vocab(gm->tok);
    for (int32_t i = 0; i < j->n_prompt; i++)
        if (j->prompt[i] < 0 || j->prompt[i] >= nv)
            return serve_bad(err, "prompt", "token id %d is out of range [0, %d)", j->prompt[i], nv);
    if (j->n_prompt >= gm->ctx)
        return serve_fail(err, 400, "invalid_request_error", "context_length_exceeded",
                          q->kind == GEN_CHAT ? "messages" : "prompt",
                          "This model's maximum context length is %d tokens. However, your prompt has %d tokens, "
                          "leaving no room for the completion. Please reduce the length of the %s.",
                          gm->ctx, j->n_prompt, q->kind == GEN_CHAT ? "messages" : "prompt");
    if (q->max_tokens > 0 && (int64_t)j->n_prompt + q->max_tokens > gm->ctx)
        return serve_fail(err, 400, "invalid_request_error", "context_length_exceeded", "max_tokens",
                          "This model's maximum context length is %d tokens. However, you requested %lld tokens "
                          "(%d in the %s, %d in the completion). Please reduce the length of the %s or completion.",
                          gm->ctx, (long long)j->n_prompt + q->max_tokens, j->n_prompt,
                          q->kind == GEN_CHAT ? "messages" : "prompt", q->max_tokens,
                          q->kind == GEN_CHAT ? "messages" : "prompt");
    j->max_tokens = q->max_tokens > 0 ? q->max_tokens : gm->ctx - j->n_prompt;
    if (q->has_resume && resume_prepare(j, gm, err)) return -1;
    return compile_grammar(j, gm, err);
}

static int acc_text(gen_choice *c, const char *s, size_t n);
static int acc_tokens(gen_choice *c, const cinfer_output *o, int32_t k);

int gen_job_submit(gen_job *j, const gen_model *gm, serve_error *err) {
    const gen_params *q = &j->p;
    j->choices = calloc((size_t)q->n, sizeof *j->choices);
    if (!j->choices) return serve_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    if (j->n_resumed) { /* cinfer.resume: the whole output (a stored Responses object) starts with it */
        cinfer_output o = {.tokens = j->prompt + j->n_prompt - j->n_resumed, .n_tokens = j->n_resumed};
        if ((j->resume_text_len && acc_text(&j->choices[0], j->resume_text, j->resume_text_len)) ||
            (q->keep_ids && !q->logprobs && acc_tokens(&j->choices[0], &o, 0)))
            return serve_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    cinfer_request r = cinfer_request_default();
    r.prompt = j->prompt;
    r.n_prompt = j->n_prompt;
    r.sampling = q->sampling;
    r.sampling.bias = q->bias;
    r.max_tokens = j->max_tokens;
    r.stop_strings = (const char *const *)q->stop;
    r.n_stop_strings = q->n_stop;
    r.cache_salt = q->cache_salt;
    r.cache_salt_len = q->cache_salt ? strlen(q->cache_salt) : 0;
    r.ignore_eos = q->ignore_eos;
    r.swa_exact = q->swa_exact;
    r.min_tokens = q->min_tokens > j->n_resumed ? q->min_tokens - j->n_resumed : 0;
    r.include_stop_str = q->include_stop_str;
    r.keep_special = q->keep_special;
    r.stop_tokens = q->stop_ids;
    r.n_stop_tokens = q->n_stop_ids;
    r.priority = q->priority;
    r.traffic_class = q->traffic_class < 0 ? CINFER_TRAFFIC_DEFAULT : q->traffic_class;
    r.want_logprobs = q->logprobs;
    r.top_logprobs = q->logprobs ? q->top_logprobs : 0;
    r.speculative = q->speculative;
    think_options(j, gm, &r);
    uint64_t base = q->has_seed ? q->sampling.seed : random_seed();
    for (int32_t i = 0; i < q->n; i++) {
        gen_choice *c = &j->choices[i];
        c->index = i;
        c->stop_string = -1;
        r.sampling.seed = base + (uint64_t)i;
        char e[200] = "";
        cinfer_grammar_error ge = {0};
        r.grammar = j->grammar ? cinfer_grammar_matcher_new(j->grammar, gm->gvocab, &ge) : NULL;
        r.grammar_trigger = q->grammar.trigger;
        r.grammar_trigger_len = q->grammar.trigger ? strlen(q->grammar.trigger) : 0;
        if (j->grammar && !r.grammar) snprintf(e, sizeof e, "grammar matcher: %.150s", ge.msg);
        r.kv_export = i == 0 ? j->kv_export : NULL;
        r.kv_import = i == 0 ? j->kv_import : NULL;
        r.n_kv_import = i == 0 ? j->n_kv_import : 0;
        r.kv_import_window = i == 0 ? j->kv_import_window : NULL;
        r.kv_import_window_bytes = i == 0 ? j->kv_import_window_bytes : 0;
        r.kv_import_release = j->kv_import_release;
        r.kv_import_owner = j->kv_import_owner;
        c->id = j->grammar && !r.grammar ? 0 : cinfer_engine_submit(gm->engine, &r, e, sizeof e);
        if (c->id && i == 0) j->kv_import = NULL; /* the engine owns it now */
        if (!c->id) {
            cinfer_grammar_matcher_free(r.grammar); /* the engine took it only on success */
            for (int32_t k = 0; k < i; k++) {
                cinfer_engine_release(gm->engine, j->choices[k].id);
                j->choices[k].id = 0;
            }
            return serve_bad(err, NULL, "the request cannot be served: %s", e);
        }
    }
    j->usage.prompt_tokens = j->n_prompt - j->n_resumed;
    j->usage.completion_tokens = j->n_resumed;
    return 0;
}

static int acc_text(gen_choice *c, const char *s, size_t n) {
    if (c->text_len + n + 1 > c->text_cap) {
        size_t cap = c->text_cap ? c->text_cap : 256;
        while (cap < c->text_len + n + 1) cap *= 2;
        char *p = realloc(c->text, cap);
        if (!p) return -1;
        c->text = p;
        c->text_cap = cap;
    }
    memcpy(c->text + c->text_len, s, n);
    c->text_len += n;
    c->text[c->text_len] = 0;
    return 0;
}

static int acc_tokens(gen_choice *c, const cinfer_output *o, int32_t k) {
    int32_t n = o->n_tokens;
    if (o->n_top != k) k = 0;
    if (c->n_acc + n > c->acc_cap) {
        int32_t cap = c->acc_cap ? c->acc_cap : 64;
        while (cap < c->n_acc + n) cap *= 2;
        int32_t *nt = realloc(c->tokens, (size_t)cap * sizeof *nt);
        if (nt) c->tokens = nt;
        float *nl = realloc(c->logprobs, (size_t)cap * sizeof *nl);
        if (nl) c->logprobs = nl;
        if (!nt || !nl) return -1;
        if (k) {
            int32_t *ti = realloc(c->top_ids, (size_t)cap * (size_t)k * sizeof *ti);
            if (ti) c->top_ids = ti;
            float *tl = realloc(c->top_lps, (size_t)cap * (size_t)k * sizeof *tl);
            if (tl) c->top_lps = tl;
            if (!ti || !tl) return -1;
        }
        c->acc_cap = cap;
    }
    memcpy(c->tokens + c->n_acc, o->tokens, (size_t)n * sizeof *o->tokens);
    if (o->logprobs) memcpy(c->logprobs + c->n_acc, o->logprobs, (size_t)n * sizeof *o->logprobs);
    if (k) {
        memcpy(c->top_ids + (size_t)c->n_acc * (size_t)k, o->top_ids, (size_t)n * (size_t)k * sizeof *o->top_ids);
        memcpy(c->top_lps + (size_t)c->n_acc * (size_t)k, o->top_logprobs, (size_t)n * (size_t)k * sizeof(float));
    }
    c->n_acc += n;
    return 0;
}

int gen_job_read(gen_job *j, const gen_model *gm, int32_t ci, bool accumulate) {
    gen_choice *c = &j->choices[ci];
    j->new_tokens = 0;
    if (!c->id) return -1;
    int r = cinfer_engine_read(gm->engine, c->id, &c->out, 0);
    if (r < 0) {
        c->id = 0;
        c->finish = CINFER_FINISH_ERROR;
        snprintf(c->error, sizeof c->error, "the engine lost the request");
        j->n_done++;
        return -1;
    }
    if (r == 0) return 0;
    cinfer_output *o = &c->out;
    c->n_tokens += o->n_tokens;
    c->text_before = c->text_total;
    c->text_total += o->text_len;
    j->new_tokens = o->n_tokens;
    if (accumulate) {
        bool oom = o->text_len && acc_text(c, o->text, o->text_len);
        if (o->n_tokens && ((j->p.logprobs && o->logprobs) || j->p.keep_ids))
            oom |= acc_tokens(c, o, j->p.logprobs ? j->p.top_logprobs : 0) != 0;
        if (oom) snprintf(c->error, sizeof c->error, "out of memory");
    }
    if (o->finish != CINFER_FINISH_NONE) {
        c->id = 0;
        c->finish = o->finish;
        c->stop_string = o->finish == CINFER_FINISH_STOP && o->stop_string >= 0 && o->stop_string < j->p.n_stop
                             ? o->stop_string
                             : -1;
        if (o->finish == CINFER_FINISH_ERROR) snprintf(c->error, sizeof c->error, "%s", o->error);
        j->usage.completion_tokens += o->usage.completion_tokens;
        j->usage.accepted_draft_tokens += o->usage.accepted_draft_tokens;
        if (o->usage.cached_tokens + o->usage.replayed_tokens > j->usage.cached_tokens + j->usage.replayed_tokens) {
            j->usage.cached_tokens = o->usage.cached_tokens;
            j->usage.replayed_tokens = o->usage.replayed_tokens;
        }
        if (j->usage.cached_tokens > j->usage.prompt_tokens) /* cinfer.resume: resumed ids are not prompt */
            j->usage.cached_tokens = j->usage.prompt_tokens;
        j->n_done++;
    }
    return 1;
}

int32_t gen_job_find(const gen_job *j, uint64_t id) {
    for (int32_t i = 0; i < j->p.n && j->choices; i++)
        if (j->choices[i].id == id) return i;
    return -1;
}

void gen_job_cancel(gen_job *j, const gen_model *gm) {
    for (int32_t i = 0; i < j->p.n && j->choices; i++)
        if (j->choices[i].id) cinfer_engine_cancel(gm->engine, j->choices[i].id);
}

bool gen_job_done(const gen_job *j) { return j->choices && j->n_done >= j->p.n; }

void gen_job_free(gen_job *j, const gen_model *gm) {
    for (int32_t i = 0; i < j->p.n && j->choices; i++) {
        gen_choice *c = &j->choices[i];
        if (c->id) cinfer_engine_release(gm->engine, c->id);
        cinfer_output_release(&c->out);
        free(c->text);
        free(c->tokens);
        free(c->logprobs);
        free(c->top_ids);
        free(c->top_lps);
    }
    free(j->choices);
    free(j->prompt);
    free(j->resume_text);
    if (j->kv_import && j->kv_import_release) j->kv_import_release(j->kv_import_owner, j->kv_import);
    else free(j->kv_import);
    cinfer_kv_export_unref(j->kv_export);
    cinfer_grammar_release(j->grammar);
    gen_params_free(&j->p);
    memset(j, 0, sizeof *j);
}

const char *gen_finish_name(cinfer_finish f) {
    switch (f) {
    case CINFER_FINISH_STOP: return "stop";
    case CINFER_FINISH_LENGTH: return "length";
    case CINFER_FINISH_CANCELLED: return "abort";
    case CINFER_FINISH_ERROR: return "error";
    default: return NULL;
    }
}
