/* spec_sched.h - confidence-scheduled verification (DSpark's hardware-aware
 * prefix scheduler, arXiv 2607.05147 Algorithm 1): which of the drafted
 * tokens of a step to verify, given each draft's confidence and what a
 * forward pass of B tokens costs.
 *
 * Request r's draft j has confidence c_{r,j} in (0, 1], the chance it is
 * accepted given that drafts < j were (a drafter-side estimate that must not
 * depend on draft j itself, so truncating stays lossless); its prefix
 * survival is a_{r,j} = c_{r,0} ... c_{r,j}, non-increasing in j. Verifying
 * B tokens yields tau = (sampling items) + sum of admitted a_{r,j} expected
 * tokens in t0 + t1 * B seconds. Candidates are admitted in decreasing
 * a_{r,j} (ties: lower j first, so prefixes stay prefixes) while the
 * expected throughput tau / (t0 + t1 * B) grows; the first candidate that
 * does not improve it ends the search (the paper's early stop, which keeps
 * every admission independent of later drafts).
 *
 * The cost line comes from the engine's own forward passes (spec_cost_fit:
 * an exponentially weighted least-squares fit of step time against batch
 * tokens), so it follows the machine it runs on; with too little data or a
 * flat line (memory-bound decode: drafts ride on the weight reads) every
 * draft is admitted. Pure functions over caller-owned arrays; no
 * allocation. */
#ifndef CINFER_ENGINE_SPEC_SCHED_H
#define CINFER_ENGINE_SPEC_SCHED_H

#include <stdbool.h>
#include <stdint.h>

/* Step time ~ t0 + t1 * tokens, fitted online. */
typedef struct spec_cost_fit {
    double w, sx, sy, sxx, sxy; /* decayed sums */
    int64_t n; /* steps seen */
} spec_cost_fit;

void spec_cost_add(spec_cost_fit *f, double tokens, double seconds);
/* The fitted line; false (and t0 = 1, t1 = 0: cost independent of tokens) before there is a usable fit. */
bool spec_cost_line(const spec_cost_fit *f, double *t0, double *t1);

/* The DSpark block cut under load: a block is drafted while its prefix survival stays at or above
 * 1 - SPEC_CONF_KEEP^n_decoding (0.1 with one decoding request, 0.19 with two, 0.34 with four): alone, a
 * long shot is nearly free to verify (a memory-bound decode pays for the weight reads, not the rows); with
 * more requests in the step each verify row adds compute, so only likelier drafts are kept. Non-decreasing
 * in n_decoding, at most SPEC_CONF_MAX_THR (a near-certain draft is always worth a row). */
#define SPEC_CONF_MAX_THR 0.99
#define SPEC_CONF_KEEP 0.9
float spec_conf_threshold(int32_t n_decoding);

/* One candidate draft: request slot r, draft index j, prefix survival a. */
typedef struct spec_cand {
    int32_t r, j;
    float a;
} spec_cand;

/* conf[r * stride + j] for j < n_draft[r]: confidences; keep[r] (out): drafts to verify for each of the
 * n_req requests. base_tokens: the step's tokens without drafts; base_tau: tokens it commits without them.
 * cand: scratch of at least sum(n_draft) entries. Returns the drafts admitted in all. */
int32_t spec_sched_pick(const float *conf, int32_t stride, const int32_t *n_draft, int32_t n_req, double base_tokens,
                        double base_tau, double t0, double t1, spec_cand *cand, int32_t *keep);

#endif
