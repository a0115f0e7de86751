/* resume.c - cinfer.resume (see resume.h): parsing and validating the extension, and turning it
 * into prompt tail + counted output of a gen_job.
 *
 * Which ids are kept: the engine releases text late (a partial UTF-8 sequence, a possible stop
 * string start), so the client may have less text than the ids decode to. The longest prefix of
 * the ids whose decoded text (as the engine's stream detokenizer emits it) is at most text_bytes is
 * kept; the rest is generated again, and the first text_bytes - len(kept text) bytes of the new
 * output (which the client already has) are discarded by the stream writer (resume_skip). */
#include "serve/resume.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RESUME_MAX_IDS (1 << 20)

static bool id_ok(const char *s) {
    size_t n = strlen(s);
    if (!n || n >= 64) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '_' || s[i] == '-'))
            return false;
    return true;
}

static int parse_obj(json_t *r, gen_params *p, serve_error *err) {
    if (!json_is_object(r)) return serve_bad(err, "cinfer.resume", "cinfer.resume must be an object");
    json_t *t = json_object_get(r, "tokens"), *b = json_object_get(r, "text_bytes");
    json_t *id = json_object_get(r, "id"), *cr = json_object_get(r, "created");
    if (!json_is_array(t) || json_array_size(t) > RESUME_MAX_IDS)
        return serve_bad(err, "cinfer.resume.tokens", "cinfer.resume.tokens must be an array of at most %d token ids",
                         RESUME_MAX_IDS);
    if (!json_is_integer(b) || json_integer_value(b) < 0)
        return serve_bad(err, "cinfer.resume.text_bytes", "cinfer.resume.text_bytes must be an integer >= 0");
    if (id && (!json_is_string(id) || !id_ok(json_string_value(id))))
        return serve_bad(err, "cinfer.resume.id", "cinfer.resume.id must be 1-63 characters of [A-Za-z0-9_-]");
    if (cr && (!json_is_integer(cr) || json_integer_value(cr) < 0))
        return serve_bad(err, "cinfer.resume.created", "cinfer.resume.created must be an integer >= 0");
    size_t n = json_array_size(t);
    p->resume_ids = malloc((n ? n : 1) * sizeof *p->resume_ids);
    if (!p->resume_ids) return serve_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(t, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
            return serve_bad(err, "cinfer.resume.tokens", "cinfer.resume.tokens[%zu] is not a token id", i);
        p->resume_ids[i] = (int32_t)json_integer_value(v);
    }
    p->n_resume_ids = (int32_t)n;
    p->resume_text_bytes = json_integer_value(b);
    if (id) snprintf(p->resume_id, sizeof p->resume_id, "%s", json_string_value(id));
    p->resume_created = cr ? json_integer_value(cr) : 0;
    p->has_resume = true;
    return 0;
}

int resume_parse(const char *cinfer_json, gen_params *p, serve_error *err) {
    if (!cinfer_json) return 0;
    json_t *root = json_loads(cinfer_json, 0, NULL);
    json_t *r = json_is_object(root) ? json_object_get(root, "resume") : NULL;
    int rc = r ? parse_obj(r, p, err) : 0;
    json_decref(root);
    return rc;
}

