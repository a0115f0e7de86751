/* metrics.c - counters, histograms and the Prometheus text format (see
 * metrics.h). Series are rendered without the model_name label and then
 * copied once through metrics_label_all, so no series can miss it. */
#include "serve/metrics.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "base/version.h"

#ifndef CINFER_GIT_COMMIT
#define CINFER_GIT_COMMIT "unknown" /* set by CMake from `git rev-parse` at configure time */
#endif

static const double ttft_bounds[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
                                     0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
static const double itl_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05,
                                    0.075, 0.1,    0.15,  0.2,  0.3,   0.4,  0.5,   0.75, 1.0,  2.5};
static const double e2e_bounds[] = {0.01, 0.025, 0.05, 0.1,  0.3,  0.5,  0.8,  1.0,  1.5,  2.0,
                                    2.5,  5.0,   10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0};

static void hist_init(metrics_hist *h, const double *b, int n) {
    memset(h, 0, sizeof *h);
    h->bounds = b;
    h->n_bounds = n;
}

void metrics_init(metrics *m) {
    memset(m, 0, sizeof *m);
    hist_init(&m->ttft, ttft_bounds, (int)(sizeof ttft_bounds / sizeof ttft_bounds[0]));
    hist_init(&m->itl, itl_bounds, (int)(sizeof itl_bounds / sizeof itl_bounds[0]));
    hist_init(&m->e2e, e2e_bounds, (int)(sizeof e2e_bounds / sizeof e2e_bounds[0]));
}

void metrics_request_done(metrics *m, int status) {
    for (int i = 0; i < m->n_status; i++)
        if (m->by_status[i].status == status) {
            m->by_status[i].n++;
            return;
        }
    if (m->n_status < (int)(sizeof m->by_status / sizeof m->by_status[0])) {
        m->by_status[m->n_status].status = status;
        m->by_status[m->n_status++].n = 1;
    }
}

void metrics_observe(metrics_hist *h, double v, uint64_t weight) {
    if (weight == 0) return;
    int b = 0;
    while (b < h->n_bounds && v > h->bounds[b]) b++;
    h->counts[b] += weight;
    h->sum += v * (double)weight;
    h->count += weight;
}

typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *s, const char *fmt, ...) {
    if (s->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(s->p + s->len, s->cap - s->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            s->oom = 1;
            return;
        }
        if ((size_t)n < s->cap - s->len) {
            s->len += (size_t)n;
            return;
        }
        size_t cap = s->cap * 2 + (size_t)n;
        char *q = realloc(s->p, cap);
        if (!q) {
            s->oom = 1;
            return;
        }
        s->p = q;
        s->cap = cap;
    }
}

static void counter(sbuf *s, const char *name, const char *help, uint64_t v) {
    sb_printf(s, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name, (unsigned long long)v);
}

static void gauge(sbuf *s, const char *name, const char *help, double v) {
    sb_printf(s, "# HELP %s %s\n# TYPE %s gauge\n%s %.17g\n", name, help, name, name, v);
}

static void hist(sbuf *s, const char *name, const char *help, const metrics_hist *h) {
    sb_printf(s, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int b = 0; b < h->n_bounds; b++) {
        cum += h->counts[b];
        sb_printf(s, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[b], (unsigned long long)cum);
    }
    cum += h->counts[h->n_bounds];
    sb_printf(s, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.17g\n%s_count %llu\n", name, (unsigned long long)cum, name,
              h->sum, name, (unsigned long long)h->count);
}

/* The persistent KV store's counters (docs/store.md "Accounting"; names in
 * docs/serve.md). */
