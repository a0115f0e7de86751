/* spec_drafter.c - drafter construction by kind and the per-request
 * draft-length policy (spec_drafter.h).
 *
 * Policy: with acceptance rate a (EMA, weight 0.3 for the newest verify),
 * the chance that a chain of drafts is still accepted after j tokens is about
 * a^j; the request asks for the shortest k with a^k below 0.15 (all k_max
 * once a >= 0.9), so a drafter that is usually right drafts long and one that
 * is usually wrong drafts 1-2 tokens. Four verifies in a row that accept
 * nothing start a back-off: drafting pauses for 1, 2, 4, ... 16 steps, and
 * one accepted draft ends it. Free drafters (n-gram) skip the back-off and
 * ask for at least SPEC_POLICY_FREE_K tokens when decoding alone (spec_drafter.h): replaying the
 * code workload (bench_ngram_replay) gave 1.84x implied speed-up with that
 * against 1.71x with the back-off and a floor of 1. The batch-size share
 * (cap) comes from the engine (engine_spec.c). */
#include "engine/spec_drafter.h"

#include <math.h>
#include <string.h>

#include "cinfer/engine.h"
#include "engine/spec_ngram.h"

int spec_drafter_create(int32_t kind, int32_t capacity, spec_drafter *out, cf_err *err) {
    memset(out, 0, sizeof *out);
    out->kind = kind;
    switch (kind) {
    case CINFER_SPEC_NGRAM:
        out->ops = &spec_ngram_ops;
        out->state = spec_ngram_create(capacity);
        if (!out->state) return cf_fail(err, "out of memory for the n-gram drafter");
        return 0;
    case CINFER_SPEC_DRAFT: return 0; /* batched by the engine (engine_draft.c): no per-sequence state here */
    case CINFER_SPEC_MTP: return 0; /* batched by the engine (engine_mtp.c) */
    case CINFER_SPEC_DSPARK: return 0; /* batched by the engine (engine_dspark.c) */
    default: return cf_fail(err, "unknown drafter %d", kind);
    }
}

void spec_drafter_free(spec_drafter *d) {
    if (d->ops && d->ops->free) d->ops->free(d->state);
    memset(d, 0, sizeof *d);
}

void spec_policy_init(spec_policy *p, int32_t k_max, bool free_drafts) {
    int32_t k_min = free_drafts ? SPEC_POLICY_FREE_K : 1;
    *p = (spec_policy){
        .k_max = k_max, .k_min = k_min < k_max ? k_min : k_max, .free_drafts = free_drafts, .accept_rate = 0.6f};
}

int32_t spec_policy_want(spec_policy *p, int32_t cap, bool alone) {
    if (p->idle > 0) {
        p->idle--;
        return 0;
    }
    int32_t k = p->k_max;
    float a = p->accept_rate;
    if (a < 0.9f) {
        double want = a > 0.01f ? ceil(log(0.15) / log((double)a)) : 1.0;
        int32_t k_min = alone ? p->k_min : 1;
        if (want < k) k = want < k_min ? k_min : (int32_t)want;
    }
    return k < cap ? k : cap;
}

void spec_policy_update(spec_policy *p, int32_t drafted, int32_t accepted) {
    if (drafted <= 0) return;
    p->accept_rate = 0.7f * p->accept_rate + 0.3f * (float)accepted / (float)drafted;
    if (accepted > 0 || p->free_drafts) {
        p->fails = 0;
        return;
    }
    if (++p->fails >= 4) {
        int32_t shift = p->fails - 4 < 4 ? p->fails - 4 : 4;
        p->idle = 1 << shift;
    }
}

const char *cinfer_spec_drafter_name(int32_t drafter) {
    switch (drafter) {
    case CINFER_SPEC_DEFAULT: return "default";
    case CINFER_SPEC_OFF: return "off";
    case CINFER_SPEC_NGRAM: return "ngram";
    case CINFER_SPEC_DRAFT: return "draft";
    case CINFER_SPEC_MTP: return "mtp";
    case CINFER_SPEC_DSPARK: return "dspark";
    default: return NULL;
    }
}

int32_t cinfer_spec_drafter_parse(const char *name) {
    for (int32_t d = 0; d < CINFER_SPEC_N; d++)
        if (name && !strcmp(name, cinfer_spec_drafter_name(d))) return d;
    return -1;
}
