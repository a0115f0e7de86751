/* results.c - see results.h. */
#include "benchserve/results.h"

#include <stdlib.h>

#include "benchserve/stats.h"

static json_t *summary_json(double *v, size_t n, double scale) {
    bs_summary s = bs_summarize(v, n);
    return json_pack("{s:I, s:f, s:f, s:f, s:f}", "n", (json_int_t)s.n, "mean", s.mean * scale, "p50", s.p50 * scale,
                     "p90", s.p90 * scale, "p99", s.p99 * scale);
}

static json_t *record_json(const bs_record *r) {
    json_t *o = json_pack("{s:I, s:I, s:f, s:f, s:f, s:f, s:I, s:I, s:I, s:I, s:I, s:s, s:i}", "session",
                          (json_int_t)r->session, "turn", (json_int_t)r->turn, "planned_s", r->planned, "sent_s",
                          r->sent, "end_s", r->end, "e2e_s", r->end - r->sent, "prompt_tokens",
                          (json_int_t)r->prompt_tokens, "cached_tokens", (json_int_t)r->cached_tokens, "output_tokens",
                          (json_int_t)r->output_tokens, "max_tokens", (json_int_t)r->max_tokens, "token_events",
                          (json_int_t)r->token_events, "error", bs_err_name(r->error), "http_status", r->http_status);
    if (!o) return NULL;
    json_object_set_new(o, "ttft_s", r->first >= 0 ? json_real(r->first - r->sent) : json_null());
    json_object_set_new(o, "usage", json_boolean(r->have_usage));
    json_object_set_new(o, "replayed_tokens", json_integer(r->replayed_tokens));
    if (r->trace_line >= 0) json_object_set_new(o, "trace_line", json_integer(r->trace_line));
    return o;
}

json_t *bs_results_json(const bs_run *run, json_t *config) {
    size_t n = run->n_rec;
    double *ttft = malloc((n + 1) * sizeof(double)), *e2e = malloc((n + 1) * sizeof(double));
    double *tpot = malloc((n + 1) * sizeof(double)), *lag = malloc((n + 1) * sizeof(double));
    double *itl = malloc((run->n_itl + 1) * sizeof(double));
    json_t *root = NULL, *reqs = json_array();
    if (!ttft || !e2e || !tpot || !lag || !itl || !reqs) goto out;
    size_t nt = 0, ne = 0, np = 0, ok = 0;
    long long in = 0, cached = 0, replayed = 0, outp = 0;
    for (size_t i = 0; i < n; i++) {
        const bs_record *r = &run->rec[i];
        lag[i] = r->sent - r->planned;
        if (r->have_usage)
            in += r->prompt_tokens, cached += r->cached_tokens, replayed += r->replayed_tokens,
                outp += r->output_tokens;
        json_array_append_new(reqs, record_json(r));
        if (r->error >= 0) continue;
        ok++;
        e2e[ne++] = r->end - r->sent;
        if (r->first >= 0) ttft[nt++] = r->first - r->sent;
        if (r->first >= 0 && r->output_tokens > 1) tpot[np++] = (r->end - r->first) / (double)(r->output_tokens - 1);
    }
    for (size_t i = 0; i < run->n_itl; i++) itl[i] = run->itl[i];
    double d = run->wall_s > 0 ? run->wall_s : 1e-9;
    json_t *errors = json_object();
    for (int k = 0; k < BS_E_N; k++) json_object_set_new(errors, bs_err_name(k), json_integer(run->errors[k]));
    json_t *s =
        json_pack("{s:f, s:I, s:I, s:I, s:o, s:s, s:f, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f}", "duration_s",
                  run->wall_s, "requests_sent", (json_int_t)n, "requests_ok", (json_int_t)ok, "requests_failed",
                  (json_int_t)(n - ok), "errors", errors, "first_error", run->first_error, "request_throughput",
                  (double)ok / d, "input_tokens", (json_int_t)in, "cached_tokens", (json_int_t)cached,
                  "computed_tokens", (json_int_t)(in - cached - replayed), "output_tokens", (json_int_t)outp,
                  "input_tok_s", (double)in / d, "cached_tok_s", (double)cached / d, "computed_tok_s",
                  (double)(in - cached - replayed) / d, "output_tok_s", (double)outp / d, "total_tok_s",
                  (double)(in + outp) / d, "cache_hit_ratio", in ? (double)cached / (double)in : 0.0);
    if (!s) goto out;
    json_object_set_new(s, "replayed_tokens", json_integer(replayed)); /* cinfer bounded replay (window models) */
    json_object_set_new(s, "ttft_ms", summary_json(ttft, nt, 1e3));
    json_object_set_new(s, "tpot_ms", summary_json(tpot, np, 1e3));
    json_object_set_new(s, "itl_ms", summary_json(itl, run->n_itl, 1e3));
    json_object_set_new(s, "e2e_ms", summary_json(e2e, ne, 1e3));
    json_object_set_new(s, "send_lag_ms", summary_json(lag, n, 1e3));
    root = json_pack("{s:i, s:O, s:o, s:O}", "cinfer_bench_serve", 1, "config", config, "summary", s, "requests", reqs);
out:
    json_decref(config);
    json_decref(reqs);
    free(ttft), free(e2e), free(tpot), free(lag), free(itl);
    return root;
}

