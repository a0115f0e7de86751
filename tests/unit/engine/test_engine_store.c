/* test_engine_store.c - the engine with a persistent KV store (stories260K):
 *  - engine A (store dir) answers a 400-token prompt cold and is destroyed
 *    (which publishes its queued writes); engine B on the same directory
 *    answers the same prompt with cached_tokens = floor(399/16)*16 = 384 from
 *    the store, computes only the 16 remaining prompt tokens, and produces the
 *    same greedy tokens as an engine without a store;
 *  - a different model (same shape, other weights) on that directory gets no
 *    hit, nor does the same prompt under another cache salt;
 *  - one corrupted object (block 10 of the chain): a fresh engine loads the 10
 *    blocks before it, quarantines it, computes the rest, and its output is
 *    still identical; it writes the recomputed blocks back, so the next engine
 *    hits all 24 again;
 *  - traffic class: objects carry the request's class;
 *  - the hit and the output are the same with synchronous scheduling, and
 *    while another request keeps a forward pass in flight;
 *  - a store directory that cannot be created: the engine still serves (store
 *    disabled and counted);
 *  - 3 processes sharing one directory, same prompt at once: identical
 *    outputs, one valid object per block, no temporaries or quarantine;
 *  - a FIFO where the first object should be: opened without blocking, not a
 *    regular file, quarantined at once; the request computes, same output;
 *  - a hanging store (every I/O thread blocked, store_test_io_hook): the
 *    request gives up after kv_store_load_timeout_ms (50 ms), computes
 *    everything, same output; destroy abandons the stuck threads after
 *    kv_store_close_timeout_ms (300 ms), and they stop quietly when released. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/prefix_cache.h"
#include "engine_testlib.h"
#include "model/mkmodel.h"
#include "store/store.h"
#include "store/store_format.h"
#include "store/store_gc.h"

#define NP 400
#define NGEN 24
#define BT 16
#define WANT_CACHED ((NP - 1) / BT * BT) /* 384: the whole blocks before the last prompt token (always computed) */

static const model *g_m;
static thread_pool *g_tp;
static int32_t g_prompt[NP];
static char g_dir[256], g_dir_save[256];

static cinfer_engine *store_engine(const model *m, const char *dir, bool sync_scheduling) {
    cinfer_engine_options o = {.block_tokens = BT,
                               .kv_memory_bytes = 32 << 20,
                               .max_batch_tokens = 512,
                               .max_seqs = 16,
                               .max_ctx = 1024,
                               .kv_store_dir = dir,
                               .kv_store_gc_interval_s = -1,
                               .sync_scheduling = sync_scheduling};
    cinfer_engine *e = NULL;
    char err[256];
    if (cinfer_engine_create(m, g_tp, &o, &e, err, sizeof err)) fprintf(stderr, "engine create: %s\n", err);
    return e;
}

static int run_prompt(cinfer_engine *e, int32_t cls, const char *salt, run_result *res) {
    cinfer_request r = cinfer_request_default();
    r.prompt = g_prompt;
    r.n_prompt = NP;
    r.max_tokens = NGEN;
    r.ignore_eos = true;
    r.traffic_class = cls;
    if (salt) {
        r.cache_salt = salt;
        r.cache_salt_len = strlen(salt);
    }
    return tl_run(e, &r, res);
}

/* Path of the object of prompt block `idx` (no salt). */
static void block_path(int idx, char *out, size_t cap) {
    uint8_t fp[32], key[32], parent[32];
    cf_err err;
    CHECK(prefix_cache_model_fingerprint(g_m, fp, &err) == 0);
    for (int b = 0; b <= idx; b++) {
        CHECK(prefix_cache_block_key(b ? parent : NULL, g_prompt + b * BT, BT, fp, (prefix_salt){0}, key, &err) == 0);
        memcpy(parent, key, 32);
    }
    store_object_path(g_dir, key, out, cap);
}

static void corrupt(const char *path) {
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (!f) return;
    fseek(f, 5000, SEEK_SET);
    int c = fgetc(f);
    fseek(f, 5000, SEEK_SET);
    fputc(c ^ 0x40, f);
    fclose(f);
}

static double tl_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Entries in a directory (not . and ..). */
static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *de; (de = readdir(d));) n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Stands in for a dead network mount: every store I/O thread that reaches a
 * syscall blocks here until the test opens the gate. */
static pthread_mutex_t g_gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_gate_cv = PTHREAD_COND_INITIALIZER;
static bool g_gate_open;
static void gate_hook(void) {
    pthread_mutex_lock(&g_gate_mu);
    while (!g_gate_open) pthread_cond_wait(&g_gate_cv, &g_gate_mu);
    pthread_mutex_unlock(&g_gate_mu);
}

