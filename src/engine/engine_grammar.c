/* engine_grammar.c - structured output in the engine (cinfer_request.grammar; docs/engine.md
 * "Constrained decoding"): the vocabulary the grammar library matches tokens with, and the
 * per-request token mask applied at sampling.
 *
 * Vocabulary: built once at create from the engine's tokenizer: each token's bytes as the
 * detokenizer renders them (tokenizer_token_bytes), control / unknown / unused tokens and tokens
 * with no bytes marked special (never allowed: an empty token would let a request loop without
 * progress), the EOS/EOG ids passed as the ends the grammar allows where it can end.
 *
 * Per request (engine thread only): the matcher (owned from submit), one mask buffer and the
 * position it belongs to (mask_at == n_generated when it is current). The matcher advances once
 * per generated token at commit (eng_grammar_accept), like the reasoning-budget state, so
 * preemption (recompute rebuilds KV, never tokens) and dropped in-flight results (never
 * committed) leave it right.
 *
 * Overlap: with asynchronous scheduling the commit of step N accepts N's token, then step N+1 is
 * dispatched; the token N+1 will sample is constrained by the matcher state right then, so
 * eng_grammar_prefetch computes the masks of N+1's sampling items while N+1's forward pass runs
 * on the executor. The commit uses a mask whose mask_at matches and computes it on the spot
 * otherwise (sync scheduling, a request admitted or preempted in between).
 *
 * Sampling (eng_grammar_pick): a mask with one allowed token is a forced token: it is taken
 * without sampling (no mask application, no sampler; the sampler's history still records it).
 * Otherwise every disallowed logit becomes -inf before the sampler runs, so logit bias and
 * penalties (which keep -inf) and then temperature, top-k, top-p and min-p act on allowed tokens
 * only: the same distribution as masking after the penalties. A min_tokens mask of EOS/EOG
 * (applied before) that would leave nothing allowed yields to the grammar: the end it forces wins.
 * Nothing here allocates per token. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/timeutil.h"
#include "engine/engine_internal.h"

int eng_grammar_vocab_build(cinfer_engine *e, cf_err *err) {
    int32_t n = e->n_vocab;
    cinfer_grammar_token *toks = calloc((size_t)n, sizeof *toks);
    uint32_t *eos = calloc((size_t)n, sizeof *eos);
    size_t cap = 0;
    for (int32_t id = 0; id < n; id++) cap += tokenizer_token_bytes(e->tok, id, false, NULL, 0);
    e->tok_bytes = malloc(cap ? cap : 1);
    e->tok_off = malloc(((size_t)n + 1) * sizeof *e->tok_off);
    uint32_t n_eos = 0, used = 0;
    if (!toks || !eos || !e->tok_bytes || !e->tok_off || cap > UINT32_MAX) {
        free(toks);
        free(eos);
        return cf_fail(err, "out of memory for the grammar vocabulary");
    }
    for (int32_t id = 0; id < n; id++) {
        int ty = tokenizer_token_type(e->tok, id);
        size_t len = tokenizer_token_bytes(e->tok, id, false, (char *)e->tok_bytes + used, cap - used);
        e->tok_off[id] = used;
        toks[id].bytes = e->tok_bytes + used;
        toks[id].len = (uint32_t)len;
        toks[id].special = ty == TOKEN_TYPE_CONTROL || ty == TOKEN_TYPE_UNKNOWN || ty == TOKEN_TYPE_UNUSED ||
                           ty == TOKEN_TYPE_UNDEFINED || len == 0;
        used += (uint32_t)len;
        if (tokenizer_is_eog(e->tok, id)) eos[n_eos++] = (uint32_t)id;
    }
    e->tok_off[n] = used;
    cinfer_grammar_error ge = {0};
    e->gvocab = cinfer_grammar_vocab_new(toks, (uint32_t)n, eos, n_eos, &ge);
    free(toks);
    free(eos);
    if (!e->gvocab) return cf_fail(err, "engine: the grammar vocabulary: %s", ge.msg);
    e->mask_words = cinfer_grammar_mask_words(e->gvocab);
    return 0;
}

const cinfer_grammar_vocab *cinfer_engine_grammar_vocab(const cinfer_engine *e) { return e->gvocab; }

int eng_grammar_check(const cinfer_request *r, cf_err *err) {
    if (!r->grammar) return r->grammar_trigger_len ? cf_fail(err, "a grammar trigger without a grammar") : 0;
    if (r->grammar_trigger_len > 256 || (r->grammar_trigger_len && !r->grammar_trigger))
        return cf_fail(err, "the grammar trigger must be 1..256 bytes");
    if (r->ignore_eos) return cf_fail(err, "a grammar-constrained request cannot ignore EOS");
    if (r->think_budget >= 0 && r->n_think_end > 0)
        return cf_fail(err, "a grammar-constrained request cannot have a reasoning budget");
    return 0;
}

/* Tokens whose bytes hold the whole trigger, and where its first occurrence ends in each. */
static int trig_tokens(cinfer_engine *e, eng_req *q) {
    int32_t n = 0, cap = 0;
    for (int32_t t = 0; t < e->n_vocab; t++) {
        const uint8_t *b = e->tok_bytes + e->tok_off[t];
        size_t len = e->tok_off[t + 1] - e->tok_off[t];
        const uint8_t *p = memmem(b, len, q->trig, (size_t)q->trig_len);
        if (!p) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            int32_t *a = realloc(q->trig_toks, (size_t)cap * sizeof *a),
                    *c = a ? realloc(q->trig_end, (size_t)cap * sizeof *c) : NULL;
            if (a) q->trig_toks = a;
            if (c) q->trig_end = c;
            if (!a || !c) return -1;
        }
        q->trig_toks[n] = t;
        q->trig_end[n++] = (int32_t)(p - b) + q->trig_len;
    }
    q->n_trig_toks = n;
    return 0;
}

