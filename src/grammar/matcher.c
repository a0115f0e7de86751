/* matcher.c - cinfer_grammar_matcher: one request's position in a grammar. Owns the Earley
 * chart (earley.h), the step history for rollback (the chart height before each step), the
 * terminated flag (EOS accepted), forced bytes/tokens. Token masks are in mask.c. */
#include <stdlib.h>
#include <string.h>

#include "grammar/matcher_impl.h"

/* The grammar's shared mask cache for this vocabulary, or a private one. Returns 1, or 0 (memory). */
static int attach_cache(cinfer_grammar_matcher *m) {
    m->cache = gr_grammar_mask_cache(m->g, m->v);
    if (!m->cache) m->cache = m->private_cache = gr_mask_cache_new(m->v->content_hash, (size_t)64 << 20);
    return m->cache != NULL;
}

cinfer_grammar_matcher *cinfer_grammar_matcher_new(cinfer_grammar *g, const cinfer_grammar_vocab *v,
                                                   cinfer_grammar_error *err) {
    if (!g || !v) return gr_fail(err, "", -1, "matcher needs a grammar and a vocabulary"), NULL;
    cinfer_grammar_matcher *m = calloc(1, sizeof *m);
    if (!m) return gr_fail(err, "", -1, "out of memory"), NULL;
    if (gr_chart_init(&m->chart, g->cfg)) {
        free(m);
        return gr_fail(err, "", -1, "out of memory"), NULL;
    }
    m->g = cinfer_grammar_retain(g);
    m->v = v;
    if (!attach_cache(m)) {
        cinfer_grammar_matcher_free(m);
        return gr_fail(err, "", -1, "out of memory"), NULL;
    }
    return m;
}

void cinfer_grammar_matcher_free(cinfer_grammar_matcher *m) {
    if (!m) return;
    gr_chart_free(&m->chart);
    gr_mask_cache_free(m->private_cache);
    gr_mask_scratch_free(&m->ms);
    cinfer_grammar_release(m->g);
    free(m->step_sets);
    free(m->step_eos);
    free(m->scratch_mask);
    free(m);
}

cinfer_grammar_matcher *cinfer_grammar_matcher_fork(const cinfer_grammar_matcher *m, cinfer_grammar_error *err) {
    if (!m) return gr_fail(err, "", -1, "no matcher to fork"), NULL;
    cinfer_grammar_matcher *f = calloc(1, sizeof *f);
    if (!f) return gr_fail(err, "", -1, "out of memory"), NULL;
    if (gr_chart_copy(&f->chart, &m->chart)) {
        free(f);
        return gr_fail(err, "", -1, "out of memory"), NULL;
    }
    f->g = cinfer_grammar_retain(m->g);
    f->v = m->v;
    f->terminated = m->terminated;
    if (!attach_cache(f)) {
        cinfer_grammar_matcher_free(f);
        return gr_fail(err, "", -1, "out of memory"), NULL;
    }
    if (m->n_steps) {
        f->step_sets = malloc((size_t)m->n_steps * sizeof *f->step_sets);
        f->step_eos = malloc(m->n_steps);
        if (!f->step_sets || !f->step_eos) {
            cinfer_grammar_matcher_free(f);
            return gr_fail(err, "", -1, "out of memory"), NULL;
        }
        memcpy(f->step_sets, m->step_sets, (size_t)m->n_steps * sizeof *f->step_sets);
        memcpy(f->step_eos, m->step_eos, m->n_steps);
        f->n_steps = f->cap_steps = m->n_steps;
    }
    return f;
}

static int push_step(cinfer_grammar_matcher *m, uint32_t height, int eos) {
    if (m->n_steps == m->cap_steps) {
        uint32_t n = m->cap_steps ? m->cap_steps * 2 : 64;
        uint32_t *s = realloc(m->step_sets, (size_t)n * sizeof *s);
        if (!s) return -1;
        m->step_sets = s;
        uint8_t *e = realloc(m->step_eos, n);
        if (!e) return -1;
        m->step_eos = e;
        m->cap_steps = n;
    }
    m->step_sets[m->n_steps] = height;
    m->step_eos[m->n_steps] = (uint8_t)eos;
    m->n_steps++;
    return 0;
}

/* Scans bytes; all-or-nothing. Returns 0, -1 (not viable / memory) or -2 (over the matching
 * item limit), with the chart restored. */
static int scan_bytes(cinfer_grammar_matcher *m, const uint8_t *bytes, size_t len) {
    uint32_t height = m->chart.n_sets;
    int before = m->chart.over_limit;
    m->chart.over_limit = 0;
    for (size_t i = 0; i < len; i++) {
        if (gr_chart_scan(&m->chart, bytes[i]) != 1) {
            gr_chart_pop_to(&m->chart, height);
            int limit = m->chart.over_limit;
            m->chart.over_limit |= before;
            return limit ? -2 : -1;
        }
    }
    m->chart.over_limit = before;
    return 0;
}

static const char LIMIT_TEXT[] =
    "the grammar needs more Earley items at one position than its matching limit (max_set_items): it is too "
    "ambiguous, e.g. a large counted repetition of something that can be empty";

