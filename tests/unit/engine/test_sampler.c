/* test_sampler.c - sampler semantics: greedy ties, seeded reproducibility,
 * top-k / top-p / min-p support sets, penalties and logit bias, and that
 * sampled frequencies follow the softmax (chi-square-style bound). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampler.h"
#include "testutil.h"

#define V 64

static void fill(float *l) {
    for (int i = 0; i < V; i++) l[i] = (float)(i % 7) * 0.5f - (float)i * 0.01f;
}

static int sample_once(sampler_params p, const float *base) {
    float l[V];
    memcpy(l, base, sizeof l);
    sampler *s = sampler_create(&p, V);
    int t = sampler_sample(s, l);
    sampler_free(s);
    return t;
}

int main(void) {
    float base[V];
    fill(base);
    sampler_params p = sampler_default_params();

    /* greedy: argmax, ties to the lowest id */
    p.temperature = 0;
    float tie[V] = {0};
    tie[5] = tie[9] = 3.0f;
    CHECK(sample_once(p, tie) == 5);
    CHECK(sample_once(p, base) == 6);

    /* logit bias moves greedy */
    logit_bias lb = {40, 100.0f};
    p.bias = &lb;
    p.n_bias = 1;
    CHECK(sample_once(p, base) == 40);
    p.bias = NULL;
    p.n_bias = 0;

    /* same seed, same sequence; different seed, (very likely) different sequence */
    p = sampler_default_params();
    p.seed = 42;
    int seq1[50], seq2[50], seq3[50];
    for (int r = 0; r < 3; r++) {
        p.seed = r == 2 ? 43 : 42;
        sampler *s = sampler_create(&p, V);
        for (int i = 0; i < 50; i++) {
            float l[V];
            memcpy(l, base, sizeof l);
            int t = sampler_sample(s, l);
            (r == 0 ? seq1 : r == 1 ? seq2 : seq3)[i] = t;
        }
        sampler_free(s);
    }
    CHECK(memcmp(seq1, seq2, sizeof seq1) == 0);
    CHECK(memcmp(seq1, seq3, sizeof seq1) != 0);

    /* top-k = 3: only the 3 best logits ever come out */
    p = sampler_default_params();
    p.top_k = 3;
    p.temperature = 5.0f; /* flatten so that all candidates get drawn */
    int seen[V] = {0};
    sampler *s = sampler_create(&p, V);
    for (int i = 0; i < 2000; i++) {
        float l[V];
        memcpy(l, base, sizeof l);
        seen[sampler_sample(s, l)]++;
    }
    sampler_free(s);
    /* best three: ids 6 (3.0-0.06), 13 (3.0-0.13), 20 (3.0-0.20) */
    int outside = 0;
    for (int i = 0; i < V; i++)
        if (i != 6 && i != 13 && i != 20) outside += seen[i];
    CHECK(outside == 0);
    CHECK(seen[6] > 0 && seen[13] > 0 && seen[20] > 0);

    /* top-p: with one dominant token (p=0.9 of mass) and top_p 0.5, always that token */
    float dom[V];
    for (int i = 0; i < V; i++) dom[i] = 0.0f;
    dom[17] = 10.0f;
    p = sampler_default_params();
    p.top_p = 0.5f;
    for (int i = 0; i < 20; i++) {
        p.seed = (uint64_t)i;
        CHECK(sample_once(p, dom) == 17);
    }
    /* min-p 0.5 on logits {0, log(0.6), log(0.4), ...}: only ids with prob >= 0.5*pmax */
    float mp[V];
    for (int i = 0; i < V; i++) mp[i] = -10.0f;
    mp[0] = 0.0f;
    mp[1] = logf(0.6f);
    mp[2] = logf(0.4f);
    p = sampler_default_params();
    p.min_p = 0.5f;
    memset(seen, 0, sizeof seen);
    s = sampler_create(&p, V);
    for (int i = 0; i < 3000; i++) {
        float l[V];
        memcpy(l, mp, sizeof l);
        seen[sampler_sample(s, l)]++;
    }
    sampler_free(s);
    CHECK(seen[0] > 0 && seen[1] > 0 && seen[2] == 0);
    int rest = 0;
    for (int i = 3; i < V; i++) rest += seen[i];
    CHECK(rest == 0);
    /* frequencies follow softmax: p(0) = 1/1.6 = 0.625 */
    double f0 = seen[0] / 3000.0;
    CHECKF(fabs(f0 - 0.625) < 0.04, "f0 = %f", f0);

    /* penalties: a repeated token loses greedy to the runner-up */
    p = sampler_default_params();
    p.temperature = 0;
    p.frequency_penalty = 0.2f;
    s = sampler_create(&p, V);
    float l[V];
    memcpy(l, base, sizeof l);
    CHECK(sampler_sample(s, l) == 6);
    sampler_accept(s, 6);
    memcpy(l, base, sizeof l);
    CHECK(sampler_sample(s, l) == 13);
    sampler_free(s);

    p = sampler_default_params();
    p.temperature = 0;
    p.repetition_penalty = 1.5f;
    s = sampler_create(&p, V);
    sampler_accept(s, 6);
    memcpy(l, base, sizeof l);
    CHECK(sampler_sample(s, l) == 13);
    CHECK(fabsf(l[6] - (3.0f - 0.06f) / 1.5f) < 1e-6f);
    sampler_free(s);

    p = sampler_default_params();
    p.temperature = 0;
    p.presence_penalty = 1.0f;
    s = sampler_create(&p, V);
    sampler_accept(s, 6);
    sampler_accept(s, 6);
    memcpy(l, base, sizeof l);
    sampler_sample(s, l);
    CHECK(fabsf(l[6] - (3.0f - 0.06f - 1.0f)) < 1e-6f);
    sampler_free(s);
    return test_finish();
}
