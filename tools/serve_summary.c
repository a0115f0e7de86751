/* serve_summary.c - see serve_summary.h. */
#include "serve_summary.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cpu.h"
#include "base/timeutil.h"
#include "store/store_gc.h"
#include "tensor/dtype.h"

#define PROGRESS_AFTER_S 1.0

void load_progress_init(load_progress *lp, const char *path) {
    *lp = (load_progress){
        .path = path, .t0 = time_now(), .last_pct = -1, .last_phase = -1, .tty = isatty(STDERR_FILENO) == 1};
}

void load_progress_cb(void *ctx, model_load_phase phase, int64_t done, int64_t total) {
    load_progress *lp = ctx;
    double el = time_now() - lp->t0;
    if (el < PROGRESS_AFTER_S || total <= 0) return;
    int pct = (int)(100 * done / total), step = lp->tty ? 1 : 10;
    if (lp->last_pct >= 0 && lp->last_phase == (int)phase && pct / step == lp->last_pct / step) return;
    if (lp->tty && lp->last_pct >= 0 && lp->last_phase != (int)phase) fputc('\n', stderr);
    lp->last_pct = pct;
    lp->last_phase = (int)phase;
    if (phase == MODEL_LOAD_VERIFY)
        fprintf(stderr, "%scinfer serve: verifying the weights cache of %s: %d%% (%.2f/%.2f GiB, %.1f s)%s",
                lp->tty ? "\r" : "", lp->path, pct, (double)done / (1 << 30), (double)total / (1 << 30), el,
                lp->tty ? "" : "\n");
    else
        fprintf(stderr, "%scinfer serve: loading %s: %d%% (%lld/%lld layers, %.1f s)%s", lp->tty ? "\r" : "", lp->path,
                pct, (long long)done, (long long)total, el, lp->tty ? "" : "\n");
    fflush(stderr);
}

void load_progress_end(load_progress *lp, bool ok) {
    if (lp->last_pct < 0) return;
    if (lp->tty) fputc('\n', stderr);
    if (ok) fprintf(stderr, "cinfer serve: model loaded in %.1f s\n", time_now() - lp->t0);
}

static void fmt_count(double v, char *out, size_t cap) {
    if (v >= 1e9) snprintf(out, cap, "%.2fB", v / 1e9);
    else if (v >= 1e6) snprintf(out, cap, "%.1fM", v / 1e6);
    else if (v >= 1e3) snprintf(out, cap, "%.1fK", v / 1e3);
    else snprintf(out, cap, "%.0f", v);
}

static void fmt_bytes(double b, char *out, size_t cap) {
    if (b >= 1 << 30) snprintf(out, cap, "%.2f GiB", b / (1 << 30));
    else if (b >= 1 << 20) snprintf(out, cap, "%.1f MiB", b / (1 << 20));
    else snprintf(out, cap, "%.1f KiB", b / 1024);
}

/* "q8_0 x 154, f32 x 57": tensors per type, most common first. */
static void fmt_dtypes(const gguf_file *f, char *out, size_t cap) {
    enum { NT = 64 };
    long long count[NT] = {0}, other = 0;
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        uint32_t t = gguf_tensor_at(f, i)->type;
        if (t < NT) count[t]++;
        else other++;
    }
    size_t k = 0;
    out[0] = 0;
    for (;;) {
        int best = -1;
        for (int t = 0; t < NT; t++)
            if (count[t] && (best < 0 || count[t] > count[best])) best = t;
        if (best < 0 || k >= cap) break;
        int w = snprintf(out + k, cap - k, "%s%s x %lld", k ? ", " : "", dtype_name((uint32_t)best), count[best]);
        if (w < 0) break;
        k += (size_t)w;
        count[best] = 0;
    }
    if (other && k < cap) snprintf(out + k, cap - k, "%sother x %lld", k ? ", " : "", other);
}

static void fmt_store(const serve_summary *s, char *out, size_t cap) {
    if (!s->store_dir) {
        snprintf(out, cap, "none (--kv-store DIR keeps KV blocks across requests and restarts)");
        return;
    }
    int64_t def[CINFER_TRAFFIC_N];
    store_retention_defaults(def);
    size_t k = (size_t)snprintf(out, cap, "%s, retention", s->store_dir);
    for (int c = 0; c < CINFER_TRAFFIC_N && k < cap; c++) {
        int64_t r = s->retention && s->retention[c] ? s->retention[c] : def[c];
        static const struct {
            int64_t s;
            char u;
        } units[] = {{86400, 'd'}, {3600, 'h'}, {60, 'm'}, {1, 's'}};
        size_t u = 0;
        while (r % units[u].s) u++; /* the largest unit that divides r (s always does) */
        int w = snprintf(out + k, cap - k, " %s=%lld%c", store_class_name(c), (long long)(r / units[u].s), units[u].u);
        if (w < 0) break;
        k += (size_t)w;
    }
    if (s->swa_retention > 0 && k < cap)
        snprintf(out + k, cap - k, " swa=%llds (window-state snapshots)", (long long)s->swa_retention);
}

/* "weights 1.05 GiB repacked/stacked (anonymous) + 62.5 MiB mapped; KV pool 255.8 MiB; total 1.36 GiB"
 * and where the weights come from: the model file, or the weights cache. */
