/* test_engine_handoff_swa.c - window state in the prefill/decode handoff
 * (engine_handoff.c, docs/pd.md "Window state"): on window models the
 * records alone cannot resume a sequence, so the export carries the window
 * rings' snapshot (swa_format.h; deepseek4: window latents and compressor
 * inputs) at the boundary after its last record, and an import installs the
 * records only with a snapshot that verifies. Two models: tiny-gemma2
 * (window 32, blocks of 16; missing: skip, or fail under CI) and an mkmodel
 * deepseek4 (ratios 0/4/128, window 16, blocks of 128). For each:
 *  - a prefill-only export (max_tokens 1) holds every full prompt block
 *    before the last token and a window snapshot of
 *    cinfer_engine_kv_window_bytes() bytes; also when the prompt is computed
 *    16 tokens per step (the snapshot still comes from the ring);
 *  - the import on a second engine (bounded replay on by default, as a server
 *    runs) reports those blocks as cached, replays nothing, computes only the
 *    tail, and its greedy tokens equal a monolithic engine's that computed
 *    everything (exact resume from the imported snapshot);
 *  - fallbacks, each computing the prompt (cached 0) with the same tokens and
 *    counted in handoff_window_rejected: a tampered snapshot byte, no
 *    snapshot, a snapshot at the wrong boundary (one record fewer), a
 *    tampered record, and a receiver without a window-state tier;
 *  - afterwards no block, ring or pin is held. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "engine_testlib.h"
#include "model/mkmodel.h"
#include "testutil_ds4.h"

#define N_GEN 16
#define MAX_NP 400

typedef struct tcase {
    const char *name;
    const model *m;
    int32_t np; /* prompt tokens */
} tcase;

static thread_pool *g_tp;
static int32_t g_prompt[MAX_NP];

/* replay_auto: bounded replay as the model's layout asks (the server's default); tier: window-state bytes. */
static cinfer_engine *mk(const model *m, int32_t max_batch, int64_t tier) {
    cinfer_engine_options o = {.block_tokens = 16,
                               .kv_memory_bytes = 64 << 20,
                               .max_batch_tokens = max_batch,
                               .max_seqs = 8,
                               .max_ctx = 1024,
                               .swa_state_memory_bytes = tier,
                               .swa_replay_auto = true};
    cinfer_engine *e = NULL;
    char err[256];
    CHECKF(cinfer_engine_create(m, g_tp, &o, &e, err, sizeof err) == 0, "engine create: %s", err);
    return e;
}

static cinfer_request req(int32_t np, int32_t max_tokens) {
    cinfer_request r = cinfer_request_default();
    r.prompt = g_prompt;
    r.n_prompt = np;
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    return r;
}

static void check_idle(cinfer_engine *e, const char *what) {
    cinfer_engine_stats st = cinfer_engine_get_stats(e);
    CHECKF(st.kv_rings_used == 0 && st.kv_blocks_used == 0, "%s: %d rings, %d blocks still used", what,
           st.kv_rings_used, st.kv_blocks_used);
}

