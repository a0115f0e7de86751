/* test_store_gc.c - retention, capacity and failure behaviour of the store:
 *  - expiry by traffic class with the injectable clock: objects written
 *    through the async store (agent, chat, default) are all kept by a GC at
 *    +23 h; default goes at +1 d, agent at +3 d, chat at +7 d
 *    (CINFER_STORE_CLOCK_OFFSET moves the store's clock);
 *  - quota: LRU eviction removes the least recently used objects first, and
 *    a load refreshes an object's access time (touch);
 *  - concurrent GC passes in forked processes delete each object once and
 *    fail nothing;
 *  - lookup + load through the I/O threads (a chain stops at the first
 *    missing object);
 *  - degradation: a directory that cannot be created fails store_open with a
 *    message; a read-only mount opens read-only (writes dropped and counted,
 *    reads still hit); a full filesystem (a 256 KiB tmpfs) turns ENOSPC into a
 *    degraded, counted state without blocking. Mount-based cases are skipped
 *    with a message when mounting is not permitted. */
#include <errno.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>

#include "store/store.h"
#include "store/store_gc.h"
#include "store_testlib.h"

static store *open_store(const char *dir, int64_t quota, cf_err *err) {
    store_config c = {.dir = dir,
                      .block_tokens = ST_BT,
                      .payload_bytes = ST_PAYLOAD,
                      .quota_bytes = quota,
                      .gc_interval_s = -1,
                      .write_slots = 8};
    memset(c.fingerprint, 0xF1, sizeof c.fingerprint);
    store *s = NULL;
    if (store_open(&c, &s, err)) return NULL;
    return s;
}

/* Polls until n write completions arrived (or 10 s); returns how many were ok. */
static int wait_writes(store *s, int n) {
    int seen = 0, ok = 0;
    for (int spin = 0; seen < n && spin < 10000; spin++) {
        store_event ev[16];
        int k = store_poll(s, ev, 16);
        for (int i = 0; i < k; i++)
            if (!ev[i].chain) {
                seen++;
                ok += ev[i].ok;
            }
        if (!k) usleep(1000);
    }
    return ok;
}

static uint64_t objects_in(const char *dir, int64_t now) {
    store_summary sm;
    cf_err err;
    return store_summarize(dir, now, &sm, &err) == 0 ? sm.objects : 0;
}

