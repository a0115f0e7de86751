/* sampler.c - see sampler.h for the pipeline and its semantics.
 * Candidate selection avoids sorting the whole vocabulary: top-k and top-p use
 * quickselect on a growing prefix (k, then 256, 1024, ... candidates) so a
 * 128k vocabulary costs O(V) per token, not O(V log V). */
#include "engine/sampler.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct cand {
    float logit;
    int32_t id;
} cand;

struct sampler {
    sampler_params p;
    logit_bias *bias;
    int32_t n_vocab;
    uint32_t *counts; /* occurrences of each token in the history */
    bool any_history;
    cand *cands;
    uint64_t rng[4];
};

sampler_params sampler_default_params(void) {
    sampler_params p = {0};
    p.temperature = 1.0f;
    p.top_p = 1.0f;
    p.repetition_penalty = 1.0f;
    return p;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(uint64_t s[4]) { /* xoshiro256** */
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

static double rng_uniform(uint64_t s[4]) { return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0); }

sampler *sampler_create(const sampler_params *p, int32_t n_vocab) {
    if (n_vocab <= 0) return NULL;
    sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->counts = calloc((size_t)n_vocab, sizeof *s->counts);
    s->cands = malloc((size_t)n_vocab * sizeof *s->cands);
    if (p->n_bias > 0) {
        s->bias = malloc((size_t)p->n_bias * sizeof *s->bias);
        if (s->bias) memcpy(s->bias, p->bias, (size_t)p->n_bias * sizeof *s->bias);
    }
    if (!s->counts || !s->cands || (p->n_bias > 0 && !s->bias)) {
        sampler_free(s);
        return NULL;
    }
    s->p.bias = s->bias;
    uint64_t x = p->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    return s;
}

void sampler_free(sampler *s) {
    if (!s) return;
    free(s->counts);
    free(s->cands);
    free(s->bias);
    free(s);
}

void sampler_accept(sampler *s, int32_t token) {
    if (token >= 0 && token < s->n_vocab && s->counts[token] < UINT32_MAX) {
        s->counts[token]++;
        s->any_history = true;
    }
}

static void apply_bias_and_penalties(sampler *s, float *logits) {
    for (int32_t i = 0; i < s->p.n_bias; i++) {
        int32_t t = s->p.bias[i].token;
        if (t >= 0 && t < s->n_vocab) logits[t] += s->p.bias[i].bias;
    }
    if (!s->any_history) return;
    float rep = s->p.repetition_penalty, pres = s->p.presence_penalty, freq = s->p.frequency_penalty;
    if (rep == 1.0f && pres == 0.0f && freq == 0.0f) return;
    for (int32_t t = 0; t < s->n_vocab; t++) {
        uint32_t c = s->counts[t];
        if (!c) continue;
        float l = logits[t];
        if (rep != 1.0f && rep > 0.0f) l = l > 0 ? l / rep : l * rep;
        l -= (float)c * freq + pres;
        logits[t] = l;
    }
}

static int32_t argmax(const float *logits, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

/* Orders so that a > b means a comes first: higher logit, then lower id. */
static inline bool cand_before(const cand *a, const cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

/* Rearranges c[0..n) so that its first k elements are the k best (unordered). */
static void select_top(cand *c, int32_t n, int32_t k) {
    int32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        cand pivot = c[lo + (hi - lo) / 2];
        int32_t i = lo, j = hi;
        while (i <= j) {
            while (cand_before(&c[i], &pivot)) i++;
            while (cand_before(&pivot, &c[j])) j--;
            if (i <= j) {
                cand t = c[i];
                c[i] = c[j];
                c[j] = t;
                i++;
                j--;
            }
        }
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else break;
    }
}

static int cmp_cand(const void *a, const void *b) {
    const cand *x = a, *y = b;
    return cand_before(x, y) ? -1 : cand_before(y, x) ? 1 : 0;
}

/* Sorts the best k of c[0..n) to the front, in order. */
static void sort_top(cand *c, int32_t n, int32_t k) {
    if (k < n) select_top(c, n, k);
    qsort(c, (size_t)k, sizeof *c, cmp_cand);
}

/* The pipeline up to the draw: returns a token when the result is certain
 * (greedy, or nothing finite left), else -1 with the candidates of non-zero
 * probability in s->cands[0..*nc) (unnormalised probabilities in .logit) and
 * their total in *sum. */
static int32_t sampler_dist(sampler *s, float *logits, int32_t *nc_out, double *sum_out) {
    int32_t n = s->n_vocab;
    apply_bias_and_penalties(s, logits);
    if (s->p.temperature <= 0.0f) return argmax(logits, n);

    cand *c = s->cands;
    int32_t nc = 0;
    for (int32_t i = 0; i < n; i++)
        if (logits[i] > -INFINITY) c[nc++] = (cand){logits[i], i};
    if (nc == 0) return argmax(logits, n);

    /* top-k: keep the k best, sorted. */
    int32_t sorted = 0;
    if (s->p.top_k > 0 && s->p.top_k < nc) {
        sort_top(c, nc, s->p.top_k);
        nc = sorted = s->p.top_k;
    }
    /* temperature + softmax (over all remaining candidates) */
    float inv_t = 1.0f / s->p.temperature;
    float maxl = -INFINITY;
    for (int32_t i = 0; i < nc; i++) maxl = fmaxf(maxl, c[i].logit);
    double sum = 0.0;
    for (int32_t i = 0; i < nc; i++) {
        c[i].logit = expf((c[i].logit - maxl) * inv_t); /* now an unnormalised prob */
        sum += c[i].logit;
    }
    /* min-p: drop candidates below min_p * p_max (p_max's unnormalised prob is 1). */
    if (s->p.min_p > 0.0f) {
        int32_t w = 0;
        double kept = 0.0;
        for (int32_t i = 0; i < nc; i++)
            if (c[i].logit >= s->p.min_p) {
                kept += c[i].logit;
                c[w++] = c[i];
            }
        if (w > 0) {
            nc = w;
            sum = kept;
            sorted = 0;
        }
    }
    /* top-p: smallest prefix (in prob order) whose mass reaches top_p. */
    if (s->p.top_p < 1.0f && s->p.top_p > 0.0f) {
        double target = s->p.top_p * sum;
        int32_t k = nc < 256 ? nc : 256;
        for (;;) {
            if (k > sorted) {
                sort_top(c, nc, k);
                sorted = k;
            }
            double acc = 0.0;
            int32_t cut = -1;
            for (int32_t i = 0; i < k; i++) {
                acc += c[i].logit;
                if (acc >= target) {
                    cut = i + 1;
                    break;
                }
            }
            if (cut > 0) {
                nc = cut;
                sum = acc;
                break;
            }
            if (k == nc) break;
            k = k * 4 < nc ? k * 4 : nc;
        }
    }
    *nc_out = nc;
    *sum_out = sum;
    return -1;
}

int32_t sampler_sample(sampler *s, float *logits) {
    int32_t nc = 0;
    double sum = 0.0;
    int32_t t = sampler_dist(s, logits, &nc, &sum);
    if (t >= 0) return t;
    const cand *c = s->cands;
    double r = rng_uniform(s->rng) * sum, acc = 0.0;
    for (int32_t i = 0; i < nc; i++) {
        acc += c[i].logit;
        if (r < acc) return c[i].id;
    }
    return c[nc - 1].id;
}

/* Speculative verification (sampler.h). p = the candidates' probabilities
 * (unnormalised in c[].logit, total sum); q = the drafter's distribution
 * (NULL: one-hot on draft). Accept with min(1, p(d)/q(d)); otherwise draw
 * from the residual max(0, p - q), renormalised. */
static int32_t sampler_residual(sampler *s, const cand *c, int32_t nc, int32_t draft, const float *q, double sum) {
    double total = 0.0;
    for (int32_t i = 0; i < nc; i++) {
        double pi = c[i].logit / sum, qi = q ? (double)q[c[i].id] : (c[i].id == draft ? 1.0 : 0.0);
        total += pi > qi ? pi - qi : 0.0;
    }
    if (!(total > 0.0)) total = 0.0;
    double r = rng_uniform(s->rng) * total, acc = 0.0;
    int32_t last = -1;
    for (int32_t i = 0; i < nc; i++) {
        double pi = c[i].logit / sum, qi = q ? (double)q[c[i].id] : (c[i].id == draft ? 1.0 : 0.0);
        if (pi <= qi) continue;
        acc += pi - qi;
        last = c[i].id;
        if (r < acc) return c[i].id;
    }
    return last >= 0 ? last : c[0].id; /* rounding at the end of the range (or p == q: any sample of p) */
}

int32_t sampler_verify(sampler *s, float *logits, int32_t draft, const float *q, bool *accepted) {
    *accepted = false;
    if (draft < 0 || draft >= s->n_vocab) return sampler_sample(s, logits);
    int32_t nc = 0;
    double sum = 0.0;
    int32_t t = sampler_dist(s, logits, &nc, &sum);
    if (t >= 0) { /* greedy or certain: accept iff the draft is that token */
        *accepted = t == draft;
        return t;
    }
    const cand *c = s->cands;
    double pd = 0.0;
    for (int32_t i = 0; i < nc; i++)
        if (c[i].id == draft) pd = c[i].logit / sum;
    double qd = q ? (double)q[draft] : 1.0;
    if (!(qd > 0.0)) { /* a draft its drafter gave no probability: treat q as one-hot */
        q = NULL;
        qd = 1.0;
    }
    double ratio = pd / qd;
    if (rng_uniform(s->rng) < ratio) {
        *accepted = true;
        return draft;
    }
    return sampler_residual(s, c, nc, draft, q, sum);
}

sampler_params sampler_get_params(const sampler *s) { return s->p; }

int32_t sampler_draft(sampler *s, float *logits, float *q) {
    int32_t nc = 0;
    double sum = 0.0;
    int32_t t = sampler_dist(s, logits, &nc, &sum);
    memset(q, 0, (size_t)s->n_vocab * sizeof *q);
    if (t >= 0) {
        q[t] = 1.0f;
        return t;
    }
    const cand *c = s->cands;
    for (int32_t i = 0; i < nc; i++) q[c[i].id] = (float)(c[i].logit / sum);
    double r = rng_uniform(s->rng) * sum, acc = 0.0;
    for (int32_t i = 0; i < nc; i++) {
        acc += c[i].logit;
        if (r < acc) return c[i].id;
    }
    return c[nc - 1].id;
}
