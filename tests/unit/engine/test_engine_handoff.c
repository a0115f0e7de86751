/* test_engine_handoff.c - the engine's half of the prefill/decode handoff
 * (engine_handoff.c, docs/pd.md), stories260K, 400-token prompts, blocks of 16:
 *  - export: a prefill-only request (max_tokens 1) fills its export with the
 *    24 full prompt blocks before the last token (cinfer_engine_kv_handoff_blocks),
 *    each a valid store object (store_verify) carrying the engine fingerprint;
 *  - import on a second engine: the request reports those 384 tokens as cached,
 *    computes only the rest, and its greedy output equals an engine that
 *    computed everything (the handoff_imported_blocks counter says 24); the
 *    same handoff again finds every block cached and leaks no reference;
 *  - import while another request keeps a forward pass in flight (the import
 *    waits for it), and with synchronous scheduling: same output;
 *  - a tampered record (one payload byte of block 10): the 10 blocks before it
 *    are installed, block 10 is rejected and counted, the rest computed, same
 *    output; a record under another cache salt or for other tokens installs nothing;
 *  - the import is owned by the engine after submit (freed with the request,
 *    also when it is cancelled before admission: ASan checks). */
#include <stdatomic.h>

#include "engine_testlib.h"
#include "store/store_format.h"

#define NP 400
#define NGEN 24
#define BT 16
#define NB ((NP - 1) / BT)

static const model *g_m;
static thread_pool *g_tp;
static int32_t g_prompt[NP], g_other[NP];

static cinfer_engine *mk(bool sync) {
    tl_sync_scheduling = sync;
    cinfer_engine *e = tl_engine(g_m, g_tp, 32 << 20, 512, 16, 1024);
    tl_sync_scheduling = false;
    return e;
}

static cinfer_request req(const int32_t *prompt, int32_t max_tokens, const char *salt) {
    cinfer_request r = cinfer_request_default();
    r.prompt = prompt;
    r.n_prompt = NP;
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    if (salt) {
        r.cache_salt = salt;
        r.cache_salt_len = strlen(salt);
    }
    return r;
}

/* Prefill-only run on a fresh engine: the export's records, copied (malloc'd). */
static uint8_t *export_prompt(const int32_t *prompt, const char *salt, int32_t *n_out) {
    cinfer_engine *e = mk(false);
    CHECK(e != NULL);
    int32_t n = cinfer_engine_kv_handoff_blocks(e, NP);
    CHECK(n == NB);
    cinfer_kv_export *x = cinfer_kv_export_new(e, n);
    cinfer_request r = req(prompt, 1, salt);
    r.kv_export = x;
    run_result res = {0};
    CHECK(tl_run(e, &r, &res) == 0);
    CHECK(cinfer_kv_export_ready(x) == n);
    size_t rec = cinfer_engine_kv_record_bytes(e);
    uint8_t fp[32];
    cinfer_engine_kv_fingerprint(e, fp);
    uint32_t hl = store_header_len(BT);
    for (int32_t i = 0; i < n; i++) {
        const uint8_t *p = cinfer_kv_export_record(x, i);
        store_obj_hdr h;
        CHECK(store_decode_header(p, hl, &h, NULL) == 0);
        CHECK(h.n_tokens == BT && h.payload_len == rec - hl && !memcmp(h.fingerprint, fp, 32));
    }
    uint8_t *copy = malloc((size_t)n * rec);
    memcpy(copy, cinfer_kv_export_record(x, 0), (size_t)n * rec);
    cinfer_engine_stats st = cinfer_engine_get_stats(e);
    CHECK(st.handoff_exported_blocks == (uint64_t)n);
    cinfer_kv_export_unref(x);
    cinfer_engine_destroy(e);
    *n_out = n;
    return copy;
}

static size_t g_rec;

static void import_run(cinfer_engine *e, const uint8_t *recs, int32_t n, const char *salt, run_result *res) {
    cinfer_request r = req(g_prompt, NGEN, salt);
    r.kv_import = malloc((size_t)n * g_rec);
    memcpy(r.kv_import, recs, (size_t)n * g_rec);
    r.n_kv_import = n;
    memset(res, 0, sizeof *res);
    CHECK(tl_run(e, &r, res) == 0);
}