static double num(json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

void bs_results_print(FILE *f, json_t *res) {
    json_t *s = json_object_get(res, "summary"), *c = json_object_get(res, "config");
    const char *wl = json_string_value(json_object_get(c, "workload"));
    const char *api = json_string_value(json_object_get(c, "api"));
    fprintf(f, "============ serving benchmark: %s workload, %s API ============\n", wl ? wl : "?", api ? api : "?");
    fprintf(f, "%-34s %12.0f / %.0f sent\n", "successful requests", num(s, "requests_ok"), num(s, "requests_sent"));
    json_t *errs = json_object_get(s, "errors");
    const char *k;
    json_t *v;
    json_object_foreach(errs, k, v) if (json_integer_value(v))
        fprintf(f, "  error %-26s %12lld\n", k, (long long)json_integer_value(v));
    const char *fe = json_string_value(json_object_get(s, "first_error"));
    if (fe && fe[0]) fprintf(f, "  first error: %.200s\n", fe);
    fprintf(f, "%-34s %12.2f\n", "duration (s)", num(s, "duration_s"));
    fprintf(f, "%-34s %12.0f\n", "input tokens", num(s, "input_tokens"));
    fprintf(f, "%-34s %12.0f\n", "  served from cache", num(s, "cached_tokens"));
    fprintf(f, "%-34s %12.0f\n", "  replayed (window state)", num(s, "replayed_tokens"));
    fprintf(f, "%-34s %12.0f\n", "  computed", num(s, "computed_tokens"));
    fprintf(f, "%-34s %12.0f\n", "output tokens", num(s, "output_tokens"));
    fprintf(f, "%-34s %11.1f%%\n", "cache hit ratio", 100 * num(s, "cache_hit_ratio"));
    fprintf(f, "%-34s %12.2f\n", "requests/s", num(s, "request_throughput"));
    fprintf(f, "%-34s %12.1f\n", "input tok/s", num(s, "input_tok_s"));
    fprintf(f, "%-34s %12.1f\n", "  cached tok/s", num(s, "cached_tok_s"));
    fprintf(f, "%-34s %12.1f\n", "  computed tok/s", num(s, "computed_tok_s"));
    fprintf(f, "%-34s %12.1f\n", "output tok/s", num(s, "output_tok_s"));
    fprintf(f, "%-22s %10s %10s %10s %10s\n", "latency (ms)", "mean", "p50", "p90", "p99");
    static const char *const rows[][2] = {{"ttft_ms", "time to first token"},
                                          {"tpot_ms", "time per output token"},
                                          {"itl_ms", "inter-token latency"},
                                          {"e2e_ms", "end-to-end latency"},
                                          {"send_lag_ms", "send lag (vs plan)"}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        json_t *m = json_object_get(s, rows[i][0]);
        fprintf(f, "%-22s %10.2f %10.2f %10.2f %10.2f\n", rows[i][1], num(m, "mean"), num(m, "p50"), num(m, "p90"),
                num(m, "p99"));
    }
    fprintf(f, "==================================================================\n");
}