int eng_grammar_init(cinfer_engine *e, eng_req *q, const cinfer_request *r, cf_err *err) {
    q->mask_at = -1;
    if (!r->grammar) return 0;
    q->mask = malloc(e->mask_words * sizeof *q->mask);
    if (!q->mask) return cf_fail(err, "out of memory for the grammar mask");
    q->gm_active = r->grammar_trigger_len == 0;
    if (!q->gm_active) {
        q->trig = malloc(r->grammar_trigger_len);
        if (!q->trig) return cf_fail(err, "out of memory for the grammar trigger");
        memcpy(q->trig, r->grammar_trigger, r->grammar_trigger_len);
        q->trig_len = (int32_t)r->grammar_trigger_len;
        if (trig_tokens(e, q)) return cf_fail(err, "out of memory for the grammar trigger");
    }
    q->gm = r->grammar; /* owned from here (the caller's on failure: submit clears it then) */
    return 0;
}

/* r's mask for its next sampling position (computed now unless current). */
static void eng_grammar_mask(cinfer_engine *e, eng_req *r) {
    if (r->mask_at == r->n_generated) return;
    double t0 = time_now();
    r->mask_allowed = cinfer_grammar_matcher_fill_mask(r->gm, r->mask, e->mask_words);
    r->mask_at = r->n_generated;
    e->st.t_grammar += time_now() - t0;
}

void eng_grammar_prefetch(cinfer_engine *e, const eng_stepbuf *sb) {
    for (int32_t k = 0; k < sb->n_items; k++) {
        const eng_item *it = &sb->items[k];
        eng_req *r = it->r;
        if (!it->sample || !r->gm || !r->gm_active || r->done || r->epoch != it->epoch || r->mask_at == r->n_generated)
            continue;
        eng_grammar_mask(e, r);
        e->st.grammar_masks_overlapped++;
    }
}

static bool allowed(const uint32_t *mask, int32_t t) { return mask[t >> 5] >> (t & 31) & 1u; }

/* The lowest allowed id (a mask with at least one bit set). */
static int32_t first_allowed(const uint32_t *mask, size_t words) {
    for (size_t w = 0; w < words; w++)
        if (mask[w]) return (int32_t)(w * 32 + (size_t)__builtin_ctz(mask[w]));
    return -1;
}

/* Whether token t completes the trigger after trig_k bytes of it; *after: where, in t's bytes. */
static bool trig_completes(const cinfer_engine *e, const eng_req *r, int32_t t, size_t *after) {
    const uint8_t *b = e->tok_bytes + e->tok_off[t];
    size_t len = e->tok_off[t + 1] - e->tok_off[t], rest = (size_t)(r->trig_len - r->trig_k);
    if (r->trig_k > 0 && len >= rest && !memcmp(b, r->trig + r->trig_k, rest)) {
        *after = rest;
        return true;
    }
    const uint8_t *p = memmem(b, len, r->trig, (size_t)r->trig_len);
    if (p) *after = (size_t)(p - b) + (size_t)r->trig_len;
    return p != NULL;
}