static void test_expiry_by_class(void) {
    char dir[512];
    st_dir(dir, sizeof dir, "store-exp");
    cf_err err = {0};
    unsetenv("CINFER_STORE_CLOCK_OFFSET");
    store *s = open_store(dir, 0, &err);
    CHECKF(s != NULL, "%s", err.msg);
    if (!s) return;
    static st_obj o[9];
    int cls[9];
    for (int i = 0; i < 9; i++) {
        st_obj_make(&o[i], (uint32_t)i);
        cls[i] = i % 3; /* default, chat, agent */
        CHECK(store_write(s, o[i].key, o[i].parent, o[i].tokens, cls[i], o[i].payload, (uint64_t)i) == 0);
        if (i % 8 == 7) wait_writes(s, 8); /* 8 write slots */
    }
    CHECK(wait_writes(s, 1) == 1);
    store_stats st;
    store_get_stats(s, &st);
    CHECK(st.objects_written == 9 && st.writes_dropped == 0);
    store_close(s);
    int64_t t0 = time(NULL);
    /* expected survivors per offset: +23h all 9; +1d+60s: chat+agent (6); +3d+60s: chat (3); +7d+60s: none */
    const char *offsets[] = {"23h", "86460", "259260", "604860"};
    const uint64_t left[] = {9, 6, 3, 0};
    for (int k = 0; k < 4; k++) {
        setenv("CINFER_STORE_CLOCK_OFFSET", offsets[k], 1);
        s = open_store(dir, 0, &err);
        CHECKF(s != NULL, "%s", err.msg);
        if (!s) break;
        CHECK(store_now(s) >= t0 + (k == 0 ? 23 * 3600 : 0));
        CHECK(store_gc_now(s, &err) == 0);
        uint64_t n = objects_in(dir, store_now(s));
        CHECKF(n == left[k], "offset %s: %llu objects left, expected %llu", offsets[k], (unsigned long long)n,
               (unsigned long long)left[k]);
        if (k == 2)
            for (int i = 0; i < 9; i++) CHECK(st_exists(dir, o[i].key) == (cls[i] == STORE_CLASS_CHAT));
        store_close(s);
    }
    unsetenv("CINFER_STORE_CLOCK_OFFSET");
    setenv("CINFER_STORE_CLOCK_OFFSET", "soon", 1);
    CHECK(open_store(dir, 0, &err) == NULL && strstr(err.msg, "CINFER_STORE_CLOCK_OFFSET"));
    unsetenv("CINFER_STORE_CLOCK_OFFSET");
    int64_t r[STORE_N_CLASSES];
    CHECK(store_retention_parse("agent=3d,chat=7d,default=1d", r, NULL, &err) == 0 && r[STORE_CLASS_AGENT] == 259200 &&
          r[STORE_CLASS_CHAT] == 604800 && r[STORE_CLASS_DEFAULT] == 86400);
    CHECK(store_retention_parse("chat=90m", r, NULL, &err) == 0 && r[STORE_CLASS_CHAT] == 5400 &&
          r[STORE_CLASS_AGENT] == 259200);
    CHECK(store_retention_parse("bulk=1d", r, NULL, &err) == -1 && strstr(err.msg, "bulk"));
    CHECK(store_retention_parse("chat=7x", r, NULL, &err) == -1);
    int64_t swa = -1;
    CHECK(store_retention_parse("chat=1d", r, &swa, &err) == 0 && swa == 0); /* snapshots not stored */
    CHECK(store_retention_parse("swa=10m,agent=1d", r, &swa, &err) == 0 && swa == 600 &&
          r[STORE_CLASS_AGENT] == 86400 && r[STORE_CLASS_CHAT] == 604800);
    CHECK(store_retention_parse("swa=10m", r, NULL, &err) == -1 && strstr(err.msg, "swa"));
    CHECK(store_retention_parse("swa=0s", r, &swa, &err) == -1);
    st_rmrf(dir);
}

static void test_lru_quota(void) {
    char dir[512];
    st_dir(dir, sizeof dir, "store-lru");
    cf_err err;
    CHECK(store_fs_prepare(dir, &err) == 0);
    int64_t t0 = time(NULL);
    static st_obj o[10];
    for (int i = 0; i < 10; i++) {
        st_obj_make(&o[i], (uint32_t)(100 + i));
        CHECK(st_publish(dir, &o[i], 0, t0 + i, t0 + 100000) == STORE_PUB_WRITTEN); /* atime = t0 + i */
    }
    /* a load of object 2 at t0 + 50 refreshes it (touch interval 0 here) */
    uint8_t hdr[1024], dst[ST_PAYLOAD];
    uint64_t got;
    store_expect x = st_expect(&o[2]);
    CHECK(store_fs_load(dir, &x, hdr, dst, t0 + 50, 0, &got, &err) == STORE_LOAD_HIT);
    /* a load within the touch interval does not */
    x = st_expect(&o[3]);
    CHECK(store_fs_load(dir, &x, hdr, dst, t0 + 50, 600, &got, &err) == STORE_LOAD_HIT);
    int64_t obj = store_header_len(ST_BT) + ST_PAYLOAD;
    store_gc_result r;
    CHECK(store_gc(dir, t0 + 60, 5 * obj, &r, &err) == 0);
    CHECK(r.objects == 10 && r.deleted_lru == 5 && r.deleted_expired == 0 && r.bytes_after == (uint64_t)(5 * obj));
    /* evicted: the five oldest by access time: 0, 1, 3, 4, 5; kept: 2 (touched), 6..9 */
    for (int i = 0; i < 10; i++) {
        bool kept = i == 2 || i >= 6;
        CHECKF(st_exists(dir, o[i].key) == kept, "object %d %s", i, kept ? "evicted" : "kept");
    }
    CHECK(store_gc(dir, t0 + 60, 5 * obj, &r, &err) == 0 && r.deleted_lru == 0);
    st_rmrf(dir);
}