/* Prefill-only run: records then the snapshot, one malloc'd buffer (as D's receive buffer holds them). */
static uint8_t *export_prompt(const tcase *t, int32_t max_batch, int32_t *n_out, size_t *rec_out, size_t *win_out) {
    cinfer_engine *e = mk(t->m, max_batch, 0);
    if (!e) return NULL;
    int32_t n = cinfer_engine_kv_handoff_blocks(e, t->np);
    size_t rec = cinfer_engine_kv_record_bytes(e), win = cinfer_engine_kv_window_bytes(e);
    CHECKF(n > 1 && win > 0, "%s: %d blocks, window %zu bytes", t->name, n, win);
    cinfer_kv_export *x = cinfer_kv_export_new(e, n);
    const uint8_t *snap = NULL;
    CHECKF(cinfer_kv_export_window(x, &snap) == 0, "%s: a window before the prefill", t->name);
    cinfer_request r = req(t->np, 1);
    r.kv_export = x;
    run_result res = {0};
    CHECK(tl_run(e, &r, &res) == 0);
    CHECKF(cinfer_kv_export_ready(x) == n, "%s: %d of %d records", t->name, cinfer_kv_export_ready(x), n);
    CHECKF(cinfer_kv_export_window(x, &snap) == 1 && snap, "%s: no window snapshot exported", t->name);
    uint8_t *buf = malloc((size_t)n * rec + win);
    memcpy(buf, cinfer_kv_export_record(x, 0), (size_t)n * rec);
    if (snap) memcpy(buf + (size_t)n * rec, snap, win);
    cinfer_engine_stats st = cinfer_engine_get_stats(e);
    CHECKF(st.handoff_exported_blocks == (uint64_t)n && st.handoff_window_exported_bytes == win,
           "%s: exported %llu blocks, %llu window bytes", t->name, (unsigned long long)st.handoff_exported_blocks,
           (unsigned long long)st.handoff_window_exported_bytes);
    cinfer_kv_export_unref(x);
    check_idle(e, "export");
    cinfer_engine_destroy(e);
    *n_out = n;
    *rec_out = rec;
    *win_out = win;
    return buf;
}

/* One import run on e: n records (+ the snapshot when with_win) copied from buf. */
static void import_run(cinfer_engine *e, const tcase *t, const uint8_t *buf, int32_t n, size_t rec, size_t win,
                       bool with_win, run_result *res) {
    cinfer_request r = req(t->np, N_GEN);
    uint8_t *copy = malloc((size_t)n * rec + win);
    memcpy(copy, buf, (size_t)n * rec);
    memcpy(copy + (size_t)n * rec, buf + (size_t)(cinfer_engine_kv_handoff_blocks(e, t->np)) * rec, win);
    r.kv_import = copy;
    r.n_kv_import = n;
    r.kv_import_window = with_win ? copy + (size_t)n * rec : NULL;
    r.kv_import_window_bytes = with_win ? win : 0;
    memset(res, 0, sizeof *res);
    CHECK(tl_run(e, &r, res) == 0);
}

/* A fallback: the prompt is computed (nothing cached), the tokens still equal the reference. */
static void check_fallback(const tcase *t, const char *what, const uint8_t *buf, int32_t n, size_t rec, size_t win,
                           bool with_win, int64_t tier, const run_result *ref) {
    cinfer_engine *e = mk(t->m, 512, tier);
    if (!e) return;
    run_result res;
    import_run(e, t, buf, n, rec, win, with_win, &res);
    cinfer_engine_stats st = cinfer_engine_get_stats(e);
    CHECKF(res.usage.cached_tokens == 0 && res.usage.replayed_tokens == 0, "%s %s: cached %d, replayed %d", t->name,
           what, res.usage.cached_tokens, res.usage.replayed_tokens);
    CHECKF(res.n_tokens == N_GEN && !memcmp(res.tokens, ref->tokens, sizeof(int32_t) * N_GEN),
           "%s %s: tokens differ from the monolithic run", t->name, what);
    CHECKF(st.handoff_window_rejected == 1 && st.handoff_imported_blocks == 0 && st.handoff_window_imported_bytes == 0,
           "%s %s: rejected %llu, imported %llu blocks", t->name, what, (unsigned long long)st.handoff_window_rejected,
           (unsigned long long)st.handoff_imported_blocks);
    check_idle(e, what);
    cinfer_engine_destroy(e);
}

