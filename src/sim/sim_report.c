/* sim_report.c - see sim_report.h. */
#include "sim/sim_report.h"

#include <stdlib.h>
#include <string.h>

#include "benchserve/bs_buf.h"
#include "benchserve/svg.h"

static double safe_div(double a, double b) { return b > 0 ? a / b : 0; }

static int summarize_latency(const sim_results *r, sim_summary *s, cf_err *err) {
    double *v = malloc(3 * (r->n ? r->n : 1) * sizeof *v);
    if (!v) return cf_fail(err, "out of memory");
    size_t n = 0, nt = 0;
    double *ttft = v, *e2e = v + r->n, *tpot = v + 2 * r->n;
    for (size_t i = 0; i < r->n; i++) {
        if (!r->req[i].done) continue;
        ttft[n] = r->req[i].ttft;
        e2e[n++] = r->req[i].e2e;
        if (r->req[i].tpot > 0) tpot[nt++] = r->req[i].tpot;
    }
    s->ttft = bs_summarize(ttft, n);
    s->e2e = bs_summarize(e2e, n);
    s->tpot = bs_summarize(tpot, nt);
    free(v);
    return 0;
}

int sim_summarize(const sim_config *c, const sim_workload *w, const sim_results *r, sim_summary *s, cf_err *err) {
    *s = (sim_summary){.requests = r->n, .done = r->n_done, .rejected = (size_t)r->rejected, .wall_s = r->wall_s};
    double T = r->makespan_s > 0 ? r->makespan_s : (w->duration_s > 0 ? w->duration_s : 1);
    s->duration_s = T;
    if (summarize_latency(r, s, err)) return -1;
    double in = (double)(r->cached_hbm + r->cached_store + r->replayed + r->computed);
    s->hit_hbm = safe_div((double)r->cached_hbm, in);
    s->hit_store = safe_div((double)r->cached_store, in);
    s->replayed = safe_div((double)r->replayed, in);
    s->computed = safe_div((double)r->computed, in);
    s->recomputed = safe_div((double)r->recomputed, in);
    double cached = (double)(r->cached_hbm + r->cached_store);
    s->input_per_s = in / T;
    s->cached_input_per_s = cached / T;
    s->output_per_s = (double)r->output_tokens / T;
    double pa = (double)r->pool[0].accels, da = (double)r->pool[1].accels;
    s->prefill_input_per_accel = safe_div(in / T, pa);
    s->prefill_computed_per_accel = safe_div((double)(r->computed + r->replayed + r->recomputed) / T, pa);
    s->decode_output_per_accel = safe_div(s->output_per_s, da > 0 ? da : pa);
    s->prefill_input_per_node = s->prefill_input_per_accel * (double)c->prefill.hw.accel_per_node;
    s->decode_output_per_node =
        s->decode_output_per_accel * (double)(da > 0 ? c->decode.hw.accel_per_node : c->prefill.hw.accel_per_node);
    s->util_prefill = safe_div(r->pool[0].busy_s, (double)r->pool[0].instances * T);
    s->util_decode = safe_div(r->pool[1].busy_s, (double)r->pool[1].instances * T);
    s->store_peak_tb = r->store_peak_bytes / 1e12;
    s->store_read_gbps = r->store_bytes_read / T / 1e9;
    s->store_write_gbps = r->store_bytes_written / T / 1e9;
    s->kv_net_gbps = r->kv_bytes_moved / T / 1e9;
    int64_t drafted = 0, accepted = 0;
    for (size_t i = 0; i < r->n; i++) drafted += r->req[i].drafted, accepted += r->req[i].accepted;
    s->spec_accept_rate = safe_div((double)accepted, (double)drafted);
    s->tokens_per_decode_step = safe_div((double)r->pool[da > 0].decode_tokens, (double)r->pool[da > 0].steps);
    s->moe_imbalance_prefill = r->moe_imbalance[0];
    s->moe_imbalance_decode = r->moe_imbalance[1];
    /* economics over the run's duration */
    const sim_price *p = &c->price;
    double hours = T / 3600.0, serving = pa + da;
    double nodes = (pa > 0 ? pa / (double)c->prefill.hw.accel_per_node : 0) +
                   (da > 0 ? da / (double)c->decode.hw.accel_per_node : 0);
    s->accel_hours = serving * hours;
    s->revenue = (cached * p->input_hit_per_mtok + (in - cached) * p->input_miss_per_mtok +
                  (double)r->output_tokens * p->output_per_mtok) /
                 1e6;
    s->cost_accel = serving * (1 + p->idle_reserve) * hours * p->accel_hour;
    double store_tb = c->store_on ? c->store_capacity_bytes / 1e12 : 0;
    s->cost_other = nodes * (1 + p->idle_reserve) * hours * (p->cpu_node_hour + p->network_node_hour) +
                    store_tb * p->ssd_tb_month * hours / 730.0;
    s->cost_total = s->cost_accel + s->cost_other;
    s->margin = safe_div(s->revenue - s->cost_total, s->revenue);
    s->revenue_per_accel_hour = safe_div(s->revenue, s->accel_hours);
    s->cost_per_accel_hour = safe_div(s->cost_total, s->accel_hours);
    return 0;
}