/* Whether the grammar (at its start) takes token t's bytes after the trigger. */
static bool trig_rest_ok(const cinfer_engine *e, eng_req *r, int32_t t, size_t after) {
    size_t len = e->tok_off[t + 1] - e->tok_off[t];
    if (after >= len) return true;
    if (cinfer_grammar_matcher_accept_bytes(r->gm, e->tok_bytes + e->tok_off[t] + after, len - after, NULL))
        return false;
    cinfer_grammar_matcher_rollback(r->gm, 1);
    return true;
}

/* Free output under a lazy grammar: masks the tokens that would complete the trigger with bytes
 * the grammar cannot start with (those holding the whole trigger; with a partial trigger pending,
 * also those that finish it). */
static void trig_mask(cinfer_engine *e, eng_req *r, float *row) {
    size_t after;
    for (int32_t i = 0; i < r->n_trig_toks; i++)
        if (!trig_rest_ok(e, r, r->trig_toks[i], (size_t)r->trig_end[i])) row[r->trig_toks[i]] = -INFINITY;
    if (r->trig_k == 0) return;
    for (int32_t t = 0; t < e->n_vocab; t++)
        if (trig_completes(e, r, t, &after) && !trig_rest_ok(e, r, t, after)) row[t] = -INFINITY;
}

int32_t eng_grammar_pick(cinfer_engine *e, eng_req *r, float *row) {
    if (!r->gm_active) {
        trig_mask(e, r, row);
        return -1;
    }
    eng_grammar_mask(e, r);
    e->st.grammar_tokens++;
    if (r->mask_allowed <= 1) { /* forced (or a dead grammar: the accept below fails it) */
        e->st.grammar_forced_tokens++;
        int32_t t = first_allowed(r->mask, e->mask_words);
        return t >= 0 ? t : 0;
    }
    int32_t live = 0;
    for (int32_t t = 0; t < e->n_vocab; t++) {
        if (!allowed(r->mask, t)) row[t] = -INFINITY;
        else live += row[t] > -INFINITY;
    }
    if (live == 0) return first_allowed(r->mask, e->mask_words); /* min_tokens masked every allowed end */
    return -1;
}

/* The free output gained token t: the trigger bytes it ends with now (the longest tail of the
 * pending trigger prefix + t's bytes that is a proper prefix of the trigger). */
static int32_t trig_advance(const cinfer_engine *e, const eng_req *r, int32_t t) {
    const uint8_t *b = e->tok_bytes + e->tok_off[t];
    size_t len = e->tok_off[t + 1] - e->tok_off[t];
    uint8_t tail[512];
    size_t n = 0, keep = (size_t)r->trig_len - 1;
    const uint8_t *from = len > keep ? b + len - keep : b;
    if (len < keep) { /* the pending prefix still counts */
        size_t k = (size_t)r->trig_k < keep - len ? (size_t)r->trig_k : keep - len;
        memcpy(tail, r->trig + r->trig_k - k, k);
        n = k;
    }
    memcpy(tail + n, from, (size_t)(b + len - from));
    n += (size_t)(b + len - from);
    for (size_t k = n < keep ? n : keep; k > 0; k--)
        if (!memcmp(tail + n - k, r->trig, k)) return (int32_t)k;
    return 0;
}

int eng_grammar_accept(cinfer_engine *e, eng_req *r, int32_t token) {
    if (!r->gm_active) {
        size_t after;
        if (!trig_completes(e, r, token, &after)) {
            r->trig_k = trig_advance(e, r, token);
            return 0;
        }
        size_t len = e->tok_off[token + 1] - e->tok_off[token];
        r->trig_k = 0;
        r->gm_active = true;
        r->mask_at = -1;
        if (after < len &&
            cinfer_grammar_matcher_accept_bytes(r->gm, e->tok_bytes + e->tok_off[token] + after, len - after, NULL))
            return -1; /* trig_mask let it through: cannot happen */
    } else if (cinfer_grammar_matcher_accept(r->gm, (uint32_t)token, NULL)) {
        return -1;
    }
    if (r->trig_len && cinfer_grammar_matcher_is_accepting(r->gm)) { /* the call ended: free again */
        cinfer_grammar_matcher_rollback(r->gm, cinfer_grammar_matcher_steps(r->gm));
        r->gm_active = false;
        r->mask_at = -1;
    }
    return 0;
}
