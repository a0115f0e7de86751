/* rope.c - see rope.h. */
#include "model/rope.h"

#include <math.h>

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