static void store_metrics(sbuf *s, const cinfer_engine_stats *st) {
    const cinfer_store_stats *k = &st->store;
    sb_printf(s,
              "# HELP cinfer_cached_tokens_by_tier_total Prompt tokens served from cache, by tier.\n"
              "# TYPE cinfer_cached_tokens_by_tier_total counter\n"
              "cinfer_cached_tokens_by_tier_total{tier=\"memory\"} %llu\n"
              "cinfer_cached_tokens_by_tier_total{tier=\"store\"} %llu\n",
              (unsigned long long)st->cached_tokens_memory, (unsigned long long)st->cached_tokens_store);
    counter(s, "cinfer_cached_tokens_memory_total", "Prompt tokens served from the in-memory prefix cache.",
            st->cached_tokens_memory);
    gauge(s, "cinfer_kv_store_writable", "1 while the store accepts writes (0: read-only or degraded).", k->writable);
    counter(s, "cinfer_kv_store_lookups_total", "Admissions that asked the store for more blocks.", k->lookups);
    counter(s, "cinfer_kv_store_hit_blocks_total", "KV blocks loaded from the store and verified.", k->hit_blocks);
    counter(s, "cinfer_kv_store_miss_blocks_total", "Store lookups ended by a missing object.", k->miss_blocks);
    counter(s, "cinfer_kv_store_expired_total", "Store objects found past their expiry (not loaded).", k->expired);
    counter(s, "cinfer_kv_store_quarantined_total", "Store objects that failed verification (quarantined, not loaded).",
            k->quarantined);
    counter(s, "cinfer_kv_store_read_errors_total", "Store read errors (treated as misses).", k->read_errors);
    counter(s, "cinfer_kv_store_write_errors_total", "Store write errors (ENOSPC, EROFS, EACCES, EIO, ...).",
            k->write_errors);
    counter(s, "cinfer_kv_store_writes_skipped_total", "Store writes skipped: the object already existed.",
            k->writes_skipped);
    counter(s, "cinfer_kv_store_writes_dropped_total", "Store writes dropped (queue full or store not writable).",
            k->writes_dropped);
    counter(s, "cinfer_kv_store_load_timeouts_total", "Requests that stopped waiting for a slow store load.",
            k->load_timeouts);
    counter(s, "cinfer_kv_store_degraded_total", "Transitions of the store into a degraded state.", k->degraded);
    counter(s, "cinfer_kv_store_gc_runs_total", "Store GC passes.", k->gc_runs);
    sb_printf(s,
              "# HELP cinfer_kv_store_gc_deleted_total Store objects deleted by GC, by reason.\n"
              "# TYPE cinfer_kv_store_gc_deleted_total counter\n"
              "cinfer_kv_store_gc_deleted_total{reason=\"expired\"} %llu\n"
              "cinfer_kv_store_gc_deleted_total{reason=\"lru\"} %llu\n",
              (unsigned long long)k->gc_deleted_expired, (unsigned long long)k->gc_deleted_lru);
    const char *n = "cinfer_kv_store_load_latency_seconds";
    sb_printf(
        s, "# HELP %s Store chain loads (lookup + load of one request), submit to completion.\n# TYPE %s histogram\n",
        n, n);
    uint64_t cum = 0;
    for (int b = 0; b < CINFER_STORE_LATENCY_BUCKETS - 1; b++) {
        cum += k->load_latency[b];
        sb_printf(s, "%s_bucket{le=\"%g\"} %llu\n", n, 0.00025 * (double)(1u << b), (unsigned long long)cum);
    }
    cum += k->load_latency[CINFER_STORE_LATENCY_BUCKETS - 1];
    sb_printf(s, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.17g\n%s_count %llu\n", n, (unsigned long long)cum, n,
              k->load_seconds, n, (unsigned long long)cum);
}

/* MoE expert load over the engine's sliding window (cinfer_engine_expert_load):
 * tokens per (layer, expert) and each layer's imbalance max/mean, which the
 * expert-parallel rebalancer consumes. Nothing for a dense model. */
