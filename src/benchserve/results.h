/* results.h - a run's results as JSON (the file `bench serve --out` writes
 * and `bench report` reads) and as a printed table.
 *
 * Layout: {"cinfer_bench_serve": 1, "config": {...caller's...},
 *   "summary": {duration_s, requests_*, errors{kind: n}, token totals and
 *     rates (input = cached + replayed + computed), cache_hit_ratio, ttft_ms / tpot_ms /
 *     itl_ms / e2e_ms / send_lag_ms {n, mean, p50, p90, p99}},
 *   "requests": [{session, turn, trace_line, planned_s, sent_s, ttft_s|null,
 *     end_s, e2e_s, prompt_tokens, cached_tokens, replayed_tokens, output_tokens, max_tokens,
 *     token_events, error, http_status}]}
 * Token totals are the sums of the usage fields of every response that sent
 * usage. Times are seconds from the run's start. Callers: cmd_bench_serve.c,
 * report.c (reads the same keys). */
#ifndef CINFER_BENCHSERVE_RESULTS_H
#define CINFER_BENCHSERVE_RESULTS_H

#include <jansson.h>
#include <stdio.h>

#include "benchserve/runner.h"

/* Builds the results object; takes ownership of `config`. NULL on no memory. */
json_t *bs_results_json(const bs_run *run, json_t *config);
/* Prints the summary of a results object as a table. */
void bs_results_print(FILE *out, json_t *results);

#endif