/* A FIFO where block 0's object should be (a plain open() would block until a
 * writer appears): opened O_NONBLOCK, seen not to be a regular file, moved to
 * quarantine/ at once; the request computes everything, same output, no load
 * timeout. */
static void test_fifo_object(const run_result *cold) {
    char dir[256], path[1024], cmd[400];
    CHECK(test_scratch_path(dir, sizeof dir, "engine-store-fifo") != NULL);
    if (!*dir) return;
    memcpy(g_dir_save, g_dir, sizeof g_dir_save);
    snprintf(g_dir, sizeof g_dir, "%s", dir);
    block_path(0, path, sizeof path);
    snprintf(g_dir, sizeof g_dir, "%s", g_dir_save);
    char sub[1024];
    snprintf(sub, sizeof sub, "%.*s", (int)(strlen(path) - 68), path); /* .../objects/ab */
    CHECK(mkdir(dir, 0755) == 0 && mkdir(strcat(strcpy(cmd, dir), "/objects"), 0755) == 0);
    CHECK(mkdir(sub, 0755) == 0);
    snprintf(sub, sizeof sub, "%.*s", (int)(strlen(path) - 65), path); /* .../objects/ab/cd */
    CHECK(mkdir(sub, 0755) == 0);
    CHECK(mkfifo(path, 0644) == 0);
    cinfer_engine_options o = {.block_tokens = BT,
                               .kv_memory_bytes = 32 << 20,
                               .max_batch_tokens = 512,
                               .max_seqs = 16,
                               .max_ctx = 1024,
                               .kv_store_dir = dir,
                               .kv_store_gc_interval_s = -1,
                               .kv_store_load_timeout_ms = 2000};
    cinfer_engine *e = NULL;
    char err[256];
    CHECKF(cinfer_engine_create(g_m, g_tp, &o, &e, err, sizeof err) == 0, "%s", err);
    if (!e) return;
    static run_result rh;
    double t0 = tl_now();
    CHECK(run_prompt(e, 0, NULL, &rh) == 0);
    double dt = tl_now() - t0;
    cinfer_engine_stats sh = cinfer_engine_get_stats(e);
    struct stat sb;
    snprintf(sub, sizeof sub, "%s/quarantine", dir);
    fprintf(stderr, "fifo object: cached %d, %llu quarantined, %llu load timeouts, %.3f s, same output: %s\n",
            rh.usage.cached_tokens, (unsigned long long)sh.store.quarantined,
            (unsigned long long)sh.store.load_timeouts, dt, tl_same_tokens(&rh, cold) ? "yes" : "NO");
    CHECK(rh.usage.cached_tokens == 0 && sh.store.load_timeouts == 0 && tl_same_tokens(&rh, cold));
    CHECK(sh.store.quarantined == 1 && count_files(sub) == 1);
    CHECK(lstat(path, &sb) != 0 || S_ISREG(sb.st_mode)); /* the FIFO is gone (the block may be rewritten) */
    cinfer_engine_destroy(e);
    test_scratch_remove(dir);
}

/* A store whose I/O hangs in the kernel (every syscall blocked, like a dead
 * mount): the request stops waiting after the 50 ms load timeout, computes
 * everything and gives the same output; destroy gives up on the stuck threads
 * after kv_store_close_timeout_ms instead of waiting forever. */
static void test_hung_store(const run_result *cold) {
    char dir[256];
    CHECK(test_scratch_path(dir, sizeof dir, "engine-store-hung") != NULL);
    if (!*dir) return;
    g_gate_open = false;
    store_test_io_hook = gate_hook;
    cinfer_engine_options o = {.block_tokens = BT,
                               .kv_memory_bytes = 32 << 20,
                               .max_batch_tokens = 512,
                               .max_seqs = 16,
                               .max_ctx = 1024,
                               .kv_store_dir = dir,
                               .kv_store_gc_interval_s = -1,
                               .kv_store_load_timeout_ms = 50,
                               .kv_store_close_timeout_ms = 300};
    cinfer_engine *e = NULL;
    char err[256];
    CHECKF(cinfer_engine_create(g_m, g_tp, &o, &e, err, sizeof err) == 0, "%s", err);
    store_test_io_hook = NULL; /* read at open only */
    if (!e) return;
    static run_result rh;
    CHECK(run_prompt(e, 0, NULL, &rh) == 0);
    cinfer_engine_stats sh = cinfer_engine_get_stats(e);
    double t0 = tl_now();
    cinfer_engine_destroy(e);
    double dt = tl_now() - t0;
    fprintf(stderr, "hung store: cached %d, %llu load timeouts, same output: %s, destroy %.3f s\n",
            rh.usage.cached_tokens, (unsigned long long)sh.store.load_timeouts,
            tl_same_tokens(&rh, cold) ? "yes" : "NO", dt);
    CHECK(rh.usage.cached_tokens == 0 && sh.store.load_timeouts == 1 && tl_same_tokens(&rh, cold));
    CHECK(dt >= 0.25 && dt < 3.0);
    /* the abandoned threads come back later: they must find valid memory and stop quietly */
    pthread_mutex_lock(&g_gate_mu);
    g_gate_open = true;
    pthread_cond_broadcast(&g_gate_cv);
    pthread_mutex_unlock(&g_gate_mu);
    struct timespec d = {0, 200 * 1000000L};
    nanosleep(&d, NULL);
    test_scratch_remove(dir);
}