static void print_memory(FILE *out, const serve_summary *s, int64_t kv_bytes) {
    model_memory mm;
    model_memory_stats(s->m, &mm);
    char own[32], cache[32], map[32], kv[32], tot[32], rel[32];
    fmt_bytes((double)mm.owned_bytes, own, sizeof own);
    fmt_bytes((double)mm.cache_bytes, cache, sizeof cache);
    fmt_bytes((double)mm.mapped_bytes, map, sizeof map);
    fmt_bytes((double)kv_bytes, kv, sizeof kv);
    fmt_bytes((double)(mm.owned_bytes + mm.cache_bytes + mm.mapped_bytes + (uint64_t)kv_bytes), tot, sizeof tot);
    fmt_bytes((double)mm.released_bytes, rel, sizeof rel);
    const char *path = gguf_path(model_get_gguf(s->m));
    if (mm.source == MODEL_WEIGHTS_FILE)
        fprintf(out, "cinfer serve: memory       weights %s repacked/stacked (anonymous) + %s mapped", own, map);
    else fprintf(out, "cinfer serve: memory       weights %s repacked/stacked (cache, shared) + %s mapped", cache, map);
    fprintf(out, "; KV pool %s; total %s%s\n", kv, tot, mm.locked ? " (locked: --mlock)" : "");
    if (mm.source == MODEL_WEIGHTS_CACHE_HIT)
        fprintf(out,
                "cinfer serve: weights from cache %s (verified %s in %.2f s, mapped shared); tensors used in place "
                "from mmap of %s\n",
                mm.cache_path, cache, mm.cache_seconds, path);
    else if (mm.source == MODEL_WEIGHTS_CACHE_BUILT)
        fprintf(out,
                "cinfer serve: weights from file %s, repacked and written to cache %s (%.2f s to publish); later "
                "starts map it\n",
                path, mm.cache_path, mm.cache_seconds);
    else if (mm.file_mapped)
        fprintf(out,
                "cinfer serve: weights from file %s (mmap; %s of file pages released after repacking; mapped "
                "tensors read in place)\n",
                path, rel);
    else fprintf(out, "cinfer serve: weights from an in-memory image (converted at load)\n");
    if (mm.cache_note && mm.cache_note[0]) fprintf(out, "cinfer serve: weights cache %s\n", mm.cache_note);
}

void serve_summary_print(FILE *out, const serve_summary *s) {
    const model_hparams *hp = model_get_hparams(s->m);
    cinfer_engine_stats st = cinfer_engine_get_stats(s->eng);
    char total[32], active[32], kvb[32], types[512], store[512], names[1024];
    fmt_count((double)model_n_params(s->m), total, sizeof total);
    fmt_count((double)model_active_params(s->m), active, sizeof active);
    fmt_bytes((double)st.kv_bytes, kvb, sizeof kvb);
    fmt_dtypes(model_get_gguf(s->m), types, sizeof types);
    fmt_store(s, store, sizeof store);
    serve_names_join(s->names, names, sizeof names);
    kv_dtype kv_dt = (kv_dtype)(st.kv_dtype - CINFER_KV_F32);
    double tok_bytes = model_kv_token_bytes_as(s->m, kv_dt);
    long long kv_tokens = tok_bytes > 0 ? (long long)((double)st.kv_bytes / tok_bytes) : 0;
    bool moe = hp->n_expert > 0;
    fprintf(out, "cinfer serve: model        %s\n", names);
    fprintf(out, "cinfer serve: architecture %s, %d layers, width %d, vocabulary %d, context %d (trained %d)\n",
            hp->arch, hp->n_layer, hp->n_embd, hp->n_vocab, s->ctx, hp->n_ctx_train);
    if (moe)
        fprintf(out, "cinfer serve: parameters   %s total, %s active per token (%d of %d experts)\n", total, active,
                hp->n_expert_used, hp->n_expert);
    else fprintf(out, "cinfer serve: parameters   %s total, %s active per token\n", total, active);
    fprintf(out, "cinfer serve: weights      %s\n", types);
    if (st.kv_rings_total > 0) { /* sliding-window layers: rings taken from the same budget (docs/engine.md) */
        char ringb[32];
        fmt_bytes((double)st.kv_ring_bytes * st.kv_rings_total, ringb, sizeof ringb);
        long long blk_tokens =
            tok_bytes > 0
                ? (long long)((double)(st.kv_bytes - (long long)st.kv_ring_bytes * st.kv_rings_total) / tok_bytes)
                : 0;
        fprintf(out,
                "cinfer serve: KV cache     %lld tokens, %s (%s, %d blocks, %.6g bytes per token in the global layers; "
                "window rings: %d x %lld bytes = %s, %d rows each)\n",
                blk_tokens, kvb, kv_dtype_name(kv_dt), st.kv_blocks_total, tok_bytes, st.kv_rings_total,
                (long long)st.kv_ring_bytes, ringb, st.kv_ring_tokens);
    } else {
        fprintf(out, "cinfer serve: KV cache     %lld tokens, %s (%s, %d blocks, %.6g bytes per token)\n", kv_tokens,
                kvb, kv_dtype_name(kv_dt), st.kv_blocks_total, tok_bytes);
    }
    print_memory(out, s, st.kv_bytes);
    fprintf(out, "cinfer serve: compute      %d threads, kernels %s\n", pool_size(s->pool),
            cpu_isa_name(cpu_isa_active()));
    fprintf(out, "cinfer serve: store        %s\n", store);
    fprintf(out, "cinfer serve: API keys     %d%s\n", s->n_keys, s->n_keys ? "" : " (no authentication)");
    fprintf(out, "cinfer serve: URL          http://%s:%d/v1\n", s->host, s->port);
    fflush(out);
}
