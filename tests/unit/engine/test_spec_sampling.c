/* test_spec_sampling.c - lossless speculative sampling (sampler_verify), a
 * statistical test on stories260K (512-token vocabulary).
 *
 * Target: the next-token distributions p_0..p_k of stories260K at k + 1
 * consecutive positions of a fixed prompt (real logits), each through the
 * request's sampling pipeline (temperature 0.9, top-k 200, top-p 0.97,
 * min-p 0.002, a logit bias). For one verify of k drafts the token emitted at
 * output index j (when the round reaches it) must be distributed as p_j: a
 * draft is accepted with min(1, p/q), else the residual is drawn, else the
 * bonus token. (With this position-indexed target the round's randomness
 * after index j-1 is independent of how it got there, so conditioning on
 * reaching j does not change the law.)
 *
 * Drafters, k = 1..8: good (q = softmax of the raw logits: close to p, not
 * equal), bad (uniform q), adversarial (one-hot on the least likely token,
 * which top-k removes: every draft is rejected), and one-hot on the argmax
 * (what an n-gram drafter looks like, q = NULL).
 *
 * Test: two-sample chi-square homogeneity between N = 6000 speculative draws
 * and N plain sampler_sample draws (fixed seeds), bins with fewer than 10
 * expected counts merged, at alpha = 1e-4 per test (about 100 tests: a
 * false alarm under 1 %; the seeds are fixed, so the result is stable).
 * Power (documented by a negative control run here): a broken verifier that
 * redraws from p instead of the residual after a rejection is rejected for
 * the one-hot-argmax drafter (its bias is p(d)(1 - p(d)) on the drafted
 * token); the test asserts its statistic exceeds the critical value. At
 * N = 6000 per side the test detects a total-variation shift of about 0.04
 * on distributions of this entropy. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/threadpool.h"
#include "engine/generate.h"
#include "engine/sampler.h"
#include "model/model.h"
#include "testutil.h"

#define V 512
#define KMAX 8
#define N 6000

static float g_rows[KMAX + 1][V]; /* raw logits of the target at each position */
static float g_q[KMAX + 1][V]; /* the good drafter's distribution */
static const logit_bias g_bias[2] = {{.token = 13, .bias = 2.0f}, {.token = 400, .bias = -3.0f}};

static sampler *make_sampler(uint64_t seed) {
    sampler_params p = sampler_default_params();
    p.temperature = 0.9f;
    p.top_k = 200;
    p.top_p = 0.97f;
    p.min_p = 0.002f;
    p.bias = g_bias;
    p.n_bias = 2;
    p.seed = seed;
    return sampler_create(&p, V);
}