static void test_concurrent_gc(void) {
    char dir[512];
    st_dir(dir, sizeof dir, "store-cgc");
    cf_err err;
    CHECK(store_fs_prepare(dir, &err) == 0);
    int64_t t0 = time(NULL);
    for (int i = 0; i < 60; i++) {
        st_obj o;
        st_obj_make(&o, (uint32_t)(500 + i));
        CHECK(st_publish(dir, &o, 0, t0 + i, i < 30 ? t0 + 10 : t0 + 100000) == STORE_PUB_WRITTEN);
    }
    int64_t obj = store_header_len(ST_BT) + ST_PAYLOAD;
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pids[4];
    for (int k = 0; k < 4; k++) {
        pids[k] = fork();
        if (pids[k] == 0) {
            store_gc_result r;
            cf_err e2;
            int rc = store_gc(dir, t0 + 20, 20 * obj, &r, &e2);
            uint64_t msg[3] = {r.deleted_expired, r.deleted_lru, rc == 0 && r.errors == 0};
            ssize_t w = write(fds[1], msg, sizeof msg);
            _exit(w == (ssize_t)sizeof msg ? 0 : 1);
        }
    }
    close(fds[1]);
    uint64_t expired = 0, lru = 0, clean = 0, msg[3];
    while (read(fds[0], msg, sizeof msg) == (ssize_t)sizeof msg) {
        expired += msg[0];
        lru += msg[1];
        clean += msg[2];
    }
    close(fds[0]);
    for (int k = 0; k < 4; k++) waitpid(pids[k], NULL, 0);
    uint64_t left = objects_in(dir, t0 + 20);
    fprintf(stderr, "concurrent GC: 4 passes deleted %llu expired, %llu LRU; %llu left\n", (unsigned long long)expired,
            (unsigned long long)lru, (unsigned long long)left);
    CHECK(clean == 4);
    CHECK(expired == 30); /* each expired object deleted exactly once overall */
    CHECK(left <= 20 && left >= 1); /* quota met; concurrent passes may overshoot a little */
    st_rmrf(dir);
}

static void test_chain(void) {
    char dir[512];
    st_dir(dir, sizeof dir, "store-chain");
    cf_err err;
    store *s = open_store(dir, 0, &err);
    CHECKF(s != NULL, "%s", err.msg);
    if (!s) return;
    static st_obj o[5];
    /* a chain: parent of i is key of i-1 */
    for (int i = 0; i < 5; i++) {
        st_obj_make(&o[i], (uint32_t)(700 + i));
        if (i > 0) memcpy(o[i].parent, o[i - 1].key, 32);
        else memset(o[i].parent, 0, 32);
    }
    for (int i = 0; i < 5; i++)
        if (i != 3) CHECK(store_write(s, o[i].key, i ? o[i].parent : NULL, o[i].tokens, 1, o[i].payload, 0) == 0);
    CHECK(wait_writes(s, 4) == 4);
    store_chain *ch = store_chain_new(s, 5);
    for (int i = 0; i < 5; i++) {
        memcpy(ch->keys[i], o[i].key, 32);
        memcpy(ch->tokens + i * ST_BT, o[i].tokens, sizeof o[i].tokens);
    }
    static uint8_t dst[5][ST_PAYLOAD];
    store_submit_lookup(s, ch);
    store_event ev;
    int spin = 0;
    while (store_poll(s, &ev, 1) == 0 && spin++ < 10000) usleep(1000);
    CHECK(ev.chain == ch && ch->n_found == 3); /* stops at the missing object 3 */
    for (int i = 0; i < 3; i++) ch->dst[i] = dst[i];
    store_submit_load(s, ch, 3);
    spin = 0;
    while (store_poll(s, &ev, 1) == 0 && spin++ < 10000) usleep(1000);
    CHECK(ev.chain == ch && ch->n_loaded == 3);
    for (int i = 0; i < 3; i++) CHECK(!memcmp(dst[i], o[i].payload, ST_PAYLOAD));
    store_chain_free(ch);
    store_stats st;
    store_get_stats(s, &st);
    CHECK(st.hit_blocks == 3 && st.miss_blocks == 1 && st.loads == 1 &&
          st.bytes_read == 3 * (uint64_t)(store_header_len(ST_BT) + ST_PAYLOAD));
    uint64_t lat = 0;
    for (int b = 0; b < STORE_LATENCY_BUCKETS; b++) lat += st.load_latency[b];
    CHECK(lat == 1);
    store_close(s);
    st_rmrf(dir);
}