/* The error of a failed scan_bytes (rc): the limit, or the bytes / token (UINT32_MAX: bytes). */
static int scan_fail(cinfer_grammar_error *err, int rc, uint32_t token) {
    if (rc == -2) return gr_fail(err, "", -1, "%s", LIMIT_TEXT);
    if (token == UINT32_MAX) return gr_fail(err, "", -1, "bytes not allowed by the grammar");
    return gr_fail(err, "", -1, "token %u not allowed by the grammar", token);
}

int cinfer_grammar_matcher_accept_bytes(cinfer_grammar_matcher *m, const uint8_t *bytes, size_t len,
                                        cinfer_grammar_error *err) {
    if (!m || (len && !bytes)) return gr_fail(err, "", -1, "bad arguments");
    if (m->terminated) return gr_fail(err, "", -1, "the grammar has already terminated");
    uint32_t height = m->chart.n_sets;
    int rc = scan_bytes(m, bytes, len);
    if (rc) return scan_fail(err, rc, UINT32_MAX);
    if (push_step(m, height, 0)) {
        gr_chart_pop_to(&m->chart, height);
        return gr_fail(err, "", -1, "out of memory");
    }
    return 0;
}

int cinfer_grammar_matcher_accept(cinfer_grammar_matcher *m, uint32_t token, cinfer_grammar_error *err) {
    if (!m) return gr_fail(err, "", -1, "no matcher");
    const cinfer_grammar_vocab *v = m->v;
    if (token >= v->n_tokens) return gr_fail(err, "", -1, "token %u out of range", token);
    if (m->terminated) return gr_fail(err, "", -1, "the grammar has already terminated");
    uint32_t height = m->chart.n_sets;
    if (v->is_eos[token]) {
        if (!gr_chart_accepting(&m->chart))
            return gr_fail(err, "", -1, "end of sequence before the grammar is complete");
        if (push_step(m, height, 1)) return gr_fail(err, "", -1, "out of memory");
        m->terminated = 1;
        return 0;
    }
    if (v->tok_special[token] || v->tok_len[token] == 0)
        return gr_fail(err, "", -1, "special token %u is not allowed by the grammar", token);
    int rc = scan_bytes(m, v->bytes + v->tok_off[token], v->tok_len[token]);
    if (rc) return scan_fail(err, rc, token);
    if (push_step(m, height, 0)) {
        gr_chart_pop_to(&m->chart, height);
        return gr_fail(err, "", -1, "out of memory");
    }
    return 0;
}

int cinfer_grammar_matcher_rollback(cinfer_grammar_matcher *m, uint32_t n) {
    if (!m || n > m->n_steps) return -1;
    if (n == 0) return 0;
    uint32_t to = m->n_steps - n;
    for (uint32_t i = to; i < m->n_steps; i++)
        if (m->step_eos[i]) m->terminated = 0;
    gr_chart_pop_to(&m->chart, m->step_sets[to]);
    m->n_steps = to;
    return 0;
}

uint32_t cinfer_grammar_matcher_steps(const cinfer_grammar_matcher *m) { return m ? m->n_steps : 0; }
int cinfer_grammar_matcher_is_accepting(const cinfer_grammar_matcher *m) {
    return m && !m->terminated && gr_chart_accepting(&m->chart);
}
int cinfer_grammar_matcher_is_terminated(const cinfer_grammar_matcher *m) { return m && m->terminated; }

const char *cinfer_grammar_matcher_limit_error(const cinfer_grammar_matcher *m) {
    if (!m) return NULL;
    return m->chart.over_limit || atomic_load(&m->g->limit_hit) ? LIMIT_TEXT : NULL;
}

static int single_byte(const gr_class *c, uint8_t *out) {
    int n = 0;
    for (int w = 0; w < 4; w++) n += __builtin_popcountll(c->bits[w]);
    if (n != 1) return 0;
    for (int w = 0; w < 4; w++)
        if (c->bits[w]) *out = (uint8_t)(w * 64 + __builtin_ctzll(c->bits[w]));
    return 1;
}

size_t cinfer_grammar_matcher_forced_bytes(cinfer_grammar_matcher *m, uint8_t *out, size_t cap) {
    if (!m || m->terminated) return 0;
    uint32_t height = m->chart.n_sets;
    size_t n = 0;
    uint8_t b = 0;
    while (n < cap && !gr_chart_accepting(&m->chart) && single_byte(gr_chart_next_bytes(&m->chart), &b)) {
        if (gr_chart_scan(&m->chart, b) != 1) break;
        out[n++] = b;
    }
    gr_chart_pop_to(&m->chart, height);
    return n;
}

int cinfer_grammar_matcher_forced_token(cinfer_grammar_matcher *m, uint32_t *token) {
    if (!m || m->terminated) return 0;
    size_t words = cinfer_grammar_mask_words(m->v);
    if (!m->scratch_mask && !(m->scratch_mask = malloc(words * sizeof *m->scratch_mask))) return 0;
    if (cinfer_grammar_matcher_fill_mask(m, m->scratch_mask, words) != 1) return 0;
    for (size_t w = 0; w < words; w++)
        if (m->scratch_mask[w]) {
            *token = (uint32_t)(w * 32 + __builtin_ctz(m->scratch_mask[w]));
            return 1;
        }
    return 0;
}