static void test_import(const uint8_t *recs, int32_t n, const run_result *cold, bool sync) {
    cinfer_engine *e = mk(sync);
    run_result res;
    import_run(e, recs, n, NULL, &res);
    CHECK(res.usage.cached_tokens == NB * BT);
    CHECK(res.n_tokens == cold->n_tokens && !memcmp(res.tokens, cold->tokens, sizeof(int32_t) * NGEN));
    cinfer_engine_stats st = cinfer_engine_get_stats(e);
    CHECK(st.handoff_imported_blocks == (uint64_t)n && st.handoff_rejected_blocks == 0);
    CHECK(st.prompt_tokens_computed == NP - NB * BT);
    /* the same handoff again: every block is cached already (the duplicates are dropped and no
     * reference leaks: the invariant checker of the sanitizer build counts them) */
    run_result again;
    import_run(e, recs, n, NULL, &again);
    CHECK(again.usage.cached_tokens == NB * BT && !memcmp(again.tokens, cold->tokens, sizeof(int32_t) * NGEN));
    st = cinfer_engine_get_stats(e);
    CHECK(st.kv_blocks_used == 0);
    cinfer_engine_destroy(e);
}

static void test_in_flight(const uint8_t *recs, int32_t n, const run_result *cold) {
    cinfer_engine *e = mk(false);
    cinfer_request busy = req(g_other, 200, NULL); /* keeps forward passes in flight */
    char err[128];
    uint64_t id = cinfer_engine_submit(e, &busy, err, sizeof err);
    CHECK(id > 0);
    run_result res;
    import_run(e, recs, n, NULL, &res);
    CHECK(res.usage.cached_tokens == NB * BT);
    CHECK(!memcmp(res.tokens, cold->tokens, sizeof(int32_t) * NGEN));
    run_result other = {0};
    CHECK(tl_collect(e, id, &other) == 0);
    cinfer_engine_destroy(e);
}

static void test_tampered(const uint8_t *recs, int32_t n, const run_result *cold) {
    uint8_t *bad = malloc((size_t)n * g_rec);
    memcpy(bad, recs, (size_t)n * g_rec);
    bad[10 * g_rec + g_rec - 5] ^= 0x40; /* payload of block 10 */
    cinfer_engine *e = mk(false);
    run_result res;
    import_run(e, bad, n, NULL, &res);
    CHECK(res.usage.cached_tokens == 10 * BT);
    CHECK(!memcmp(res.tokens, cold->tokens, sizeof(int32_t) * NGEN));
    cinfer_engine_stats st = cinfer_engine_get_stats(e);
    CHECK(st.handoff_imported_blocks == 10 && st.handoff_rejected_blocks == 1);
    /* another tenant's salt: the keys differ, nothing is installed */
    run_result salted;
    import_run(e, recs, n, "tenant-b", &salted);
    CHECK(salted.usage.cached_tokens == 0);
    CHECK(!memcmp(salted.tokens, cold->tokens, sizeof(int32_t) * NGEN));
    cinfer_engine_destroy(e);
    free(bad);
}

static void test_cancel_before_admission(const uint8_t *recs, int32_t n) {
    cinfer_engine *e = mk(false);
    cinfer_request r = req(g_prompt, NGEN, NULL);
    r.kv_import = malloc((size_t)n * g_rec);
    memcpy(r.kv_import, recs, (size_t)n * g_rec);
    r.n_kv_import = n;
    char err[128];
    uint64_t id = cinfer_engine_submit(e, &r, err, sizeof err);
    CHECK(id > 0);
    CHECK(cinfer_engine_release(e, id) == 0);
    cinfer_engine_destroy(e); /* the import is freed with the request */
}

int main(void) {
    model *m;
    cf_err err = {0};
    if (model_load(shared_path("models/stories260K.gguf"), &m, &err)) return tu_missing_fixture(err.msg);
    g_m = m;
    g_tp = pool_create(1);
    tl_prompt(g_prompt, NP);
    tl_prompt(g_other, NP);
    static run_result cold;
    cinfer_engine *e = mk(false);
    cinfer_request r = req(g_prompt, NGEN, NULL);
    CHECK(e && tl_run(e, &r, &cold) == 0);
    g_rec = cinfer_engine_kv_record_bytes(e);
    cinfer_engine_destroy(e);
    int32_t n = 0;
    uint8_t *recs = export_prompt(g_prompt, NULL, &n);
    test_import(recs, n, &cold, false);
    test_import(recs, n, &cold, true);
    test_in_flight(recs, n, &cold);
    test_tampered(recs, n, &cold);
    test_cancel_before_admission(recs, n);
    free(recs);
    pool_destroy(g_tp);
    model_free(m);
    return test_finish();
}