/* Several processes (forked; the parent is single-threaded here: its pool has
 * no workers and no engine is alive) run the same prompt on one fresh store
 * directory at the same time: every one answers like the cold run, the store
 * ends with exactly one valid object per block (no temporaries, nothing
 * quarantined), and a later engine gets the full hit. */
static void test_processes(const run_result *cold) {
    char dir[256];
    CHECK(test_scratch_path(dir, sizeof dir, "engine-store-mp") != NULL);
    if (!*dir) return;
    enum { NPROC = 3 };
    pid_t pids[NPROC];
    for (int k = 0; k < NPROC; k++) {
        pids[k] = fork();
        if (pids[k] == 0) {
            cinfer_engine *e = store_engine(g_m, dir, false);
            static run_result r;
            bool ok = e && run_prompt(e, CINFER_TRAFFIC_CHAT, NULL, &r) == 0 && tl_same_tokens(&r, cold);
            if (e) {
                cinfer_engine_stats s = cinfer_engine_get_stats(e);
                ok = ok && s.store.quarantined == 0 && s.store.write_errors == 0;
                cinfer_engine_destroy(e);
            }
            _exit(ok ? 0 : 1);
        }
    }
    int good = 0;
    for (int k = 0; k < NPROC; k++) {
        int st = 0;
        if (pids[k] > 0 && waitpid(pids[k], &st, 0) == pids[k] && WIFEXITED(st) && WEXITSTATUS(st) == 0) good++;
    }
    store_summary sm;
    cf_err err;
    CHECK(store_summarize(dir, time(NULL), &sm, &err) == 0);
    fprintf(stderr,
            "processes: %d/%d identical; store: %llu objects, %llu temporaries, %llu quarantined, %llu unreadable\n",
            good, NPROC, (unsigned long long)sm.objects, (unsigned long long)sm.tmp_files,
            (unsigned long long)sm.quarantined, (unsigned long long)sm.unreadable);
    CHECK(good == NPROC);
    CHECK(sm.objects == (NP + NGEN - 1) / BT && sm.tmp_files == 0 && sm.quarantined == 0 && sm.unreadable == 0);
    CHECK(sm.class_objects[CINFER_TRAFFIC_CHAT] == sm.objects);
    cinfer_engine *e = store_engine(g_m, dir, false);
    static run_result r;
    CHECK(e && run_prompt(e, 0, NULL, &r) == 0);
    if (e) cinfer_engine_destroy(e);
    CHECK(r.usage.cached_tokens == (NP - 1) / BT * BT && tl_same_tokens(&r, cold));
    test_scratch_remove(dir);
}

/* A: cold, writes back (every full block, prompt and generated, with the request's class) */
static void test_cold_write(const model *m, const run_result *cold) {
    static run_result ra;
    cf_err err = {0};
    cinfer_engine *e = store_engine(m, g_dir, false);
    CHECK(e && run_prompt(e, CINFER_TRAFFIC_AGENT, NULL, &ra) == 0);
    cinfer_engine_stats sa = cinfer_engine_get_stats(e);
    cinfer_engine_destroy(e);
    CHECK(ra.usage.cached_tokens == 0 && tl_same_tokens(&ra, cold));
    store_summary sm;
    CHECK(store_summarize(g_dir, time(NULL), &sm, &err) == 0);
    fprintf(stderr, "A: %llu lookups, %llu objects in the store (%llu agent), %llu bytes written\n",
            (unsigned long long)sa.store.lookups, (unsigned long long)sm.objects,
            (unsigned long long)sm.class_objects[CINFER_TRAFFIC_AGENT], (unsigned long long)sm.bytes);
    CHECK(sm.objects == (NP + NGEN - 1) / BT); /* every full block, prompt and generated: 26 */
    CHECK(sm.class_objects[CINFER_TRAFFIC_AGENT] == sm.objects);
}