static void expert_metrics(sbuf *s, cinfer_engine *e) {
    enum { CAP = 1024 };
    uint64_t counts[CAP];
    bool header = false;
    for (int32_t layer = 0;; layer++) {
        int n = cinfer_engine_expert_load(e, layer, counts, CAP);
        if (n < 0) break;
        if (n == 0) continue;
        if (n > CAP) n = CAP;
        if (!header) {
            sb_printf(s, "# HELP cinfer_moe_expert_tokens Tokens routed to each expert over the last 64 steps.\n"
                         "# TYPE cinfer_moe_expert_tokens gauge\n");
            header = true;
        }
        for (int x = 0; x < n; x++)
            sb_printf(s, "cinfer_moe_expert_tokens{layer=\"%d\",expert=\"%d\"} %llu\n", layer, x,
                      (unsigned long long)counts[x]);
    }
    if (!header) return;
    sb_printf(s, "# HELP cinfer_moe_expert_imbalance Max over mean expert load per MoE layer (1 = balanced).\n"
                 "# TYPE cinfer_moe_expert_imbalance gauge\n");
    for (int32_t layer = 0;; layer++) {
        int n = cinfer_engine_expert_load(e, layer, counts, CAP);
        if (n < 0) break;
        if (n == 0) continue;
        if (n > CAP) n = CAP;
        uint64_t sum = 0, mx = 0;
        for (int x = 0; x < n; x++) sum += counts[x], mx = counts[x] > mx ? counts[x] : mx;
        sb_printf(s, "cinfer_moe_expert_imbalance{layer=\"%d\"} %.6g\n", layer,
                  sum ? (double)mx * n / (double)sum : 0.0);
    }
}

/* Speculative decoding, per drafter (docs/serve.md "Speculative decoding"). */
static void spec_metrics(sbuf *s, const cinfer_engine_stats *st) {
    static const struct {
        const char *name, *help;
        size_t off;
    } fam[] = {
        {"cinfer_spec_draft_tokens_total", "Tokens proposed by the drafter and verified.",
         offsetof(cinfer_engine_stats, spec_drafted)},
        {"cinfer_spec_accepted_tokens_total", "Drafted tokens the model accepted.",
         offsetof(cinfer_engine_stats, spec_accepted)},
        {"cinfer_spec_verifies_total", "Verify items (a decode with drafts) run.",
         offsetof(cinfer_engine_stats, spec_verifies)},
    };
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        const uint64_t *v = (const uint64_t *)((const char *)st + fam[f].off);
        sb_printf(s, "# HELP %s %s\n# TYPE %s counter\n", fam[f].name, fam[f].help, fam[f].name);
        for (int32_t d = CINFER_SPEC_NGRAM; d < CINFER_SPEC_N; d++)
            sb_printf(s, "%s{drafter=\"%s\"} %llu\n", fam[f].name, cinfer_spec_drafter_name(d),
                      (unsigned long long)v[d]);
    }
    sb_printf(s,
              "# HELP cinfer_spec_confidence_dropped_total MTP / DSpark drafts made but not verified: their confidence "
              "did not pay for their share of the step's cost.\n# TYPE cinfer_spec_confidence_dropped_total counter\n"
              "cinfer_spec_confidence_dropped_total %llu\n",
              (unsigned long long)st->spec_conf_dropped);
    sb_printf(s,
              "# HELP cinfer_spec_block_cut_total DSpark block rows not drafted: their prefix survival fell below the "
              "load threshold.\n# TYPE cinfer_spec_block_cut_total counter\ncinfer_spec_block_cut_total %llu\n",
              (unsigned long long)st->spec_block_cut);
    const char *h = "cinfer_spec_acceptance_length";
    sb_printf(s, "# HELP %s Drafted tokens accepted per verify item.\n# TYPE %s histogram\n", h, h);
    uint64_t cum = 0, sum = 0;
    for (int a = 0; a <= CINFER_SPEC_MAX_K; a++) {
        cum += st->spec_accept_len[a];
        sum += (uint64_t)a * st->spec_accept_len[a];
        sb_printf(s, "%s_bucket{le=\"%d\"} %llu\n", h, a, (unsigned long long)cum);
    }
    sb_printf(s, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %llu\n%s_count %llu\n", h, (unsigned long long)cum, h,
              (unsigned long long)sum, h, (unsigned long long)cum);
}

