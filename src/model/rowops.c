/* rowops.c - see rowops.h. */
#include "model/rowops.h"

#include <math.h>
#include <string.h>

#include "tensor/vecmath.h"

static float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

void rope_fill_table(const model_hparams *hp, const float *freq_factors, float attn_factor, const int32_t *pos,
                     int32_t n, float *cs_out) {
    int nd = hp->rope_dim, half = nd / 2;
    float theta_scale = powf(hp->rope_base, -2.0f / (float)nd);
    float freq_scale = hp->rope_scaling == ROPE_SCALING_NONE ? 1.0f : 1.0f / hp->rope_factor;
    float ext = hp->rope_scaling == ROPE_SCALING_YARN ? hp->yarn_ext_factor : 0.0f;
    float mscale = attn_factor;
    float corr0 = 0, corr1 = 0;
    if (ext != 0.0f) {
        corr0 = fmaxf(0.0f, floorf(yarn_corr_dim(nd, hp->rope_orig_ctx, hp->yarn_beta_fast, hp->rope_base)));
        corr1 = fminf((float)(nd - 1), ceilf(yarn_corr_dim(nd, hp->rope_orig_ctx, hp->yarn_beta_slow, hp->rope_base)));
        mscale *= 1.0f + 0.1f * logf(1.0f / freq_scale);
    }
    for (int32_t t = 0; t < n; t++) {
        float *cs = cs_out + (int64_t)t * nd;
        float theta_base = (float)pos[t];
        for (int i = 0; i < half; i++) {
            float theta_extrap = theta_base;
            if (freq_factors) theta_extrap /= freq_factors[i];
            float theta_interp = freq_scale * theta_extrap, theta = theta_interp;
            if (ext != 0.0f) {
                float y = ((float)i - corr0) / fmaxf(0.001f, corr1 - corr0);
                float ramp = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * ext;
                theta = theta_interp * (1.0f - ramp) + theta_extrap * ramp;
            }
            cs[2 * i] = cosf(theta) * mscale;
            cs[2 * i + 1] = sinf(theta) * mscale;
            theta_base *= theta_scale;
        }
    }
}

void rows_rope(const float *cs_all, int rope_dim, rope_mode mode, float *x, int32_t n, int heads, int64_t tstride,
               int64_t hstride, int64_t off) {
    int half = rope_dim / 2;
    bool neox = mode == ROPE_NEOX;
    for (int32_t t = 0; t < n; t++) {
        const float *cs = cs_all + (int64_t)t * rope_dim;
        for (int h = 0; h < heads; h++) {
            float *v = x + (int64_t)t * tstride + (int64_t)h * hstride + off;
            for (int i = 0; i < half; i++) {
                int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
                float a = v[i0], bb = v[i1], co = cs[2 * i], si = cs[2 * i + 1];
                v[i0] = a * co - bb * si;
                v[i1] = a * si + bb * co;
            }
        }
    }
}

/* ---- row jobs, split over the pool when large ---- */

typedef struct rows_job {
    int32_t n;
    int64_t width, src_stride, dst_stride;
    const float *src, *src2, *w;
    float *dst;
    float eps;
    void (*fn)(const struct rows_job *j, int32_t r);
} rows_job;

static void rows_task(void *ctx, int ith, int nth) {
    const rows_job *j = ctx;
    long long b, e;
    pool_split(j->n, ith, nth, &b, &e);
    for (long long r = b; r < e; r++) j->fn(j, (int32_t)r);
}

static void rows_run(thread_pool *pool, rows_job *j) {
    if ((int64_t)j->n * j->width < ROWS_SERIAL_MAX) rows_task(j, 0, 1);
    else pool_run(pool, rows_task, j);
}

static void rmsnorm_row(const rows_job *j, int32_t r) {
    const float *x = j->src + (int64_t)r * j->src_stride;
    float *y = j->dst + (int64_t)r * j->dst_stride;
    double ss = 0.0;
    for (int64_t i = 0; i < j->width; i++) ss += (double)x[i] * x[i];
    float scale = 1.0f / sqrtf((float)(ss / (double)j->width) + j->eps);
    if (!j->w)
        for (int64_t i = 0; i < j->width; i++) y[i] = x[i] * scale;
    else
        for (int64_t i = 0; i < j->width; i++) y[i] = x[i] * scale * j->w[i];
}

void rows_rmsnorm(thread_pool *pool, float eps, const float *src, int64_t src_stride, const float *w, float *dst,
                  int64_t dst_stride, int32_t n, int64_t width) {
    rows_job j = {.n = n,
                  .width = width,
                  .src_stride = src_stride,
                  .dst_stride = dst_stride,
                  .src = src,
                  .w = w,
                  .dst = dst,
                  .eps = eps,
                  .fn = rmsnorm_row};
    rows_run(pool, &j);
}

static void silu_mul_row(const rows_job *j, int32_t r) {
    kern_silu_mul(j->dst + (int64_t)r * j->width, j->src + (int64_t)r * j->width, j->width);
}

void rows_silu_mul(thread_pool *pool, float *g, const float *u, int32_t n, int64_t width) {
    rows_job j = {.n = n, .width = width, .src = u, .dst = g, .fn = silu_mul_row};
    rows_run(pool, &j);
}

static void gelu_mul_row(const rows_job *j, int32_t r) {
    float *g = j->dst + (int64_t)r * j->width;
    const float *u = j->src + (int64_t)r * j->width;
    const float c = 0.7978845608028654f; /* sqrt(2 / pi) */
    for (int64_t i = 0; i < j->width; i++) {
        float x = g[i];
        g[i] = 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x))) * u[i];
    }
}

void rows_gelu_mul(thread_pool *pool, float *g, const float *u, int32_t n, int64_t width) {
    rows_job j = {.n = n, .width = width, .src = u, .dst = g, .fn = gelu_mul_row};
    rows_run(pool, &j);
}

static void swiglu_stacked_row(const rows_job *j, int32_t r) {
    float *g = j->dst + (int64_t)r * j->width;
    const float *gu = j->src + (int64_t)r * 2 * j->width;
    memcpy(g, gu, (size_t)j->width * sizeof(float));
    kern_silu_mul(g, gu + j->width, j->width);
}

void rows_swiglu_stacked(thread_pool *pool, float *dst, const float *gu, int32_t n, int64_t width) {
    rows_job j = {.n = n, .width = width, .src = gu, .dst = dst, .fn = swiglu_stacked_row};
    rows_run(pool, &j);
}

static void add_row(const rows_job *j, int32_t r) {
    float *y = j->dst + (int64_t)r * j->width;
    const float *a = j->src + (int64_t)r * j->width;
    if (j->src2) {
        const float *b = j->src2 + (int64_t)r * j->width;
        for (int64_t i = 0; i < j->width; i++) y[i] += a[i] + b[i];
    } else {
        for (int64_t i = 0; i < j->width; i++) y[i] += a[i];
    }
}

void rows_add(thread_pool *pool, float *dst, const float *a, const float *b, int32_t n, int64_t width) {
    rows_job j = {.n = n, .width = width, .src = a, .src2 = b, .dst = dst, .fn = add_row};
    rows_run(pool, &j);
}

void rows_add_bias(float *y, const float *bias, int32_t n, int64_t width) {
    if (!bias) return;
    for (int32_t r = 0; r < n; r++)
        for (int64_t i = 0; i < width; i++) y[(int64_t)r * width + i] += bias[i];
}