/* B: same dir, same model -> store hit; another salt on the same engine -> none */
static void test_store_hit(const model *m, const run_result *cold) {
    static run_result rb, rs;
    cinfer_engine *e = store_engine(m, g_dir, false);
    CHECK(e && run_prompt(e, 0, NULL, &rb) == 0);
    cinfer_engine_stats sb = cinfer_engine_get_stats(e);
    fprintf(stderr,
            "B: cached %d (store %llu, memory %llu), computed %llu prompt tokens, %llu store blocks, %llu bytes read\n",
            rb.usage.cached_tokens, (unsigned long long)sb.cached_tokens_store,
            (unsigned long long)sb.cached_tokens_memory, (unsigned long long)sb.prompt_tokens_computed,
            (unsigned long long)sb.store.hit_blocks, (unsigned long long)sb.store.bytes_read);
    CHECK(rb.usage.cached_tokens == WANT_CACHED);
    CHECK(sb.cached_tokens_store == (uint64_t)WANT_CACHED && sb.cached_tokens == (uint64_t)WANT_CACHED);
    CHECK(sb.prompt_tokens_computed == (uint64_t)(NP - WANT_CACHED));
    CHECK(sb.store.hit_blocks == (uint64_t)(WANT_CACHED / BT) && sb.store.quarantined == 0);
    CHECK(tl_same_tokens(&rb, cold));
    /* same engine, another salt: no sharing through the store either */
    CHECK(run_prompt(e, 0, "tenant-b", &rs) == 0);
    CHECK(rs.usage.cached_tokens == 0 && tl_same_tokens(&rs, cold));
    cinfer_engine_destroy(e);
}

/* C: a different model of the same shape -> no hit */
static void test_other_model(void) {
    static run_result rc;
    cf_err err = {0};
    char mp[256];
    temp_path(mp, sizeof mp, "store-other.gguf");
    mkmodel_opts mo = {.arch = "llama",
                       .dim = 64,
                       .layers = 5,
                       .heads = 8,
                       .kv_heads = 4,
                       .ffn = 172,
                       .vocab_from = shared_path("models/stories260K.gguf"),
                       .type = DT_F32,
                       .seed = 7,
                       .ctx = 1024};
    model *m2 = NULL;
    if (mkmodel_write(&mo, mp, &err) || model_load(mp, &m2, &err)) {
        CHECKF(0, "other model: %s", err.msg);
    } else {
        cinfer_engine *e = store_engine(m2, g_dir, false);
        CHECK(e && run_prompt(e, 0, NULL, &rc) == 0);
        cinfer_engine_stats sc = cinfer_engine_get_stats(e);
        fprintf(stderr, "C (other weights): cached %d, %llu lookups, %llu hits\n", rc.usage.cached_tokens,
                (unsigned long long)sc.store.lookups, (unsigned long long)sc.store.hit_blocks);
        CHECK(rc.usage.cached_tokens == 0 && sc.store.lookups == 1 && sc.store.hit_blocks == 0);
        cinfer_engine_destroy(e);
        model_free(m2);
    }
    unlink(mp);
}

/* D: block 10 corrupted -> 10 blocks from the store, quarantine, identical output */
static void test_corrupt_block(const model *m, const run_result *cold) {
    static run_result rd;
    cf_err err = {0};
    char bp[1024];
    block_path(10, bp, sizeof bp);
    corrupt(bp);
    cinfer_engine *e = store_engine(m, g_dir, false);
    CHECK(e && run_prompt(e, 0, NULL, &rd) == 0);
    cinfer_engine_stats sd = cinfer_engine_get_stats(e);
    cinfer_engine_destroy(e);
    struct stat st;
    fprintf(stderr, "D (block 10 corrupt): cached %d, quarantined %llu, same output: %s\n", rd.usage.cached_tokens,
            (unsigned long long)sd.store.quarantined, tl_same_tokens(&rd, cold) ? "yes" : "NO");
    CHECK(rd.usage.cached_tokens == 10 * BT && sd.store.quarantined == 1);
    CHECK(sd.prompt_tokens_computed == (uint64_t)(NP - 10 * BT));
    CHECK(tl_same_tokens(&rd, cold));
    CHECK(stat(bp, &st) == 0); /* rewritten by D's write-back */
    store_summary sm;
    CHECK(store_summarize(g_dir, time(NULL), &sm, &err) == 0 && sm.quarantined == 1);
}