int metrics_render(const metrics *m, const cinfer_engine_stats *st, cinfer_engine *e, char **out, size_t *len) {
    sbuf s = {0};
    s.cap = 8192;
    s.p = malloc(s.cap);
    if (!s.p) return -1;
    s.p[0] = 0;
    sb_printf(
        &s, "# HELP cinfer_requests_total HTTP requests answered, by status.\n# TYPE cinfer_requests_total counter\n");
    for (int i = 0; i < m->n_status; i++)
        sb_printf(&s, "cinfer_requests_total{status=\"%d\"} %llu\n", m->by_status[i].status,
                  (unsigned long long)m->by_status[i].n);
    counter(&s, "cinfer_prompt_tokens_total", "Prompt tokens of finished generation requests.", m->prompt_tokens);
    counter(&s, "cinfer_generation_tokens_total", "Completion tokens generated.", m->generation_tokens);
    counter(&s, "cinfer_cached_tokens_total", "Prompt tokens served from the prefix cache.", m->cached_tokens);
    counter(&s, "cinfer_requests_cancelled_total", "Generation requests cancelled (client gone or shutdown).",
            m->cancelled);
    counter(&s, "cinfer_client_disconnects_total", "Clients that closed the connection before the response ended.",
            m->disconnected);
    counter(&s, "cinfer_stream_pauses_total", "Streams paused because the client was not reading (backpressure).",
            m->stream_pauses);
    gauge(&s, "cinfer_connections_open", "Client connections open.", (double)m->connections_open);
    counter(&s, "cinfer_connections_refused_total", "Connections refused by --max-connections (503).",
            m->connections_refused);
    counter(&s, "cinfer_connection_timeouts_total", "Connections closed by the header, body or idle timeout.",
            m->connection_timeouts);
    counter(&s, "cinfer_accept_pauses_total", "Listener pauses after accept() errors (out of file descriptors...).",
            m->accept_pauses);
    hist(&s, "cinfer_time_to_first_token_seconds", "Time from request arrival to its first generated token.", &m->ttft);
    hist(&s, "cinfer_inter_token_latency_seconds", "Time between consecutive generated tokens of a choice.", &m->itl);
    hist(&s, "cinfer_e2e_request_latency_seconds", "Time from request arrival to the end of its response.", &m->e2e);
    gauge(&s, "cinfer_requests_inflight", "Generation requests accepted by the server and not finished.",
          (double)m->inflight);
    gauge(&s, "cinfer_requests_running", "Engine requests running (after the last step).", st->running);
    gauge(&s, "cinfer_requests_waiting", "Engine requests waiting for admission (after the last step).", st->waiting);
    gauge(&s, "cinfer_kv_blocks_total", "KV blocks in the pool.", st->kv_blocks_total);
    gauge(&s, "cinfer_kv_blocks_used", "KV blocks referenced by requests.", st->kv_blocks_used);
    gauge(&s, "cinfer_kv_blocks_free", "KV blocks free (not counting evictable cached ones).", st->kv_blocks_free);
    gauge(&s, "cinfer_kv_blocks_cached", "Unreferenced KV blocks kept for the prefix cache.", st->kv_blocks_cached);
    gauge(&s, "cinfer_kv_window_rings_total", "Sliding-window rings in the KV pool (0 without window layers).",
          st->kv_rings_total);
    gauge(&s, "cinfer_kv_window_rings_used", "Sliding-window rings held by running requests.", st->kv_rings_used);
    counter(&s, "cinfer_swa_replays_total", "Prefix hits resumed by bounded replay (window models, no snapshot).",
            st->swa_replays);
    counter(&s, "cinfer_swa_replayed_tokens_total", "Cached prompt tokens recomputed by bounded replay.",
            st->swa_replayed_tokens);
    counter(&s, "cinfer_swa_state_snapshots_total", "Window-state snapshots taken at block boundaries.",
            st->swa_snapshots);
    counter(&s, "cinfer_swa_state_hits_total", "Admissions resumed from a window-state snapshot (exact).",
            st->swa_state_hits);
    counter(&s, "cinfer_swa_state_misses_total",
            "Admissions whose prefix-cache hit had no window-state snapshot (recomputed from the start).",
            st->swa_state_misses);
    counter(&s, "cinfer_swa_state_evictions_total", "Window-state snapshots evicted for room.",
            st->swa_state_evictions);
    counter(&s, "cinfer_swa_state_expirations_total", "Window-state snapshots dropped by the TTL.",
            st->swa_state_expirations);
    gauge(&s, "cinfer_swa_state_entries", "Window-state snapshots held.", st->swa_state_entries);
    gauge(&s, "cinfer_swa_state_bytes", "Bytes of window-state snapshots held (host memory).", st->swa_state_bytes);
    gauge(&s, "cinfer_swa_state_budget_bytes", "Byte budget of the window-state tier.", st->swa_state_budget);
    counter(&s, "cinfer_swa_store_writes_total", "Window-state snapshots queued for the persistent store.",
            st->swa_store_writes);
    counter(&s, "cinfer_swa_store_hits_total",
            "Window-state snapshots loaded from the persistent store (exact resume).", st->swa_store_hits);
    counter(&s, "cinfer_swa_store_misses_total", "Window-state snapshot lookups the persistent store could not serve.",
            st->swa_store_misses);
    counter(&s, "cinfer_swa_store_invalid_total",
            "Stored window-state snapshots refused as invalid (replayed instead).", st->swa_store_invalid);
    counter(&s, "cinfer_handoff_exported_blocks_total",
            "KV blocks a prefill worker encoded for decode workers (--role prefill, docs/pd.md).",
            st->handoff_exported_blocks);
    counter(&s, "cinfer_handoff_imported_blocks_total",
            "Handed-off KV blocks a decode worker verified and installed in its prefix cache.",
            st->handoff_imported_blocks);
    counter(&s, "cinfer_handoff_rejected_blocks_total", "Handed-off KV records that failed verification.",
            st->handoff_rejected_blocks);
    counter(&s, "cinfer_handoff_window_exported_bytes_total",
            "Window-state snapshot bytes a prefill worker took for decode workers (window models, docs/pd.md).",
            st->handoff_window_exported_bytes);
    counter(&s, "cinfer_handoff_window_imported_bytes_total",
            "Handed-off window-state snapshot bytes a decode worker verified and installed (exact resume).",
            st->handoff_window_imported_bytes);
    counter(&s, "cinfer_handoff_window_rejected_total",
            "Handoffs of a window model whose window state was missing or refused (the prompt was computed).",
            st->handoff_window_rejected);
    uint64_t seen = st->cached_tokens + st->prompt_tokens_computed;
    gauge(&s, "cinfer_prefix_cache_hit_ratio", "Prompt tokens served by the prefix cache / prompt tokens admitted.",
          seen ? (double)st->cached_tokens / (double)seen : 0.0);
    counter(&s, "cinfer_cached_tokens_store_total", "Prompt tokens loaded from the persistent KV store.",
            st->cached_tokens_store);
    gauge(&s, "cinfer_kv_store_enabled", "1 when a persistent KV store is configured and readable.", st->store.enabled);
    counter(&s, "cinfer_kv_store_objects_written_total", "KV blocks written to the persistent store.",
            st->store.objects_written);
    counter(&s, "cinfer_kv_store_bytes_read_total", "Bytes loaded from the persistent store.", st->store.bytes_read);
    counter(&s, "cinfer_kv_store_bytes_written_total", "Bytes written to the persistent store.",
            st->store.bytes_written);
    store_metrics(&s, st);
    gauge(&s, "cinfer_kv_cache_usage_ratio", "KV blocks referenced by requests / KV blocks in the pool (0..1).",
          st->kv_blocks_total ? (double)st->kv_blocks_used / (double)st->kv_blocks_total : 0.0);
    sb_printf(&s,
              "# HELP cinfer_build_info Build of this server (value 1).\n# TYPE cinfer_build_info gauge\n"
              "cinfer_build_info{version=\"%s\",commit=\"%s\",isa=\"%s\"} 1\n",
              CINFER_VERSION, CINFER_GIT_COMMIT, cpu_isa_name(cpu_isa_active()));
    counter(&s, "cinfer_engine_steps_total", "Engine steps (forward passes).", st->steps);
    spec_metrics(&s, st);
    counter(&s, "cinfer_engine_preemptions_total", "Requests preempted for KV blocks.", st->preemptions);
    counter(&s, "cinfer_grammar_tokens_total", "Tokens sampled under a grammar's mask (structured outputs).",
            st->grammar_tokens);
    counter(&s, "cinfer_grammar_forced_tokens_total", "Grammar tokens taken without sampling (one allowed).",
            st->grammar_forced_tokens);
    counter(&s, "cinfer_grammar_masks_overlapped_total", "Grammar masks computed while a forward pass ran.",
            st->grammar_masks_overlapped);
    sb_printf(&s,
              "# HELP cinfer_grammar_mask_seconds_total Engine-thread seconds computing grammar masks.\n"
              "# TYPE cinfer_grammar_mask_seconds_total counter\ncinfer_grammar_mask_seconds_total %.6f\n",
              st->t_grammar);
    sb_printf(&s,
              "# HELP cinfer_engine_phase_seconds_total Engine seconds per phase (docs/engine.md): forward = the "
              "forward passes; plan, wait, commit, output = the engine thread's.\n"
              "# TYPE cinfer_engine_phase_seconds_total counter\n"
              "cinfer_engine_phase_seconds_total{phase=\"forward\"} %.6f\n"
              "cinfer_engine_phase_seconds_total{phase=\"plan\"} %.6f\n"
              "cinfer_engine_phase_seconds_total{phase=\"wait\"} %.6f\n"
              "cinfer_engine_phase_seconds_total{phase=\"commit\"} %.6f\n"
              "cinfer_engine_phase_seconds_total{phase=\"output\"} %.6f\n",
              st->t_forward, st->t_plan, st->t_wait, st->t_commit, st->t_output);
    if (e) expert_metrics(&s, e);
    if (s.oom) {
        free(s.p);
        return -1;
    }
    int rc = metrics_label_all(s.p, s.len, m->model_name ? m->model_name : "", out, len);
    free(s.p);
    return rc;
}