static uint64_t rng_state = 12345;
static double urand(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static int32_t draw(const float *q) {
    double r = urand(), acc = 0;
    for (int32_t i = 0; i < V; i++) {
        acc += q[i];
        if (r < acc) return i;
    }
    return V - 1;
}

enum { D_GOOD, D_BAD, D_ADVERSARIAL, D_ONEHOT, D_N };
static const char *d_names[D_N] = {"good", "bad", "adversarial", "one-hot argmax"};
static float g_uniform[V];

/* Drafter d's token and q at position j (q NULL: one-hot). */
static int32_t propose(int d, int j, const float **q) {
    *q = NULL;
    switch (d) {
    case D_GOOD: *q = g_q[j]; return draw(g_q[j]);
    case D_BAD: *q = g_uniform; return (int32_t)(urand() * V) % V;
    case D_ADVERSARIAL: {
        int32_t lo = 0;
        for (int32_t i = 1; i < V; i++)
            if (g_rows[j][i] < g_rows[j][lo]) lo = i;
        return lo;
    }
    default: {
        int32_t hi = 0;
        for (int32_t i = 1; i < V; i++)
            if (g_rows[j][i] > g_rows[j][hi]) hi = i;
        return hi;
    }
    }
}

/* A broken verifier for the negative control: on rejection, redraws from p (not the residual). */
static int32_t broken_verify(sampler *s, float *row, int32_t draft, const float *q, bool *acc) {
    static float copy[V];
    memcpy(copy, row, sizeof copy);
    int32_t t = sampler_verify(s, row, draft, q, acc);
    if (*acc) return t;
    return sampler_sample(s, copy);
}

/* Chi-square statistic of two histograms over V bins (sparse bins merged); *df gets the degrees. */
static double chi2_two_sample(const int32_t *a, const int32_t *b, int32_t na, int32_t nb, int32_t *df) {
    double stat = 0, ka = sqrt((double)nb / na), kb = sqrt((double)na / nb);
    int32_t bins = 0, ra = 0, rb = 0;
    for (int32_t i = 0; i <= V; i++) {
        int32_t x = i < V ? a[i] : ra, y = i < V ? b[i] : rb;
        if (i < V && x + y < 20) {
            ra += x;
            rb += y;
            continue;
        }
        if (x + y == 0) continue;
        double d = ka * x - kb * y;
        stat += d * d / (x + y);
        bins++;
    }
    *df = bins - 1;
    return stat;
}

/* Upper quantile of chi-square(df) at alpha = 1e-4 (Wilson-Hilferty; z = 3.719). */
static double chi2_crit(int32_t df) {
    if (df < 1) df = 1;
    double h = 2.0 / (9.0 * df), z = 3.719;
    return df * pow(1 - h + z * sqrt(h), 3);
}

static int32_t g_spec[KMAX + 1][V], g_plain[KMAX + 1][V], g_reach[KMAX + 1];

/* N rounds of k drafts with drafter d; histograms of the token emitted at each output index. */
static void run_rounds(int d, int k, bool broken) {
    memset(g_spec, 0, sizeof g_spec);
    memset(g_reach, 0, sizeof g_reach);
    sampler *s = make_sampler(1000 + (uint64_t)(d * 16 + k));
    static float row[V];
    for (int t = 0; t < N; t++) {
        for (int j = 0; j <= k; j++) {
            const float *q = NULL;
            int32_t draft = j < k ? propose(d, j, &q) : -1;
            memcpy(row, g_rows[j], sizeof row);
            bool acc = false;
            int32_t tok = broken ? broken_verify(s, row, draft, q, &acc) : sampler_verify(s, row, draft, q, &acc);
            g_spec[j][tok]++;
            g_reach[j]++;
            if (!acc) break;
        }
    }
    sampler_free(s);
}

static void plain_hist(void) {
    static float row[V];
    for (int j = 0; j <= KMAX; j++) {
        sampler *s = make_sampler(77 + (uint64_t)j);
        for (int t = 0; t < N; t++) {
            memcpy(row, g_rows[j], sizeof row);
            g_plain[j][sampler_sample(s, row)]++;
        }
        sampler_free(s);
    }
}

int main(void) {
    model *m;
    cf_err err = {0};
    if (model_load(shared_path("models/stories260K.gguf"), &m, &err)) return tu_missing_fixture(err.msg);
    CHECK(model_get_hparams(m)->n_vocab == V);
    thread_pool *tp = pool_create(1);
    gen_session g;
    CHECK(gen_init(&g, m, tp, 128, 64, &err) == 0);
    int32_t prompt[24] = {1,   403, 261, 378, 266, 297, 308, 431, 260, 313, 295, 275,
                          261, 353, 363, 270, 299, 260, 298, 324, 267, 343, 275, 283};
    static float all[24][V];
    CHECK(gen_feed(&g, prompt, 24, &all[0][0], &err) == 0);
    for (int j = 0; j <= KMAX; j++) {
        memcpy(g_rows[j], all[24 - 1 - KMAX + j], sizeof g_rows[j]);
        float mx = g_rows[j][0];
        for (int i = 1; i < V; i++) mx = fmaxf(mx, g_rows[j][i]);
        double sum = 0;
        for (int i = 0; i < V; i++) sum += exp(g_rows[j][i] - mx);
        for (int i = 0; i < V; i++) g_q[j][i] = (float)(exp(g_rows[j][i] - mx) / sum);
    }
    for (int i = 0; i < V; i++) g_uniform[i] = 1.0f / V;
    plain_hist();
    int tests = 0, passed = 0;
    for (int d = 0; d < D_N; d++)
        for (int k = 1; k <= KMAX; k++) {
            run_rounds(d, k, false);
            double worst = 0;
            for (int j = 0; j <= k; j++) {
                if (g_reach[j] < 1000) continue;
                int32_t df;
                double x = chi2_two_sample(g_spec[j], g_plain[j], g_reach[j], N, &df), c = chi2_crit(df);
                tests++;
                passed += x <= c;
                CHECKF(x <= c, "%s drafter, k=%d, index %d: chi2 %.1f > %.1f (df %d, %d draws)", d_names[d], k, j, x, c,
                       df, g_reach[j]);
                if (x / c > worst) worst = x / c;
            }
            if (k == 1 || k == KMAX)
                fprintf(stderr, "%-15s k=%d: tokens per round %.2f, worst chi2/critical %.2f\n", d_names[d], k,
                        (double)(g_reach[0] + g_reach[1] + (k > 1 ? g_reach[2] : 0)) / N, worst);
        }
    fprintf(stderr, "%d of %d chi-square tests pass at alpha 1e-4\n", passed, tests);
    CHECK(tests >= 40);
    /* negative control: the broken verifier must be caught (power) */
    run_rounds(D_ONEHOT, 1, true);
    int32_t df;
    double x = chi2_two_sample(g_spec[0], g_plain[0], g_reach[0], N, &df);
    fprintf(stderr, "negative control (residual replaced by p): chi2 %.1f, critical %.1f (df %d)\n", x, chi2_crit(df),
            df);
    CHECK(x > chi2_crit(df));
    gen_release(&g);
    pool_destroy(tp);
    model_free(m);
    return test_finish();
}