/* E: healed (D wrote the recomputed blocks back) */
static void test_healed(const model *m, const run_result *cold) {
    static run_result re;
    cinfer_engine *e = store_engine(m, g_dir, false);
    CHECK(e && run_prompt(e, 0, NULL, &re) == 0);
    cinfer_engine_destroy(e);
    CHECK(re.usage.cached_tokens == WANT_CACHED && tl_same_tokens(&re, cold));
}

/* E'': the store request while another request keeps a forward pass in flight every step (asynchronous
 * scheduling): its loads are allocated while a step computes (deferred until that step is over) */
static void test_request_in_flight(const model *m, const run_result *cold) {
    static int32_t other[64];
    static run_result rbg, rbg_cold, rx;
    tl_prompt(other, 64);
    cinfer_request bg = cinfer_request_default();
    bg.prompt = other;
    bg.n_prompt = 64;
    bg.max_tokens = 300;
    bg.ignore_eos = true;
    cinfer_engine *e = store_engine(m, NULL, false);
    CHECK(e && tl_run(e, &bg, &rbg_cold) == 0);
    cinfer_engine_destroy(e);
    e = store_engine(m, g_dir, false);
    uint64_t id_bg = e ? tl_submit(e, &bg) : 0;
    struct timespec d = {0, 20 * 1000000L};
    nanosleep(&d, NULL); /* the background request is decoding */
    cinfer_request r = cinfer_request_default();
    r.prompt = g_prompt;
    r.n_prompt = NP;
    r.max_tokens = NGEN;
    r.ignore_eos = true;
    CHECK(e && tl_run(e, &r, &rx) == 0);
    memset(&rbg, 0, sizeof rbg);
    CHECK(id_bg && tl_collect(e, id_bg, &rbg) == 0);
    if (e) cinfer_engine_destroy(e);
    fprintf(stderr, "E'' (with a request in flight): cached %d, same output: %s, background same: %s\n",
            rx.usage.cached_tokens, tl_same_tokens(&rx, cold) ? "yes" : "NO",
            tl_same_tokens(&rbg, &rbg_cold) ? "yes" : "NO");
    CHECK(rx.usage.cached_tokens == WANT_CACHED && tl_same_tokens(&rx, cold));
    CHECK(tl_same_tokens(&rbg, &rbg_cold));
}

/* E': the same with synchronous scheduling (no forward pass in flight while loading) */
static void test_sync_scheduling(const model *m, const run_result *cold) {
    cinfer_engine *e = store_engine(m, g_dir, true);
    static run_result rg;
    CHECK(e && run_prompt(e, 0, NULL, &rg) == 0);
    cinfer_engine_destroy(e);
    CHECK(rg.usage.cached_tokens == WANT_CACHED && tl_same_tokens(&rg, cold));
}

/* F: unusable directory -> served without a store */
static void test_unusable_dir(const model *m, const run_result *cold) {
    cinfer_engine *e = store_engine(m, "/proc/cinfer-no-such/store", false);
    run_result rf;
    CHECK(e && run_prompt(e, 0, NULL, &rf) == 0);
    if (e) {
        cinfer_engine_stats sf = cinfer_engine_get_stats(e);
        CHECK(!sf.store.enabled && sf.store.degraded == 1 && tl_same_tokens(&rf, cold));
        cinfer_engine_destroy(e);
    }
}

int main(void) {
    model *m;
    cf_err err = {0};
    if (model_load(shared_path("models/stories260K.gguf"), &m, &err)) return tu_missing_fixture(err.msg);
    g_m = m;
    g_tp = pool_create(1);
    tl_prompt(g_prompt, NP);
    if (!test_scratch_path(g_dir, sizeof g_dir, "engine-store")) {
        fprintf(stderr, "cannot make a scratch directory\n");
        return 1;
    }
    static run_result cold;

    /* reference: no store */
    cinfer_engine *e = store_engine(m, NULL, false);
    CHECK(e && run_prompt(e, 0, NULL, &cold) == 0);
    cinfer_engine_destroy(e);
    test_processes(&cold);

    test_cold_write(m, &cold);
    test_store_hit(m, &cold);
    test_other_model();
    test_corrupt_block(m, &cold);
    test_healed(m, &cold);
    test_request_in_flight(m, &cold);
    test_sync_scheduling(m, &cold);
    test_unusable_dir(m, &cold);

    test_scratch_remove(g_dir);
    test_fifo_object(&cold);
    test_hung_store(&cold);
    pool_destroy(g_tp);
    model_free(m);
    return test_finish();
}
