/* attention_impl.h - the body of kern_attention, included by
 * attention_scalar.c / attention_avx2.c / attention_avx512.c, each of which
 * defines ATTN_FN (the function name) and is compiled with its ISA's flags.
 * Dots and axpys use 16-wide GCC vector types that the compiler maps to the
 * ISA at hand; tails are scalar. Not a public header. */
#include <math.h>
#include <string.h>

#include "tensor/attention.h"

typedef float attn_v16 __attribute__((vector_size(64), aligned(4)));

static inline float attn_dot(const float *a, const float *b, int n) {
    attn_v16 acc = {0};
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        attn_v16 x, y;
        memcpy(&x, a + i, sizeof x);
        memcpy(&y, b + i, sizeof y);
        acc += x * y;
    }
    float s = 0.0f;
    for (int l = 0; l < 16; l++) s += acc[l];
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static inline void attn_axpy(float w, const float *x, float *y, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        attn_v16 xv, yv;
        memcpy(&xv, x + i, sizeof xv);
        memcpy(&yv, y + i, sizeof yv);
        yv += w * xv;
        memcpy(y + i, &yv, sizeof yv);
    }
    for (; i < n; i++) y[i] += w * x[i];
}

void ATTN_FN(const attn_args *a) {
    const int hd = a->head_dim, bt = a->block_tokens;
    const int n = a->j_end - a->j_begin;
    for (int h = 0; h < a->n_q; h++) {
        const float *q = a->q + (int64_t)h * hd;
        float *s = a->scores + (int64_t)h * a->j_end;
        float mx = -INFINITY;
        for (int j = a->j_begin; j < a->j_end; j++) {
            const float *k = a->blocks[j / bt] + a->k_off + (int64_t)(j % bt) * a->row_stride;
            float v = attn_dot(q, k, hd) * a->scale;
            if (a->softcap > 0.0f) v = a->softcap * tanhf(v / a->softcap);
            s[j] = v;
            if (v > mx) mx = v;
        }
        float sum = 0.0f;
        for (int j = a->j_begin; j < a->j_end; j++) {
            s[j] = expf(s[j] - mx);
            sum += s[j];
        }
        float inv = n > 0 ? 1.0f / sum : 0.0f;
        float *o = a->out + (int64_t)h * hd;
        memset(o, 0, sizeof(float) * (size_t)hd);
        for (int j = a->j_begin; j < a->j_end; j++) {
            const float *v = a->blocks[j / bt] + a->v_off + (int64_t)(j % bt) * a->row_stride;
            attn_axpy(s[j] * inv, v, o, hd);
        }
    }
}
