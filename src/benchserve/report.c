/* report.c - see report.h. Per-request series come from the "requests"
 * array; over-time series use 40 equal buckets from 0 to the last completion
 * (a request's output tokens are spread evenly over [first token, end]). */
#include "benchserve/report.h"

#include <errno.h>
#include <jansson.h>
#include <libgen.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "benchserve/results.h"
#include "benchserve/stats.h"
#include "benchserve/svg.h"

#define N_BUCKETS 40

typedef struct loaded {
    json_t *root;
    char name[128];
} loaded;

static double num(json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

static int write_svg(const char *dir, const char *file, const bs_buf *b, cf_err *err) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "w");
    if (!f) return cf_fail(err, "cannot write %s", path);
    size_t w = fwrite(b->p, 1, b->len, f);
    if (fclose(f) || w != b->len) return cf_fail(err, "cannot write %s", path);
    return 0;
}

/* Sorted per-request values of one field (seconds -> ms) for successful requests. */
static double *request_values(json_t *root, const char *what, size_t *n) {
    json_t *reqs = json_object_get(root, "requests");
    double *v = malloc((json_array_size(reqs) + 1) * sizeof *v);
    if (!v) return NULL;
    size_t k = 0, i;
    json_t *r;
    json_array_foreach(reqs, i, r) {
        if (strcmp(json_string_value(json_object_get(r, "error")) ? json_string_value(json_object_get(r, "error")) : "",
                   "ok") != 0)
            continue;
        double ttft = json_is_number(json_object_get(r, "ttft_s")) ? num(r, "ttft_s") : NAN, e2e = num(r, "e2e_s");
        double out = num(r, "output_tokens"), x = NAN;
        if (!strcmp(what, "ttft")) x = ttft;
        else if (!strcmp(what, "e2e")) x = e2e;
        else if (out > 1 && isfinite(ttft)) x = (e2e - ttft) / (out - 1);
        if (isfinite(x)) v[k++] = x * 1e3;
    }
    bs_sort(v, k);
    *n = k;
    return v;
}

static int cdf_chart(loaded *L, size_t n, const char *what, const char *title, const char *xlabel, const char *dir,
                     const char *file, cf_err *err) {
    svg_series *s = calloc(n, sizeof *s);
    double **xs = calloc(n, sizeof *xs), **ys = calloc(n, sizeof *ys);
    int rc = !s || !xs || !ys ? cf_fail(err, "out of memory") : 0;
    for (size_t k = 0; k < n && !rc; k++) {
        size_t m = 0;
        xs[k] = request_values(L[k].root, what, &m);
        ys[k] = malloc((m + 1) * sizeof(double));
        if (!xs[k] || !ys[k]) {
            rc = cf_fail(err, "out of memory");
            break;
        }
        for (size_t i = 0; i < m; i++) ys[k][i] = (double)(i + 1) / (double)m;
        s[k] = (svg_series){.name = L[k].name, .x = xs[k], .y = ys[k], .n = m};
    }
    bs_buf b = {0};
    if (!rc && svg_line_chart(&b, title, xlabel, "fraction of requests (0-1)", s, n))
        rc = cf_fail(err, "out of memory");
    if (!rc) rc = write_svg(dir, file, &b, err);
    bs_buf_free(&b);
    for (size_t k = 0; xs && ys && k < n; k++) free(xs[k]), free(ys[k]);
    free(xs), free(ys), free(s);
    return rc;
}

static double last_end(loaded *L, size_t n) {
    double t = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i;
        json_t *r;
        json_array_foreach(json_object_get(L[k].root, "requests"), i, r) t = fmax(t, num(r, "end_s"));
    }
    return t > 0 ? t : 1;
}

/* kind 0: output tok/s; kind 1: cache hit %. Returns the buckets used: up
 * to this run's own last completion. */
static size_t time_series(json_t *root, int kind, double width, double *x, double *y) {
    double a[N_BUCKETS] = {0}, c[N_BUCKETS] = {0};
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(root, "requests"), i, r) {
        if (!json_is_true(json_object_get(r, "usage"))) continue;
        if (kind == 1) {
            double q = num(r, "sent_s") / width;
            int bkt = q >= N_BUCKETS - 1 ? N_BUCKETS - 1 : q > 0 ? (int)q : 0;
            a[bkt] += num(r, "cached_tokens");
            c[bkt] += num(r, "prompt_tokens");
            continue;
        }
        double out = num(r, "output_tokens"), end = num(r, "end_s");
        double first = json_is_number(json_object_get(r, "ttft_s")) ? num(r, "sent_s") + num(r, "ttft_s") : end;
        if (end - first < 1e-9) first = end - 1e-9;
        for (int b = 0; b < N_BUCKETS; b++) {
            double lo = b * width, hi = lo + width;
            double ov = fmin(hi, end) - fmax(lo, first);
            if (ov > 0) a[b] += out * ov / (end - first);
        }
    }
    double end = 0;
    json_array_foreach(json_object_get(root, "requests"), i, r) end = fmax(end, num(r, "end_s"));
    size_t used = (size_t)ceil(end / width);
    if (used < 1) used = 1;
    if (used > N_BUCKETS) used = N_BUCKETS;
    for (size_t b = 0; b < used; b++) {
        x[b] = ((double)b + 0.5) * width;
        y[b] = kind == 0 ? a[b] / width : c[b] > 0 ? 100 * a[b] / c[b] : NAN;
    }
    return used;
}