static void run_case(const tcase *t) {
    tl_prompt(g_prompt, t->np);
    cinfer_engine *e = mk(t->m, 512, 0);
    if (!e) return;
    int32_t bt = cinfer_engine_block_tokens(e);
    run_result ref = {0};
    cinfer_request r = req(t->np, N_GEN);
    CHECK(tl_run(e, &r, &ref) == 0 && ref.n_tokens == N_GEN);
    CHECK(ref.usage.cached_tokens == 0);
    cinfer_engine_destroy(e);

    for (int chunked = 0; chunked < 2; chunked++) {
        int32_t n = 0;
        size_t rec = 0, win = 0;
        uint8_t *buf = export_prompt(t, chunked ? 16 : 512, &n, &rec, &win);
        if (!buf) return;
        fprintf(stderr, "%s%s: %d records of %zu bytes, window snapshot %zu bytes\n", t->name,
                chunked ? " (16 per step)" : "", n, rec, win);
        /* the import: exact resume at the last record's boundary */
        e = mk(t->m, 512, 0);
        run_result res;
        import_run(e, t, buf, n, rec, win, true, &res);
        cinfer_engine_stats st = cinfer_engine_get_stats(e);
        CHECKF(res.usage.cached_tokens == n * bt && res.usage.replayed_tokens == 0,
               "%s: cached %d (want %d), replayed %d", t->name, res.usage.cached_tokens, n * bt,
               res.usage.replayed_tokens);
        CHECKF(res.n_tokens == N_GEN && !memcmp(res.tokens, ref.tokens, sizeof(int32_t) * N_GEN),
               "%s%s: handed-off tokens differ from the monolithic run", t->name, chunked ? " chunked" : "");
        CHECKF(st.handoff_imported_blocks == (uint64_t)n && st.handoff_window_imported_bytes == win &&
                   st.handoff_window_rejected == 0 && st.swa_replays == 0 && st.swa_state_hits >= 1,
               "%s: imported %llu blocks, %llu window bytes, %llu replays", t->name,
               (unsigned long long)st.handoff_imported_blocks, (unsigned long long)st.handoff_window_imported_bytes,
               (unsigned long long)st.swa_replays);
        CHECKF(st.prompt_tokens_computed == (uint64_t)(t->np - n * bt), "%s: computed %llu prompt tokens", t->name,
               (unsigned long long)st.prompt_tokens_computed);
        check_idle(e, "import");
        cinfer_engine_destroy(e);
        if (chunked) {
            free(buf);
            continue;
        }
        uint8_t *bad = malloc((size_t)n * rec + win);
        memcpy(bad, buf, (size_t)n * rec + win);
        bad[(size_t)n * rec + win - 3] ^= 0x10; /* a float of the snapshot's last block: checksum */
        check_fallback(t, "tampered window", bad, n, rec, win, true, 0, &ref);
        check_fallback(t, "no window", buf, n, rec, win, false, 0, &ref);
        check_fallback(t, "window at another boundary", buf, n - 1, rec, win, true, 0, &ref);
        memcpy(bad, buf, (size_t)n * rec + win);
        bad[(size_t)n * rec - 5] ^= 0x40; /* payload of the last record */
        check_fallback(t, "tampered record", bad, n, rec, win, true, 0, &ref);
        check_fallback(t, "receiver without a tier", buf, n, rec, win, true, -1, &ref);
        free(bad);
        free(buf);
    }
}

int main(void) {
    g_tp = pool_create(2);
    model *gemma = NULL, *ds4 = NULL;
    cf_err err = {0};
    if (model_load(shared_path("models/tiny/tiny-gemma2.gguf"), &gemma, &err)) {
        pool_destroy(g_tp);
        return tu_missing_fixture(err.msg);
    }
    if (access(shared_path("models/stories260K.gguf"), R_OK)) {
        model_free(gemma);
        pool_destroy(g_tp);
        return tu_missing_fixture("models/stories260K.gguf");
    }
    char path[256];
    temp_path(path, sizeof path, "ds4-handoff.gguf");
    mkmodel_opts o = tu_ds4_tiny(3, "0,4,128", 33);
    o.ctx = 1024;
    CHECKF(mkmodel_write(&o, path, &err) == 0 && model_load(path, &ds4, &err) == 0, "%s", err.msg);
    unlink(path);
    tcase cases[] = {{"tiny-gemma2", gemma, 150}, {"deepseek4", ds4, 300}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (cases[i].m) run_case(&cases[i]);
    model_free(gemma);
    model_free(ds4);
    pool_destroy(g_tp);
    return test_finish();
}