static json_t *dist(const bs_summary *b) {
    return json_pack("{s:I,s:f,s:f,s:f,s:f,s:f,s:f}", "n", (json_int_t)b->n, "mean", b->mean, "p50", b->p50, "p90",
                     b->p90, "p99", b->p99, "min", b->min, "max", b->max);
}

json_t *sim_summary_json(const sim_config *c, const sim_summary *s) {
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "cluster", json_string(c->file));
    json_object_set_new(o, "model", json_string(c->model.name));
    json_object_set_new(o, "requests",
                        json_pack("{s:I,s:I,s:I}", "total", (json_int_t)s->requests, "done", (json_int_t)s->done,
                                  "rejected", (json_int_t)s->rejected));
    json_object_set_new(o, "duration_s", json_real(s->duration_s));
    json_object_set_new(o, "wall_s", json_real(s->wall_s));
    json_object_set_new(o, "ttft_s", dist(&s->ttft));
    json_object_set_new(o, "tpot_s", dist(&s->tpot));
    json_object_set_new(o, "e2e_s", dist(&s->e2e));
    json_object_set_new(o, "input_share",
                        json_pack("{s:f,s:f,s:f,s:f,s:f}", "cached_hbm", s->hit_hbm, "cached_store", s->hit_store,
                                  "replayed", s->replayed, "computed", s->computed, "recomputed", s->recomputed));
    json_object_set_new(o, "hit_rate", json_real(s->hit_hbm + s->hit_store));
    json_object_set_new(o, "tokens_per_s",
                        json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "input", s->input_per_s, "cached_input",
                                  s->cached_input_per_s, "output", s->output_per_s, "prefill_input_per_accel",
                                  s->prefill_input_per_accel, "prefill_computed_per_accel",
                                  s->prefill_computed_per_accel, "decode_output_per_accel", s->decode_output_per_accel,
                                  "prefill_input_per_node", s->prefill_input_per_node, "decode_output_per_node",
                                  s->decode_output_per_node));
    json_object_set_new(o, "utilisation", json_pack("{s:f,s:f}", "prefill", s->util_prefill, "decode", s->util_decode));
    json_object_set_new(o, "store",
                        json_pack("{s:f,s:f,s:f}", "peak_tb", s->store_peak_tb, "read_gb_per_s", s->store_read_gbps,
                                  "write_gb_per_s", s->store_write_gbps));
    json_object_set_new(o, "kv_transfer_gb_per_s", json_real(s->kv_net_gbps));
    json_object_set_new(o, "moe_imbalance",
                        json_pack("{s:f,s:f}", "prefill", s->moe_imbalance_prefill, "decode", s->moe_imbalance_decode));
    json_object_set_new(o, "speculative",
                        json_pack("{s:f,s:f}", "accept_rate", s->spec_accept_rate, "tokens_per_decode_step",
                                  s->tokens_per_decode_step));
    json_object_set_new(o, "economics",
                        json_pack("{s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "prices", c->price.name, "accel_hours",
                                  s->accel_hours, "revenue", s->revenue, "cost_accelerators", s->cost_accel,
                                  "cost_other", s->cost_other, "cost_total", s->cost_total, "margin", s->margin,
                                  "revenue_per_accel_hour", s->revenue_per_accel_hour, "cost_per_accel_hour",
                                  s->cost_per_accel_hour));
    return o;
}

