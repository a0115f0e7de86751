/* test_ds4_math.c - the numeric pieces of the deepseek4 forward pass
 * (src/model/arch/deepseek4_math.c) against float64 references written here
 * from DeepSeek's inference/model.py and kernel.py: the mHC split with
 * Sinkhorn (pre/post gates, a doubly stochastic comb), the compressor's
 * softmax pooling (overlapping entries included), the indexer's top-k with
 * ties (lower index first), attention with a sink in the denominator, and
 * the inverse rope of the output's tail (rotating forth and back is the
 * identity; the tail only). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch/deepseek4_math.h"
#include "testutil.h"

static uint64_t rs = 88172645463325252ull;
static double urand(void) { /* xorshift64 in [-1, 1) */
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (double)(rs >> 11) * 0x1p-52 - 1.0;
}

static void ref_hc_split(const double *mixes, const double *scale, const double *base, int n, int iters, double eps,
                         double *pre, double *post, double *comb) {
    for (int i = 0; i < n; i++) {
        pre[i] = 1.0 / (1.0 + exp(-(mixes[i] * scale[0] + base[i]))) + eps;
        post[i] = 2.0 / (1.0 + exp(-(mixes[n + i] * scale[1] + base[n + i])));
    }
    for (int s = 0; s < n; s++) {
        double mx = -INFINITY, sum = 0;
        for (int d = 0; d < n; d++) {
            comb[s * n + d] = mixes[2 * n + s * n + d] * scale[2] + base[2 * n + s * n + d];
            if (comb[s * n + d] > mx) mx = comb[s * n + d];
        }
        for (int d = 0; d < n; d++) sum += comb[s * n + d] = exp(comb[s * n + d] - mx);
        for (int d = 0; d < n; d++) comb[s * n + d] = comb[s * n + d] / sum + eps;
    }
    for (int it = 0; it < iters; it++) {
        for (int s = 0; it > 0 && s < n; s++) {
            double sum = 0;
            for (int d = 0; d < n; d++) sum += comb[s * n + d];
            for (int d = 0; d < n; d++) comb[s * n + d] /= sum + eps;
        }
        for (int d = 0; d < n; d++) {
            double sum = 0;
            for (int s = 0; s < n; s++) sum += comb[s * n + d];
            for (int s = 0; s < n; s++) comb[s * n + d] /= sum + eps;
        }
    }
}

static void test_sinkhorn(void) {
    const int n = 4, M = (2 + n) * n;
    for (int trial = 0; trial < 20; trial++) {
        float mf[24], sf[3], bf[24], pre[4], post[4], comb[16];
        double md[24], sd[3], bd[24], rpre[4], rpost[4], rcomb[16];
        for (int i = 0; i < M; i++) md[i] = mf[i] = (float)(3 * urand()), bd[i] = bf[i] = (float)urand();
        for (int i = 0; i < 3; i++) sd[i] = sf[i] = (float)(2 * urand());
        int iters = trial < 10 ? 20 : 1 + trial;
        ds4_hc_split(mf, sf, bf, n, iters, 1e-6f, pre, post, comb);
        ref_hc_split(md, sd, bd, n, iters, 1e-6, rpre, rpost, rcomb);
        double worst = 0;
        for (int i = 0; i < n; i++) worst = fmax(worst, fmax(fabs(pre[i] - rpre[i]), fabs(post[i] - rpost[i])));
        for (int i = 0; i < n * n; i++) worst = fmax(worst, fabs(comb[i] - rcomb[i]));
        CHECKF(worst < 1e-5, "trial %d: hc split differs by %g", trial, worst);
        if (iters == 20) { /* columns exact (normalized last), rows close after 20 rounds */
            for (int k = 0; k < n; k++) {
                double rsum = 0, csum = 0;
                for (int j = 0; j < n; j++) rsum += comb[k * n + j], csum += comb[j * n + k];
                CHECKF(fabs(csum - 1) < 1e-4 && fabs(rsum - 1) < 0.05, "trial %d: row %g col %g", trial, rsum, csum);
            }
        }
    }
}

static void test_softmax_pool(void) {
    enum { W = 37, N = 8 };
    float kvs[N][W], scs[N][W], out[W];
    const float *kv[N], *sc[N];
    for (int e = 0; e < N; e++) {
        for (int d = 0; d < W; d++) kvs[e][d] = (float)urand(), scs[e][d] = (float)(5 * urand());
        kv[e] = kvs[e], sc[e] = scs[e];
    }
    scs[0][3] = -INFINITY; /* a masked entry, as the first group's missing predecessor */
    for (int n = 1; n <= N; n++) {
        ds4_softmax_pool(kv, sc, n, W, out);
        for (int d = 0; d < W; d++) {
            double mx = -INFINITY, sum = 0, acc = 0;
            for (int e = 0; e < n; e++) mx = fmax(mx, scs[e][d]);
            if (mx == -INFINITY) continue;
            for (int e = 0; e < n; e++) sum += exp(scs[e][d] - mx), acc += exp(scs[e][d] - mx) * kvs[e][d];
            CHECKF(fabs(out[d] - acc / sum) < 1e-6, "pool n=%d d=%d: %g vs %g", n, d, out[d], acc / sum);
        }
    }
}