static void test_degrade(void) {
    cf_err err = {0};
    store *s = open_store("/proc/cinfer-no-such/store", 0, &err);
    CHECK(s == NULL && strstr(err.msg, "cannot create"));
    fprintf(stderr, "nonexistent: %s\n", err.msg);

    char mnt[512];
    st_dir(mnt, sizeof mnt, "store-mnt");
    CHECK(mkdir(mnt, 0755) == 0);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=256k") != 0) {
        fprintf(stderr, "SKIP read-only and ENOSPC cases: cannot mount a tmpfs (%s)\n", strerror(errno));
        st_rmrf(mnt);
        return;
    }
    /* ENOSPC: 256 KiB hold fewer than 64 objects of ~4.3 KiB */
    s = open_store(mnt, 0, &err);
    CHECKF(s != NULL, "%s", err.msg);
    static st_obj o[100];
    int queued = 0, ok = 0;
    for (int i = 0; s && i < 100; i++) {
        st_obj_make(&o[i], (uint32_t)(900 + i));
        int q = store_write(s, o[i].key, o[i].parent, o[i].tokens, 0, o[i].payload, 0) == 0;
        queued += q;
        if (q) ok += wait_writes(s, 1);
    }
    if (s) {
        store_stats st;
        store_get_stats(s, &st);
        fprintf(stderr, "ENOSPC: %d queued, %d written, %llu write errors, %llu dropped, degraded %llu, writable %d\n",
                queued, ok, (unsigned long long)st.write_errors, (unsigned long long)st.writes_dropped,
                (unsigned long long)st.degraded, st.writable);
        CHECK(ok > 10 && ok < 100);
        CHECK(st.write_errors >= 1 && st.degraded == 1 && !st.writable);
        CHECK(st.writes_dropped >= 1 && st.writes_dropped + (uint64_t)queued == 100);
        char objs[600];
        snprintf(objs, sizeof objs, "%s/objects", mnt);
        CHECK(st_count_files(objs, STORE_SUFFIX_TMP) == 0); /* failed writes leave no temporaries */
        store_close(s);
    }
    /* read-only: reads still hit, writes are dropped */
    if (mount("tmpfs", mnt, "tmpfs", MS_REMOUNT | MS_RDONLY, "size=256k") != 0) {
        fprintf(stderr, "SKIP read-only case: remount failed (%s)\n", strerror(errno));
    } else {
        s = open_store(mnt, 0, &err);
        CHECKF(s != NULL, "%s", err.msg);
        if (s) {
            store_stats st;
            store_get_stats(s, &st);
            CHECK(st.enabled && !st.writable && st.degraded == 1);
            CHECK(store_write(s, o[0].key, o[0].parent, o[0].tokens, 0, o[0].payload, 0) == -1);
            store_chain *ch = store_chain_new(s, 1);
            memcpy(ch->keys[0], o[0].key, 32);
            memcpy(ch->parent0, o[0].parent, 32);
            memcpy(ch->tokens, o[0].tokens, sizeof o[0].tokens);
            static uint8_t dst[ST_PAYLOAD];
            ch->dst[0] = dst;
            store_submit_lookup(s, ch);
            store_event ev;
            int spin = 0;
            while (store_poll(s, &ev, 1) == 0 && spin++ < 10000) usleep(1000);
            store_submit_load(s, ch, ch->n_found);
            spin = 0;
            while (store_poll(s, &ev, 1) == 0 && spin++ < 10000) usleep(1000);
            CHECK(ch->n_loaded == 1 && !memcmp(dst, o[0].payload, ST_PAYLOAD));
            store_chain_free(ch);
            store_get_stats(s, &st);
            CHECK(st.writes_dropped == 1 && st.hit_blocks == 1);
            store_close(s);
        }
    }
    CHECK(umount(mnt) == 0);
    st_rmrf(mnt);
}

int main(void) {
    test_expiry_by_class();
    test_lru_quota();
    test_concurrent_gc();
    test_chain();
    test_degrade();
    return test_finish();
}
