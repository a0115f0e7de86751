/* spec_sched.c - confidence-scheduled verification and the step-cost fit
 * (spec_sched.h). */
#include "engine/spec_sched.h"

#include <math.h>
#include <stdlib.h>

#define SPEC_COST_DECAY 0.98 /* per step: about the last 50 steps count */
#define SPEC_COST_MIN_STEPS 16

void spec_cost_add(spec_cost_fit *f, double tokens, double seconds) {
    if (!(seconds > 0) || !(tokens > 0)) return;
    f->w = f->w * SPEC_COST_DECAY + 1.0;
    f->sx = f->sx * SPEC_COST_DECAY + tokens;
    f->sy = f->sy * SPEC_COST_DECAY + seconds;
    f->sxx = f->sxx * SPEC_COST_DECAY + tokens * tokens;
    f->sxy = f->sxy * SPEC_COST_DECAY + tokens * seconds;
    f->n++;
}

float spec_conf_threshold(int32_t n_decoding) {
    if (n_decoding < 1) n_decoding = 1;
    double t = 1.0 - pow(SPEC_CONF_KEEP, (double)n_decoding);
    return (float)(t < SPEC_CONF_MAX_THR ? t : SPEC_CONF_MAX_THR);
}

bool spec_cost_line(const spec_cost_fit *f, double *t0, double *t1) {
    *t0 = 1.0;
    *t1 = 0.0;
    if (f->n < SPEC_COST_MIN_STEPS || f->w <= 0) return false;
    double mx = f->sx / f->w, my = f->sy / f->w, vx = f->sxx / f->w - mx * mx;
    if (vx <= 1e-9 * (mx * mx + 1.0)) return false; /* every step had the same size: no slope to fit */
    double slope = (f->sxy / f->w - mx * my) / vx, icpt = my - slope * mx;
    if (slope <= 0 || icpt <= 0) return false; /* flat (or noise): drafts cost nothing measurable */
    *t0 = icpt;
    *t1 = slope;
    return true;
}

static int cand_cmp(const void *pa, const void *pb) {
    const spec_cand *a = pa, *b = pb;
    if (a->a != b->a) return a->a > b->a ? -1 : 1;
    if (a->j != b->j) return a->j < b->j ? -1 : 1;
    return a->r < b->r ? -1 : a->r > b->r;
}

int32_t spec_sched_pick(const float *conf, int32_t stride, const int32_t *n_draft, int32_t n_req, double base_tokens,
                        double base_tau, double t0, double t1, spec_cand *cand, int32_t *keep) {
    int32_t n = 0;
    for (int32_t r = 0; r < n_req; r++) {
        keep[r] = 0;
        float a = 1.0f;
        for (int32_t j = 0; j < n_draft[r]; j++) {
            float c = conf[(int64_t)r * stride + j];
            a *= c > 0 ? (c < 1 ? c : 1) : 0;
            cand[n++] = (spec_cand){.r = r, .j = j, .a = a};
        }
    }
    qsort(cand, (size_t)n, sizeof *cand, cand_cmp);
    double tokens = base_tokens, tau = base_tau, best = tau / (t0 + t1 * tokens);
    int32_t admitted = 0;
    for (int32_t i = 0; i < n && cand[i].a > 0; i++) {
        tokens += 1;
        tau += cand[i].a;
        double th = tau / (t0 + t1 * tokens);
        if (!(th > best)) break; /* early stop: later candidates never decide earlier ones */
        best = th;
        if (cand[i].j + 1 > keep[cand[i].r]) keep[cand[i].r] = cand[i].j + 1;
        admitted++;
    }
    return admitted;
}