static void test_topk(void) {
    const float s[] = {0.5f, 0.0f, 0.9f, 0.0f, -1.0f, 0.9f, 0.0f, 0.2f};
    int32_t idx[8];
    CHECK(ds4_topk(s, 8, 3, idx) == 3 && idx[0] == 2 && idx[1] == 5 && idx[2] == 0);
    /* ties at the boundary: the lower indices of the zeros */
    CHECK(ds4_topk(s, 8, 6, idx) == 6 && idx[3] == 7 && idx[4] == 1 && idx[5] == 3);
    CHECK(ds4_topk(s, 8, 20, idx) == 8 && idx[7] == 4);
    CHECK(ds4_topk(s, 0, 4, idx) == 0);
    /* random: against a stable sort by (score desc, index asc) */
    for (int trial = 0; trial < 50; trial++) {
        float r[64];
        int32_t got[64], want[64];
        int n = 1 + trial, k = 1 + trial % 17;
        for (int i = 0; i < n; i++) r[i] = (float)((int)(4 * urand())) * 0.25f; /* many ties */
        for (int i = 0; i < n; i++) want[i] = i;
        for (int i = 1; i < n; i++) /* insertion sort: stable */
            for (int j = i; j > 0 && r[want[j]] > r[want[j - 1]]; j--) {
                int32_t t = want[j];
                want[j] = want[j - 1], want[j - 1] = t;
            }
        int kk = ds4_topk(r, n, k, got);
        CHECK(kk == (k < n ? k : n));
        CHECKF(!memcmp(got, want, sizeof(int32_t) * (size_t)kk), "top-%d of %d differs", k, n);
    }
}

static void test_sink(void) {
    enum { D = 24, N = 9 };
    float q[D], keys[N][D], s[N + 2], out[D];
    const float *kp[N];
    for (int i = 0; i < D; i++) q[i] = (float)urand();
    for (int j = 0; j < N; j++) {
        for (int i = 0; i < D; i++) keys[j][i] = (float)urand();
        kp[j] = keys[j];
    }
    const float sinks[] = {-30.0f, 0.0f, 1.5f, 8.0f};
    for (int t = 0; t < 4; t++) {
        ds4_attend_sink(q, kp, N, D, 0.3f, sinks[t], s, out);
        double sc[N], mx = -INFINITY, den = 0;
        for (int j = 0; j < N; j++) {
            sc[j] = 0;
            for (int i = 0; i < D; i++) sc[j] += (double)q[i] * keys[j][i];
            sc[j] *= 0.3;
            mx = fmax(mx, sc[j]);
        }
        for (int j = 0; j < N; j++) den += exp(sc[j] - mx);
        den += exp(sinks[t] - mx);
        for (int i = 0; i < D; i++) {
            double o = 0;
            for (int j = 0; j < N; j++) o += exp(sc[j] - mx) / den * keys[j][i];
            CHECKF(fabs(out[i] - o) < 1e-6, "sink %g dim %d: %g vs %g", sinks[t], i, out[i], o);
        }
    }
}

/* All heads at once (keys outer) give each head's single-head result, bit for bit. */
static void test_sink_heads(void) {
    enum { D = 40, N = 11, H = 4 };
    float q[H * D], keys[N][D], s[H * (N + 2)], out[H * D], one[D];
    const float *kp[N];
    const float sinks[H] = {-3.0f, 0.0f, 0.7f, 5.0f};
    for (int i = 0; i < H * D; i++) q[i] = (float)urand();
    for (int j = 0; j < N; j++) {
        for (int i = 0; i < D; i++) keys[j][i] = (float)urand();
        kp[j] = keys[j];
    }
    ds4_attend_sink_heads(q, H, kp, N, D, 0.2f, sinks, s, out);
    for (int h = 0; h < H; h++) {
        ds4_attend_sink(q + h * D, kp, N, D, 0.2f, sinks[h], s, one);
        for (int i = 0; i < D; i++) CHECKF(out[h * D + i] == one[i], "head %d dim %d", h, i);
    }
}

static void test_inverse_rope(void) {
    enum { D = 32, R = 8 };
    float x[D], y[D], cs[R];
    for (int i = 0; i < D; i++) x[i] = y[i] = (float)urand();
    double ang[R / 2];
    for (int i = 0; i < R / 2; i++)
        ang[i] = 7.0 * pow(10000.0, -2.0 * i / R), cs[2 * i] = (float)cos(ang[i]), cs[2 * i + 1] = (float)sin(ang[i]);
    ds4_rope_tail(y, D, R, cs, 0);
    for (int i = 0; i < D - R; i++) CHECK(y[i] == x[i]); /* nope dims untouched */
    for (int i = 0; i < R / 2; i++) { /* forward: the interleaved pair rotated by +angle */
        double a = x[D - R + 2 * i], b = x[D - R + 2 * i + 1];
        CHECK(fabs(y[D - R + 2 * i] - (a * cos(ang[i]) - b * sin(ang[i]))) < 1e-6);
        CHECK(fabs(y[D - R + 2 * i + 1] - (a * sin(ang[i]) + b * cos(ang[i]))) < 1e-6);
    }
    ds4_rope_tail(y, D, R, cs, 1);
    for (int i = 0; i < D; i++) CHECKF(fabs(y[i] - x[i]) < 1e-6, "inverse rope dim %d: %g vs %g", i, y[i], x[i]);
}

int main(void) {
    test_sinkhorn();
    test_softmax_pool();
    test_topk();
    test_sink();
    test_sink_heads();
    test_inverse_rope();
    return test_finish();
}
