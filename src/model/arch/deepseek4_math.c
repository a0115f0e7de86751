/* deepseek4_math.c - the pure numeric pieces of the DeepSeek V4 forward
 * pass (deepseek4_math.h): mHC split with Sinkhorn, the compressor's
 * softmax pooling, the indexer's top-k, attention with a sink, rotation of
 * the rope tail. Float accumulation; no allocation. */
#include "model/arch/deepseek4_math.h"

#include <math.h>

#include "tensor/kernels.h"

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

void ds4_hc_split(const float *mixes, const float *scale, const float *base, int n, int iters, float eps, float *pre,
                  float *post, float *comb) {
    for (int i = 0; i < n; i++) {
        pre[i] = sigmoidf(mixes[i] * scale[0] + base[i]) + eps;
        post[i] = 2.0f * sigmoidf(mixes[n + i] * scale[1] + base[n + i]);
    }
    const float *cm = mixes + 2 * n, *cb = base + 2 * n;
    for (int s = 0; s < n; s++) { /* softmax over dst */
        float *row = comb + s * n, mx = -INFINITY, sum = 0;
        for (int d = 0; d < n; d++) {
            row[d] = cm[s * n + d] * scale[2] + cb[s * n + d];
            mx = fmaxf(mx, row[d]);
        }
        for (int d = 0; d < n; d++) sum += row[d] = expf(row[d] - mx);
        for (int d = 0; d < n; d++) row[d] = row[d] / sum + eps;
    }
    for (int it = 0; it < iters; it++) {
        if (it > 0)
            for (int s = 0; s < n; s++) {
                float sum = 0;
                for (int d = 0; d < n; d++) sum += comb[s * n + d];
                for (int d = 0; d < n; d++) comb[s * n + d] /= sum + eps;
            }
        for (int d = 0; d < n; d++) {
            float sum = 0;
            for (int s = 0; s < n; s++) sum += comb[s * n + d];
            for (int s = 0; s < n; s++) comb[s * n + d] /= sum + eps;
        }
    }
}

void ds4_softmax_pool(const float *const *kv, const float *const *score, int n, int w, float *out) {
    for (int d = 0; d < w; d++) {
        float mx = -INFINITY, sum = 0, acc = 0;
        for (int e = 0; e < n; e++) mx = fmaxf(mx, score[e][d]);
        for (int e = 0; e < n; e++) {
            float p = expf(score[e][d] - mx);
            sum += p;
            acc += p * kv[e][d];
        }
        out[d] = acc / sum;
    }
}

/* a ranks before b: higher score, or equal score and lower index. */
static int ranks_before(const float *score, int32_t a, int32_t b) {
    return score[a] > score[b] || (score[a] == score[b] && a < b);
}

/* Moves idx[at] down the heap idx[0..n) whose root ranks last. */
static void sift_down(const float *score, int32_t *idx, int n, int at) {
    for (;;) {
        int worst = at, l = 2 * at + 1, r = l + 1;
        if (l < n && ranks_before(score, idx[worst], idx[l])) worst = l;
        if (r < n && ranks_before(score, idx[worst], idx[r])) worst = r;
        if (worst == at) return;
        int32_t t = idx[at];
        idx[at] = idx[worst], idx[worst] = t;
        at = worst;
    }
}

/* A heap of the k best so far (root: the one ranking last), then heapsort:
 * O(n log k). ranks_before is a strict total order (indices differ), so the
 * set and its order are those of a stable sort by (score desc, index asc). */
int ds4_topk(const float *score, int n, int k, int32_t *idx) {
    if (k > n) k = n;
    if (k <= 0) return 0;
    for (int32_t j = 0; j < k; j++) idx[j] = j;
    for (int at = k / 2 - 1; at >= 0; at--) sift_down(score, idx, k, at);
    for (int32_t j = k; j < n; j++)
        if (ranks_before(score, j, idx[0])) {
            idx[0] = j;
            sift_down(score, idx, k, 0);
        }
    for (int end = k - 1; end > 0; end--) { /* the worst goes last */
        int32_t t = idx[0];
        idx[0] = idx[end], idx[end] = t;
        sift_down(score, idx, end, 0);
    }
    return k;
}

void ds4_attend_sink(const float *q, const float *const *keys, int n, int d, float scale, float sink, float *s,
                     float *out) {
    ds4_attend_sink_heads(q, 1, keys, n, d, scale, &sink, s, out);
}

/* All heads against each key at once (kern_dot_rows_f32 / kern_axpy_rows_f32:
 * register tiles, keys read in place); per (head, element) the sums run in
 * the same order as one head at a time, bit for bit. */
void ds4_attend_sink_heads(const float *q, int h, const float *const *keys, int n, int d, float scale,
                           const float *sinks, float *s, float *out) {
    float *mx = s + (int64_t)h * n, *sum = mx + h;
    kern_dot_rows_f32(q, d, h, keys, n, d, s, n);
    for (int i = 0; i < h; i++) {
        float *si = s + (int64_t)i * n;
        mx[i] = -INFINITY, sum[i] = 0;
        for (int j = 0; j < n; j++) mx[i] = fmaxf(mx[i], si[j] = scale * si[j]);
        for (int j = 0; j < n; j++) sum[i] += si[j] = expf(si[j] - mx[i]);
        sum[i] += expf(sinks[i] - mx[i]);
        for (int j = 0; j < n; j++) si[j] = si[j] / sum[i];
    }
    for (int64_t e = 0; e < (int64_t)h * d; e++) out[e] = 0;
    kern_axpy_rows_f32(s, n, h, keys, n, d, out, d);
}

void ds4_rope_tail(float *x, int d, int r, const float *cs, int inverse) {
    float *t = x + d - r;
    for (int i = 0; i < r / 2; i++) {
        float c = cs[2 * i], s = inverse ? -cs[2 * i + 1] : cs[2 * i + 1];
        float a = t[2 * i], b = t[2 * i + 1];
        t[2 * i] = a * c - b * s;
        t[2 * i + 1] = a * s + b * c;
    }
}