static int time_chart(loaded *L, size_t n, int kind, const char *dir, cf_err *err) {
    double width = last_end(L, n) / N_BUCKETS;
    double *x = malloc(n * N_BUCKETS * sizeof *x), *y = malloc(n * N_BUCKETS * sizeof *y);
    svg_series *s = calloc(n, sizeof *s);
    int rc = !x || !y || !s ? cf_fail(err, "out of memory") : 0;
    for (size_t k = 0; k < n && !rc; k++) {
        size_t used = time_series(L[k].root, kind, width, x + k * N_BUCKETS, y + k * N_BUCKETS);
        s[k] = (svg_series){.name = L[k].name, .x = x + k * N_BUCKETS, .y = y + k * N_BUCKETS, .n = used};
    }
    bs_buf b = {0};
    if (!rc && svg_line_chart(&b, kind ? "Cache hit ratio over time" : "Output throughput over time",
                              "time since start of run (s)",
                              kind ? "input served from cache (%)" : "output tokens per second (tok/s)", s, n))
        rc = cf_fail(err, "out of memory");
    if (!rc) rc = write_svg(dir, kind ? "cache_hit.svg" : "throughput.svg", &b, err);
    bs_buf_free(&b);
    free(x), free(y), free(s);
    return rc;
}

static int bars(loaded *L, size_t n, const char *dir, cf_err *err) {
    static const char *const panels[] = {"TTFT p50 (ms)", "TTFT p99 (ms)", "output (tok/s)", "cache hit (%)"};
    double *v = malloc(4 * n * sizeof *v);
    const char **names = malloc(n * sizeof *names);
    int rc = !v || !names ? cf_fail(err, "out of memory") : 0;
    for (size_t k = 0; k < n && !rc; k++) {
        json_t *s = json_object_get(L[k].root, "summary");
        v[0 * n + k] = num(json_object_get(s, "ttft_ms"), "p50");
        v[1 * n + k] = num(json_object_get(s, "ttft_ms"), "p99");
        v[2 * n + k] = num(s, "output_tok_s");
        v[3 * n + k] = 100 * num(s, "cache_hit_ratio");
        names[k] = L[k].name;
    }
    bs_buf b = {0};
    if (!rc && svg_bar_panels(&b, "Serving benchmark summary", panels, 4, names, n, v))
        rc = cf_fail(err, "out of memory");
    if (!rc) rc = write_svg(dir, "summary.svg", &b, err);
    bs_buf_free(&b);
    free(v);
    free(names);
    return rc;
}

static int load(const char *path, loaded *l, cf_err *err) {
    json_error_t je;
    l->root = json_load_file(path, 0, &je);
    if (!l->root) return cf_fail(err, "%s: not JSON (%s, line %d)", path, je.text, je.line);
    json_t *s = json_object_get(l->root, "summary");
    if (!json_is_object(s) || !json_is_array(json_object_get(l->root, "requests")))
        return cf_fail(err, "%s: not a `cinfer bench serve` results file (no summary / requests)", path);
    /* Legend name: the file name without ".json", plus the workload when the name lacks it. */
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    const char *wl = json_string_value(json_object_get(json_object_get(l->root, "config"), "workload"));
    char *stem = basename(tmp);
    size_t n = strlen(stem);
    if (n > 5 && !strcmp(stem + n - 5, ".json")) stem[n - 5] = 0;
    if (strlen(stem) > 36) strcpy(stem + 33, "...");
    if (wl && !strstr(stem, wl)) snprintf(l->name, sizeof l->name, "%s (%.20s)", stem, wl);
    else snprintf(l->name, sizeof l->name, "%s", stem);
    return 0;
}

int bs_report(const char *const *files, size_t n, const char *dir, FILE *out, cf_err *err) {
    loaded *L = calloc(n, sizeof *L);
    if (!L) return cf_fail(err, "out of memory");
    int rc = 0;
    for (size_t k = 0; k < n && !rc; k++) rc = load(files[k], &L[k], err);
    for (size_t k = 0; k < n && !rc; k++) bs_results_print(out, L[k].root);
    if (!rc && n > 1) {
        fprintf(out, "%-40s %10s %10s %10s %12s %10s\n", "file", "ok", "TTFT p50", "TTFT p99", "output tok/s",
                "cache hit");
        for (size_t k = 0; k < n; k++) {
            json_t *s = json_object_get(L[k].root, "summary"), *t = json_object_get(s, "ttft_ms");
            fprintf(out, "%-40.40s %10.0f %8.1fms %8.1fms %12.1f %9.1f%%\n", L[k].name, num(s, "requests_ok"),
                    num(t, "p50"), num(t, "p99"), num(s, "output_tok_s"), 100 * num(s, "cache_hit_ratio"));
        }
    }
    if (!rc && dir) {
        if (mkdir(dir, 0777) && errno != EEXIST) rc = cf_fail(err, "cannot create directory %s", dir);
        if (!rc)
            rc = cdf_chart(L, n, "ttft", "Time to first token (CDF)", "time to first token (ms)", dir, "ttft_cdf.svg",
                           err);
        if (!rc)
            rc = cdf_chart(L, n, "tpot", "Time per output token (CDF)", "time per output token (ms)", dir,
                           "tpot_cdf.svg", err);
        if (!rc)
            rc = cdf_chart(L, n, "e2e", "End-to-end latency (CDF)", "end-to-end latency (ms)", dir, "e2e_cdf.svg", err);
        if (!rc) rc = time_chart(L, n, 0, dir, err);
        if (!rc) rc = time_chart(L, n, 1, dir, err);
        if (!rc) rc = bars(L, n, dir, err);
        if (!rc)
            fprintf(out, "wrote ttft_cdf.svg tpot_cdf.svg e2e_cdf.svg throughput.svg cache_hit.svg summary.svg to %s\n",
                    dir);
    }
    for (size_t k = 0; k < n; k++) json_decref(L[k].root);
    free(L);
    return rc;
}