int resume_prepare(gen_job *j, const gen_model *gm, serve_error *err) {
    const gen_params *q = &j->p;
    if (!q->stream || q->n != 1)
        return serve_bad(err, "cinfer.resume", "cinfer.resume continues a stream: it needs stream true and n 1");
    if (q->grammar.kind || q->think_budget >= 0)
        return serve_bad(err, "cinfer.resume",
                         "cinfer.resume cannot be combined with structured outputs or a "
                         "reasoning budget");
    int32_t nv = tokenizer_n_vocab(gm->tok), n = q->n_resume_ids;
    for (int32_t i = 0; i < n; i++)
        if (q->resume_ids[i] >= nv)
            return serve_bad(err, "cinfer.resume.tokens", "cinfer.resume.tokens[%d] = %d is out of range [0, %d)", i,
                             q->resume_ids[i], nv);
    /* decode as the engine's stream detokenizer does; keep the longest prefix within text_bytes */
    detok_stream dt;
    detok_init(&dt, gm->tok, false, q->keep_special);
    size_t cap = 256, len = 0, kept_len = 0;
    int32_t kept = 0;
    char *text = malloc(cap), piece[1024];
    if (!text) return serve_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    for (int32_t i = 0; i < n; i++) {
        size_t m = detok_push(&dt, q->resume_ids[i], piece, sizeof piece);
        if (m > sizeof piece) m = sizeof piece;
        if (len + m > cap) {
            while (cap < len + m) cap *= 2;
            char *t = realloc(text, cap);
            if (!t) {
                free(text);
                return serve_fail(err, 500, "server_error", NULL, NULL, "out of memory");
            }
            text = t;
        }
        memcpy(text + len, piece, m);
        len += m;
        if ((int64_t)len > q->resume_text_bytes) break;
        if (dt.n_pend == 0) { /* a cut inside a UTF-8 sequence would lose its first bytes */
            kept = i + 1;
            kept_len = len;
        }
    }
    if ((int64_t)len < q->resume_text_bytes) {
        free(text);
        return serve_bad(err, "cinfer.resume.text_bytes",
                         "cinfer.resume.text_bytes (%lld) is more than the %zu bytes "
                         "of text the tokens decode to",
                         (long long)q->resume_text_bytes, len);
    }
    if (kept >= j->max_tokens || (int64_t)j->n_prompt + kept >= gm->ctx) {
        free(text);
        return serve_bad(err, "cinfer.resume.tokens",
                         "cinfer.resume.tokens leaves nothing to generate (%d of "
                         "max_tokens %d)",
                         kept, j->max_tokens);
    }
    int32_t *pr = realloc(j->prompt, (size_t)(j->n_prompt + kept) * sizeof *pr);
    if (!pr) {
        free(text);
        return serve_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    memcpy(pr + j->n_prompt, q->resume_ids, (size_t)kept * sizeof *pr);
    j->prompt = pr;
    j->n_prompt += kept;
    j->n_suffix += kept;
    j->n_resumed = kept;
    j->max_tokens -= kept;
    j->resume_text = text;
    j->resume_text_len = kept_len;
    j->resume_skip = (size_t)(q->resume_text_bytes - (int64_t)kept_len);
    j->resume_client_bytes = q->resume_text_bytes;
    return 0;
}

void resume_adopt_id(const gen_params *p, char *id, size_t id_cap, int64_t *created, uint64_t *id_seed) {
    if (p->has_resume && p->resume_id[0]) {
        snprintf(id, id_cap, "%s", p->resume_id);
        if (p->resume_created > 0) *created = p->resume_created;
    }
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const char *c = id; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
    *id_seed = h;
}

int resume_comment(struct evbuffer *out, const gen_job *g, const char *id, int64_t created, bool opening) {
    const gen_choice *c = g->choices;
    if (!c) return -1;
    int32_t nt = opening ? 0 : c->out.n_tokens;
    int64_t b = (int64_t)g->resume_text_len + (int64_t)c->text_total;
    if (b < g->resume_client_bytes) b = g->resume_client_bytes;
    int rc = evbuffer_add_printf(out, ": cinfer {\"id\":\"%s\",\"created\":%lld,\"n\":%d,\"t\":[", id,
                                 (long long)created, g->n_resumed + c->n_tokens - nt) < 0;
    for (int32_t i = 0; i < nt && !rc; i++) rc = evbuffer_add_printf(out, i ? ",%d" : "%d", c->out.tokens[i]) < 0;
    if (!rc) rc = evbuffer_add_printf(out, "],\"b\":%lld}\n\n", (long long)b) < 0;
    return rc ? -1 : 0;
}