void sim_summary_print(FILE *f, const sim_config *c, const sim_summary *s) {
    fprintf(f, "cluster            %s (%s)\n", c->file, c->model.name);
    fprintf(f, "requests           %zu done of %zu (%zu rejected: longer than one instance's KV memory)\n", s->done,
            s->requests, s->rejected);
    fprintf(f, "simulated          %.1f s in %.2f s wall\n", s->duration_s, s->wall_s);
    fprintf(f, "TTFT               mean %.3f  p50 %.3f  p90 %.3f  p99 %.3f s\n", s->ttft.mean, s->ttft.p50, s->ttft.p90,
            s->ttft.p99);
    fprintf(f, "TPOT               mean %.1f  p50 %.1f  p99 %.1f ms\n", 1e3 * s->tpot.mean, 1e3 * s->tpot.p50,
            1e3 * s->tpot.p99);
    fprintf(f, "E2E                mean %.2f  p50 %.2f  p99 %.2f s\n", s->e2e.mean, s->e2e.p50, s->e2e.p99);
    fprintf(f,
            "input tokens       %.1f%% cached in HBM, %.1f%% from the store, %.1f%% replayed, %.1f%% computed "
            "(+%.1f%% recomputed after preemption)\n",
            100 * s->hit_hbm, 100 * s->hit_store, 100 * s->replayed, 100 * s->computed, 100 * s->recomputed);
    fprintf(f, "throughput         input %.0f tok/s (%.0f cached), output %.0f tok/s\n", s->input_per_s,
            s->cached_input_per_s, s->output_per_s);
    fprintf(f, "prefill            %.0f input tok/s per accelerator (%.0f computed), %.0f per node, busy %.1f%%\n",
            s->prefill_input_per_accel, s->prefill_computed_per_accel, s->prefill_input_per_node,
            100 * s->util_prefill);
    fprintf(f, "decode             %.0f output tok/s per accelerator, %.0f per node, busy %.1f%%, %.2f tok/step\n",
            s->decode_output_per_accel, s->decode_output_per_node, 100 * s->util_decode, s->tokens_per_decode_step);
    fprintf(f, "expert balance     max/mean rank load %.3f prefill, %.3f decode (EPLB placement)\n",
            s->moe_imbalance_prefill, s->moe_imbalance_decode);
    fprintf(f, "store              peak %.3f TB, read %.2f GB/s, write %.2f GB/s; KV transfer %.2f GB/s\n",
            s->store_peak_tb, s->store_read_gbps, s->store_write_gbps, s->kv_net_gbps);
    fprintf(f,
            "economics (%s)  revenue $%.2f, cost $%.2f (accelerators $%.2f, other $%.2f), margin %.1f%%; "
            "per accelerator-hour: revenue $%.2f, cost $%.2f\n",
            c->price.name, s->revenue, s->cost_total, s->cost_accel, s->cost_other, 100 * s->margin,
            s->revenue_per_accel_hour, s->cost_per_accel_hour);
}

static int write_file(const char *dir, const char *name, const bs_buf *b, cf_err *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) return cf_fail(err, "%s: cannot write", path);
    size_t n = fwrite(bs_buf_str(b), 1, b->len, f);
    int bad = fclose(f) != 0 || n != b->len;
    return bad ? cf_fail(err, "%s: write failed", path) : 0;
}

/* A CDF of one latency field over finished requests (sorted copies). */
static int cdf_chart(const char *dir, const char *file, const char *title, const char *xl, const sim_results *r,
                     int field, cf_err *err) {
    double *x = malloc(2 * (r->n ? r->n : 1) * sizeof *x);
    if (!x) return cf_fail(err, "out of memory");
    double *y = x + r->n;
    size_t n = 0;
    for (size_t i = 0; i < r->n; i++) {
        const sim_req_result *q = &r->req[i];
        double v = field == 0 ? q->ttft : field == 1 ? q->tpot : q->e2e;
        if (q->done && (field != 1 || v > 0)) x[n++] = v * (field == 1 ? 1e3 : 1);
    }
    bs_sort(x, n);
    for (size_t i = 0; i < n; i++) y[i] = 100.0 * (double)(i + 1) / (double)n;
    bs_buf b = {0};
    svg_series s = {.name = "simulated", .x = x, .y = y, .n = n};
    int rc = svg_line_chart(&b, title, xl, "requests (%)", &s, 1) ? cf_fail(err, "out of memory")
                                                                  : write_file(dir, file, &b, err);
    bs_buf_free(&b);
    free(x);
    return rc;
}

int sim_report_svg(const char *dir, const sim_results *r, const sim_summary *s, cf_err *err) {
    if (cdf_chart(dir, "ttft_cdf.svg", "Time to first token (CDF)", "TTFT (s)", r, 0, err) ||
        cdf_chart(dir, "tpot_cdf.svg", "Time per output token (CDF)", "TPOT (ms)", r, 1, err) ||
        cdf_chart(dir, "e2e_cdf.svg", "End-to-end latency (CDF)", "E2E (s)", r, 2, err))
        return -1;
    const char *const panels[] = {"input tokens (%)"}, *const names[] = {"HBM hit", "store hit", "replayed", "computed",
                                                                         "recomputed"};
    double v[] = {100 * s->hit_hbm, 100 * s->hit_store, 100 * s->replayed, 100 * s->computed, 100 * s->recomputed};
    bs_buf b = {0};
    int rc = svg_bar_panels(&b, "Where input tokens came from", panels, 1, names, 5, v)
                 ? cf_fail(err, "out of memory")
                 : write_file(dir, "hit.svg", &b, err);
    bs_buf_free(&b);
    if (rc) return rc;
    const char *const tp[] = {"prefill input tok/s per accelerator", "decode output tok/s per accelerator"};
    const char *const tn[] = {"simulated"};
    double tv[] = {s->prefill_input_per_accel, s->decode_output_per_accel};
    b = (bs_buf){0};
    rc = svg_bar_panels(&b, "Throughput per accelerator", tp, 2, tn, 1, tv) ? cf_fail(err, "out of memory")
                                                                            : write_file(dir, "tokens.svg", &b, err);
    bs_buf_free(&b);
    return rc;
}