int metrics_label_all(const char *in, size_t len, const char *name, char **out, size_t *out_len) {
    char label[600];
    size_t k = (size_t)snprintf(label, sizeof label, "model_name=\"");
    for (const char *p = name; *p && k + 8 < sizeof label; p++) { /* escape \ " and newline */
        if (*p == '\\' || *p == '"') label[k++] = '\\';
        if (*p == '\n') label[k++] = '\\', label[k++] = 'n';
        else label[k++] = *p;
    }
    label[k++] = '"';
    label[k] = 0;
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += in[i] == '\n';
    sbuf s = {.cap = len + lines * (k + 3) + 1};
    if (!(s.p = malloc(s.cap))) return -1;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(in + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - in) + 1 : len, n = end - i;
        const char *line = in + i;
        size_t nm = strcspn(line, "{ \n");
        if (line[0] == '#' || nm >= n || line[nm] == '\n') sb_printf(&s, "%.*s", (int)n, line);
        else if (line[nm] == '{') sb_printf(&s, "%.*s{%s,%.*s", (int)nm, line, label, (int)(n - nm - 1), line + nm + 1);
        else sb_printf(&s, "%.*s{%s}%.*s", (int)nm, line, label, (int)(n - nm), line + nm);
        i = end;
    }
    if (s.oom) {
        free(s.p);
        return -1;
    }
    *out = s.p;
    *out_len = s.len;
    return 0;
}

void metrics_append(const metrics *m, char **txt, size_t *len, int (*fn)(void *ctx, char **out, size_t *len),
                    void *ctx) {
    char *raw = NULL, *extra = NULL;
    size_t raw_n = 0, n = 0;
    if (fn(ctx, &raw, &raw_n) == 0 && raw &&
        metrics_label_all(raw, raw_n, m->model_name ? m->model_name : "", &extra, &n) == 0 && extra) {
        char *joined = realloc(*txt, *len + n + 1);
        if (joined) {
            memcpy(joined + *len, extra, n);
            *len += n;
            joined[*len] = 0;
            *txt = joined;
        }
    }
    free(raw);
    free(extra);
}
