/* store.c - see store.h. One mutex guards the queues, the free write slots,
 * the completion lists, the writable state, the live-thread count and the
 * counters; it is never held across a syscall on an object. Chains and write
 * slots are intrusive lists. An abandoned store (store_stop's deadline passed)
 * is linked into g_abandoned and never freed. */
#include "store/store.h"

#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "store/store_fs.h"
#include "store/store_gc.h"

typedef struct store_wslot {
    uint8_t key[STORE_KEY_BYTES], parent[STORE_KEY_BYTES];
    int32_t cls;
    const void *payload;
    uint64_t tag;
    bool ok;
    int32_t *tokens;
    struct store_wslot *next;
} store_wslot;

struct store {
    char *dir;
    store_config cfg;
    int64_t clock_offset;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* I/O threads wait for work */
    pthread_cond_t gc_cv; /* the GC thread waits for its period or a kick */
    store_chain *cq_head, *cq_tail, *done_chains;
    store_wslot *wq_head, *wq_tail, *wfree, *done_writes;
    store_wslot *slots;
    int32_t *slot_tokens;
    pthread_t *threads;
    int n_threads;
    pthread_t gc_thread;
    bool gc_started, stop, stopped, gc_kick;
    bool writable;
    int64_t write_retry_at; /* real seconds */
    store_stats st;
    store_mac_key mac_key; /* valid when cfg.mac_key != NULL (then it points here) */
    pthread_cond_t exit_cv; /* CLOCK_MONOTONIC: store_stop waits for n_live == 0 */
    bool exit_cv_ok; /* exit_cv initialised */
    void (*test_hook)(void); /* store_test_io_hook as it was at open */
    int n_live; /* I/O and GC threads not yet returned */
    int in_notify; /* threads inside cfg.notify (the owner's code: never abandoned mid-call) */
    bool abandoned;
    struct store *abandoned_next;
};

/* Stores given up on by store_stop: kept reachable (never freed) so a thread that comes back from a stuck
 * syscall finds valid memory, and leak checkers do not flag them. */
static pthread_mutex_t g_abandoned_mu = PTHREAD_MUTEX_INITIALIZER;
static store *g_abandoned;

void (*store_test_io_hook)(void);

static void store_call_test_hook(void *ctx);

static void st_lock(store *s) { pthread_mutex_lock(&s->mu); }
static void st_unlock(store *s) { pthread_mutex_unlock(&s->mu); }

int store_fingerprint(const uint8_t model_fp[STORE_KEY_BYTES], uint32_t block_tokens, const int32_t *group_desc,
                      int n_ints, const char *dtype, uint8_t out[STORE_KEY_BYTES], cf_err *err) {
    static const char tag[] = "cinfer-store-fp-v1";
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md) return cf_fail(err, "store fingerprint: out of memory");
    uint8_t b[4];
    int ok = EVP_DigestInit_ex(md, EVP_sha256(), NULL) && EVP_DigestUpdate(md, tag, sizeof tag) &&
             EVP_DigestUpdate(md, model_fp, STORE_KEY_BYTES);
    for (int i = -1; ok && i < n_ints; i++) {
        uint32_t v = i < 0 ? block_tokens : (uint32_t)group_desc[i];
        for (int k = 0; k < 4; k++) b[k] = (uint8_t)(v >> (8 * k));
        ok = EVP_DigestUpdate(md, b, 4);
    }
    ok = ok && EVP_DigestUpdate(md, dtype, strlen(dtype) + 1);
    unsigned int len = 0;
    ok = ok && EVP_DigestFinal_ex(md, out, &len) && len == STORE_KEY_BYTES;
    EVP_MD_CTX_free(md);
    return ok ? 0 : cf_fail(err, "store fingerprint: SHA-256 failed");
}

int64_t store_now(const store *s) { return (int64_t)time(NULL) + s->clock_offset; }

static void store_call_test_hook(void *ctx) {
    store *s = ctx;
    s->test_hook();
}

/* ---- chains ---- */

static void store_chain_finish(store *s, store_chain *ch);

store_chain *store_chain_new(const store *s, int32_t n) {
    if (n <= 0) return NULL;
    size_t bt = s->cfg.block_tokens;
    store_chain *ch = calloc(1, sizeof *ch);
    if (!ch) return NULL;
    ch->n = n;
    ch->keys = malloc((size_t)n * STORE_KEY_BYTES);
    ch->tokens = malloc((size_t)n * bt * sizeof(int32_t));
    ch->dst = calloc((size_t)n, sizeof(void *));
    ch->ids = calloc((size_t)n, sizeof(int32_t));
    ch->fds = malloc((size_t)n * sizeof(int));
    if (!ch->keys || !ch->tokens || !ch->dst || !ch->ids || !ch->fds) {
        store_chain_free(ch);
        return NULL;
    }
    for (int32_t i = 0; i < n; i++) ch->fds[i] = -1;
    return ch;
}

void store_chain_free(store_chain *ch) {
    if (!ch) return;
    if (ch->fds)
        for (int32_t i = 0; i < ch->n; i++)
            if (ch->fds[i] >= 0) close(ch->fds[i]);
    free(ch->keys);
    free(ch->tokens);
    free(ch->dst);
    free(ch->ids);
    free(ch->fds);
    free(ch);
}

static void store_enqueue_chain(store *s, store_chain *ch) {
    st_lock(s);
    ch->next = NULL;
    ch->next_idx = ch->inflight = 0;
    ch->fail_at = INT32_MAX;
    ch->end = ch->phase == STORE_CHAIN_LOOKUP ? ch->n : ch->n_load;
    if (s->stop || ch->end == 0) { /* cancelled, or nothing to do: completes with nothing */
        ch->end = 0;
        store_chain_finish(s, ch);
    } else {
        if (s->cq_tail) s->cq_tail->next = ch;
        else s->cq_head = ch;
        s->cq_tail = ch;
        pthread_cond_signal(&s->cv);
    }
    st_unlock(s);
}

void store_submit_lookup(store *s, store_chain *ch) {
    ch->phase = STORE_CHAIN_LOOKUP;
    ch->n_found = ch->n_load = ch->n_loaded = 0;
    ch->t_submit = time_now();
    st_lock(s);
    s->st.lookups++;
    st_unlock(s);
    store_enqueue_chain(s, ch);
}

void store_submit_load(store *s, store_chain *ch, int32_t n) {
    ch->phase = STORE_CHAIN_LOAD;
    ch->n_load = n < ch->n_found ? n : ch->n_found;
    ch->n_loaded = 0;
    store_enqueue_chain(s, ch);
}

/* One block of a chain phase, on an I/O thread with no lock held. Returns
 * true on success; *res_out gets the load result. */
static bool store_lookup_one(store *s, store_chain *ch, int32_t i, uint64_t *read_errors, uint64_t *quarantined) {
    int e = 0;
    ch->fds[i] = store_fs_open(s->dir, ch->keys[i], &e);
    if (ch->fds[i] >= 0) return true;
    if (e == STORE_ENOTREG) (*quarantined)++; /* a FIFO, symlink, ... under the object's name: moved away */
    else if (e != ENOENT && e != ENOTDIR) (*read_errors)++;
    return false;
}

static store_load_result store_load_one(store *s, store_chain *ch, int32_t i, uint8_t *hdr, uint64_t *bytes) {
    uint32_t bt = s->cfg.block_tokens;
    store_expect x = {
        .fingerprint = s->cfg.fingerprint,
        .key = ch->keys[i],
        .parent = i == 0 ? ch->parent0 : ch->keys[i - 1],
        .tokens = ch->tokens + (size_t)i * bt,
        .n_tokens = bt,
        .payload_len = s->cfg.payload_bytes,
        .mac_key = s->cfg.mac_key,
    };
    int fd = ch->fds[i];
    ch->fds[i] = -1;
    cf_err err = {0};
    store_load_result res =
        store_fs_load_fd(s->dir, fd, &x, hdr, ch->dst[i], store_now(s), s->cfg.touch_interval_s, bytes, &err);
    if (res == STORE_LOAD_QUARANTINED) LOG_WARN("%s", err.msg);
    else if (res == STORE_LOAD_ERROR) LOG_DEBUG("%s", err.msg);
    return res;
}

/* mu held: the phase's results once every handed-out block is done. */
static void store_chain_finish(store *s, store_chain *ch) {
    int32_t good = ch->fail_at < ch->end ? ch->fail_at : ch->end;
    if (ch->phase == STORE_CHAIN_LOOKUP) {
        ch->n_found = good;
        if (good < ch->n) s->st.miss_blocks++;
    } else {
        uint32_t bt = s->cfg.block_tokens;
        ch->n_loaded = good;
        s->st.hit_blocks += (uint64_t)good;
        s->st.hit_tokens += (uint64_t)good * bt;
        double lat_ms = (time_now() - ch->t_submit) * 1e3;
        int b = 0;
        while (b < STORE_LATENCY_BUCKETS - 1 && lat_ms > 0.25 * (double)(1 << b)) b++;
        s->st.loads++;
        s->st.load_seconds += lat_ms / 1e3;
        s->st.load_latency[b]++;
    }
    ch->next = s->done_chains;
    s->done_chains = ch;
}

/* mu held: the chain at the queue head hands out its next block index. */
static int32_t store_chain_take(store *s, store_chain *ch) {
    int32_t i = ch->next_idx++;
    ch->inflight++;
    if (ch->next_idx >= ch->end) {
        s->cq_head = ch->next;
        if (!s->cq_head) s->cq_tail = NULL;
        ch->next = NULL;
    }
    return i;
}

/* mu held on entry and exit: runs block i of ch (several threads work on one
 * chain: blocks are handed out in order, and after a failure at index j the
 * blocks beyond j are skipped). Returns true when the chain completed. */
static bool store_chain_step(store *s, store_chain *ch, int32_t i, uint8_t *hdr) {
    bool skip = i > ch->fail_at;
    st_unlock(s);
    bool ok = false;
    uint64_t read_errors = 0, bytes = 0, quarantined = 0;
    store_load_result res = STORE_LOAD_MISS;
    if (!skip && s->cfg.io_hook) s->cfg.io_hook(s->cfg.io_hook_ctx);
    if (!skip && ch->phase == STORE_CHAIN_LOOKUP) ok = store_lookup_one(s, ch, i, &read_errors, &quarantined);
    else if (!skip && hdr) ok = (res = store_load_one(s, ch, i, hdr, &bytes)) == STORE_LOAD_HIT;
    st_lock(s);
    if (!ok && i < ch->fail_at) ch->fail_at = i;
    s->st.read_errors += read_errors;
    s->st.quarantined += quarantined;
    if (ch->phase == STORE_CHAIN_LOAD && !skip) {
        s->st.bytes_read += bytes;
        s->st.quarantined += res == STORE_LOAD_QUARANTINED;
        s->st.expired += res == STORE_LOAD_EXPIRED;
        s->st.read_errors += res == STORE_LOAD_ERROR;
    }
    ch->inflight--;
    if (ch->next_idx < ch->end || ch->inflight > 0) return false;
    store_chain_finish(s, ch);
    return true;
}

/* ---- writes ---- */

/* ENOENT / ESTALE: the store directory (or objects/) was removed or the
 * mount went away underneath a running server; fan-out directories are made
 * on demand and never removed, so a missing path is not a per-object race. */
static bool store_fatal_write_errno(int e) {
    return e == ENOSPC || e == EDQUOT || e == EROFS || e == EACCES || e == EPERM || e == EIO || e == ENOENT ||
           e == ESTALE;
}

/* mu held. */
static void store_disable_writes(store *s, const char *why) {
    s->write_retry_at = (int64_t)time(NULL) + STORE_WRITE_BACKOFF_S;
    if (!s->writable) return;
    s->writable = false;
    s->st.writable = false;
    s->st.degraded++;
    LOG_WARN("store %s: writes disabled for %d s: %s", s->dir, STORE_WRITE_BACKOFF_S, why);
}

int store_write(store *s, const uint8_t key[STORE_KEY_BYTES], const uint8_t *parent, const int32_t *tokens,
                int32_t traffic_class, const void *payload, uint64_t tag) {
    st_lock(s);
    if (!s->writable && (int64_t)time(NULL) >= s->write_retry_at) {
        s->writable = true; /* try again; the next failure disables writes again */
        s->st.writable = true;
        LOG_INFO("store %s: retrying writes", s->dir);
    }
    store_wslot *w = s->writable && !s->stop ? s->wfree : NULL;
    if (!w) {
        s->st.writes_dropped++;
        st_unlock(s);
        return -1;
    }
    s->wfree = w->next;
    memcpy(w->key, key, STORE_KEY_BYTES);
    if (parent) memcpy(w->parent, parent, STORE_KEY_BYTES);
    else memset(w->parent, 0, STORE_KEY_BYTES);
    memcpy(w->tokens, tokens, s->cfg.block_tokens * sizeof(int32_t));
    w->cls = traffic_class >= 0 && traffic_class < STORE_N_CLASSES ? traffic_class : STORE_CLASS_DEFAULT;
    w->payload = payload;
    w->tag = tag;
    w->ok = false;
    w->next = NULL;
    if (s->wq_tail) s->wq_tail->next = w;
    else s->wq_head = w;
    s->wq_tail = w;
    s->st.writes_in_flight++;
    pthread_cond_signal(&s->cv);
    st_unlock(s);
    return 0;
}

static void store_run_write(store *s, store_wslot *w) {
    int64_t now = store_now(s);
    store_obj_hdr h = {
        .n_tokens = s->cfg.block_tokens,
        .traffic_class = w->cls,
        .created = now,
        .expires = store_expiry_for(now, w->cls, s->cfg.retention_s),
        .payload_len = s->cfg.payload_bytes,
    };
    memcpy(h.fingerprint, s->cfg.fingerprint, STORE_KEY_BYTES);
    memcpy(h.key, w->key, STORE_KEY_BYTES);
    memcpy(h.parent, w->parent, STORE_KEY_BYTES);
    int e = 0;
    cf_err err = {0};
    bool writable;
    st_lock(s);
    writable = s->writable;
    st_unlock(s);
    if (writable && s->cfg.io_hook) s->cfg.io_hook(s->cfg.io_hook_ctx);
    store_pub_result r =
        writable ? store_fs_publish(s->dir, &h, w->tokens, w->payload, s->cfg.mac_key, s->cfg.sync, now, &e, &err)
                 : STORE_PUB_ERROR;
    st_lock(s);
    w->ok = r != STORE_PUB_ERROR;
    if (r == STORE_PUB_WRITTEN) {
        s->st.objects_written++;
        s->st.bytes_written += store_header_len(h.n_tokens) + h.payload_len;
    } else if (r == STORE_PUB_EXISTS) {
        s->st.writes_skipped++;
    } else if (!writable) {
        s->st.writes_dropped++;
    } else {
        s->st.write_errors++;
        if (store_fatal_write_errno(e)) store_disable_writes(s, err.msg);
        else LOG_DEBUG("%s", err.msg);
        if (e == ENOSPC || e == EDQUOT) {
            s->gc_kick = true;
            pthread_cond_signal(&s->gc_cv);
        }
    }
    st_unlock(s);
}

/* ---- threads ---- */

static void *store_io_main(void *arg) {
    store *s = arg;
    uint8_t *hdr = malloc(store_header_len(s->cfg.block_tokens));
    st_lock(s);
    for (;;) {
        while (!s->stop && !s->cq_head && !s->wq_head) pthread_cond_wait(&s->cv, &s->mu);
        bool done = false;
        if (s->cq_head) {
            store_chain *ch = s->cq_head;
            int32_t i = store_chain_take(s, ch);
            if (s->cq_head) pthread_cond_signal(&s->cv); /* more blocks: let another thread help */
            done = store_chain_step(s, ch, i, hdr);
        } else if (s->wq_head) {
            store_wslot *w = s->wq_head;
            s->wq_head = w->next;
            if (!s->wq_head) s->wq_tail = NULL;
            st_unlock(s);
            store_run_write(s, w);
            st_lock(s);
            w->next = s->done_writes;
            s->done_writes = w;
            s->st.writes_in_flight--;
            done = true;
        } else {
            break; /* stop, and nothing queued */
        }
        if (s->abandoned) break; /* back from a syscall past the deadline: the owner is gone */
        if (done && s->cfg.notify) {
            s->in_notify++;
            st_unlock(s);
            s->cfg.notify(s->cfg.notify_ctx);
            st_lock(s);
            if (--s->in_notify == 0) pthread_cond_broadcast(&s->exit_cv);
        }
    }
    s->n_live--;
    pthread_cond_broadcast(&s->exit_cv);
    st_unlock(s);
    free(hdr);
    return NULL;
}

int store_gc_now(store *s, cf_err *err) {
    store_gc_result r;
    int rc = store_gc(s->dir, store_now(s), s->cfg.quota_bytes, &r, err);
    st_lock(s);
    s->st.gc_runs++;
    s->st.gc_deleted_expired += r.deleted_expired;
    s->st.gc_deleted_lru += r.deleted_lru;
    st_unlock(s);
    if (rc == 0 && (r.deleted_expired || r.deleted_lru))
        LOG_INFO("store %s: GC deleted %llu expired and %llu least recently used objects (%llu bytes)", s->dir,
                 (unsigned long long)r.deleted_expired, (unsigned long long)r.deleted_lru,
                 (unsigned long long)r.bytes_deleted);
    return rc;
}

static void *store_gc_main(void *arg) {
    store *s = arg;
    unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL);
    st_lock(s);
    while (!s->stop) {
        double period = s->cfg.gc_interval_s * (0.75 + 0.5 * (double)(rand_r(&seed) % 1000) / 1000.0);
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += (time_t)period;
        while (!s->stop && !s->gc_kick)
            if (pthread_cond_timedwait(&s->gc_cv, &s->mu, &dl) == ETIMEDOUT) break;
        if (s->stop) break;
        s->gc_kick = false;
        st_unlock(s);
        cf_err err;
        if (store_gc_now(s, &err)) LOG_WARN("%s", err.msg);
        st_lock(s);
    }
    s->n_live--;
    pthread_cond_broadcast(&s->exit_cv);
    st_unlock(s);
    return NULL;
}

/* ---- open / close ---- */

static bool store_probe_write(const char *dir, char *why, size_t cap) {
    char p[4200];
    snprintf(p, sizeof p, "%s/objects/.probe.%d", dir, (int)getpid());
    FILE *f = fopen(p, "w");
    if (!f) {
        snprintf(why, cap, "%s", strerror(errno));
        return false;
    }
    bool ok = fputs("probe", f) >= 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok) snprintf(why, cap, "%s", strerror(errno));
    unlink(p);
    return ok;
}

int store_open(const store_config *c, store **out, cf_err *err) {
    *out = NULL;
    if (!c->dir || !c->dir[0]) return cf_fail(err, "store: no directory");
    if (c->block_tokens == 0 || c->block_tokens > STORE_MAX_TOKENS || c->payload_bytes == 0)
        return cf_fail(err, "store: bad block geometry (%u tokens, %llu bytes)", c->block_tokens,
                       (unsigned long long)c->payload_bytes);
    cf_err perr = {0};
    bool prepared = store_fs_prepare(c->dir, &perr) == 0;
    char objs[4200];
    snprintf(objs, sizeof objs, "%s/objects", c->dir);
    struct stat sb;
    if (!prepared && (stat(objs, &sb) || !S_ISDIR(sb.st_mode) || access(objs, R_OK | X_OK)))
        return cf_fail(err, "%s", perr.msg);
    if (access(objs, R_OK | X_OK)) return cf_fail(err, "store: cannot read '%s': %s", objs, strerror(errno));
    store *s = calloc(1, sizeof *s);
    if (!s) return cf_fail(err, "store: out of memory");
    s->cfg = *c;
    s->dir = strdup(c->dir);
    int64_t def[STORE_N_CLASSES];
    store_retention_defaults(def);
    for (int i = 0; i < STORE_N_CLASSES; i++)
        if (s->cfg.retention_s[i] <= 0) s->cfg.retention_s[i] = def[i];
    if (s->cfg.io_threads <= 0) s->cfg.io_threads = 2;
    if (s->cfg.write_slots <= 0) s->cfg.write_slots = 64;
    if (s->cfg.touch_interval_s == 0) s->cfg.touch_interval_s = 600;
    if (s->cfg.touch_interval_s < 0) s->cfg.touch_interval_s = 0;
    if (s->cfg.gc_interval_s == 0) s->cfg.gc_interval_s = 300;
    if (s->cfg.close_timeout_ms <= 0) s->cfg.close_timeout_ms = 5000;
    if (!s->cfg.io_hook && store_test_io_hook) {
        s->test_hook = store_test_io_hook;
        s->cfg.io_hook = store_call_test_hook;
        s->cfg.io_hook_ctx = s;
    }
    if (c->mac_key) {
        s->mac_key = *c->mac_key;
        s->cfg.mac_key = &s->mac_key;
    }
    const char *off = getenv("CINFER_STORE_CLOCK_OFFSET");
    if (off && off[0]) {
        bool neg = off[0] == '-';
        int64_t v;
        if (store_parse_duration(off + neg, &v)) {
            store_close(s);
            return cf_fail(err, "CINFER_STORE_CLOCK_OFFSET='%s' is not a duration (e.g. 3d, -2h)", off);
        }
        s->clock_offset = neg ? -v : v;
    }
    s->cfg.dir = s->dir;
    s->slots = calloc((size_t)s->cfg.write_slots, sizeof *s->slots);
    s->slot_tokens = malloc((size_t)s->cfg.write_slots * c->block_tokens * sizeof(int32_t));
    s->threads = calloc((size_t)s->cfg.io_threads, sizeof *s->threads);
    if (!s->dir || !s->slots || !s->slot_tokens || !s->threads) {
        store_close(s);
        return cf_fail(err, "store: out of memory");
    }
    for (int32_t i = 0; i < s->cfg.write_slots; i++) {
        s->slots[i].tokens = s->slot_tokens + (size_t)i * c->block_tokens;
        s->slots[i].next = s->wfree;
        s->wfree = &s->slots[i];
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->gc_cv, NULL);
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) ||
        pthread_cond_init(&s->exit_cv, &ca)) {
        store_close(s); /* n_threads == 0: nothing waits on exit_cv */
        return cf_fail(err, "store: cannot create a condition variable");
    }
    s->exit_cv_ok = true;
    pthread_condattr_destroy(&ca);
    s->st.enabled = true;
    s->writable = s->st.writable = true;
    char why[256];
    if (!prepared || !store_probe_write(s->dir, why, sizeof why)) {
        st_lock(s);
        store_disable_writes(s, prepared ? why : perr.msg);
        st_unlock(s);
    }
    for (int i = 0; i < s->cfg.io_threads; i++) {
        st_lock(s);
        s->n_live++;
        st_unlock(s);
        if (pthread_create(&s->threads[i], NULL, store_io_main, s)) {
            st_lock(s);
            s->n_live--;
            st_unlock(s);
            store_close(s);
            return cf_fail(err, "store: cannot start I/O threads");
        }
        s->n_threads = i + 1;
    }
    if (s->cfg.gc_interval_s > 0) {
        st_lock(s);
        s->n_live++;
        st_unlock(s);
        if (pthread_create(&s->gc_thread, NULL, store_gc_main, s)) {
            st_lock(s);
            s->n_live--;
            st_unlock(s);
            store_close(s);
            return cf_fail(err, "store: cannot start the GC thread");
        }
        s->gc_started = true;
    }
    *out = s;
    return 0;
}

/* mu held: waits until every thread has returned or the close deadline passes; true when they all did. */
static bool store_wait_threads(store *s) {
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += s->cfg.close_timeout_ms / 1000;
    dl.tv_nsec += (long)(s->cfg.close_timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    while (s->n_live > 0)
        if (pthread_cond_timedwait(&s->exit_cv, &s->mu, &dl) == ETIMEDOUT) return s->n_live == 0;
    return true;
}

bool store_stop(store *s) {
    if (!s || s->stopped) return !s || !s->abandoned;
    if (s->n_threads || s->gc_started) {
        st_lock(s);
        s->stop = true;
        while (s->cq_head) { /* queued chains are cancelled: blocks not handed out count as missing */
            store_chain *ch = s->cq_head;
            s->cq_head = ch->next;
            ch->next = NULL;
            ch->end = ch->next_idx;
            if (ch->inflight == 0) store_chain_finish(s, ch); /* else its last worker finishes it */
        }
        s->cq_tail = NULL;
        pthread_cond_broadcast(&s->cv);
        pthread_cond_broadcast(&s->gc_cv);
        bool all = store_wait_threads(s);
        if (!all) {
            s->abandoned = true; /* from now on no thread calls notify (checked under mu) */
            while (s->in_notify > 0) pthread_cond_wait(&s->exit_cv, &s->mu); /* a call in progress is short */
        }
        int stuck = s->n_live;
        st_unlock(s);
        if (!all) {
            /* a thread is stuck in a syscall (a hung mount): do not wait for it; keep everything it may touch */
            LOG_ERROR("store %s: %d thread(s) still stuck in I/O after %d ms: abandoning them (the store's memory is "
                      "kept, not freed)",
                      s->dir, stuck, s->cfg.close_timeout_ms);
            for (int i = 0; i < s->n_threads; i++) pthread_detach(s->threads[i]);
            if (s->gc_started) pthread_detach(s->gc_thread);
            pthread_mutex_lock(&g_abandoned_mu);
            s->abandoned_next = g_abandoned;
            g_abandoned = s;
            pthread_mutex_unlock(&g_abandoned_mu);
        } else {
            for (int i = 0; i < s->n_threads; i++) pthread_join(s->threads[i], NULL);
            if (s->gc_started) pthread_join(s->gc_thread, NULL);
        }
    }
    s->stop = true;
    s->stopped = true;
    return !s->abandoned;
}

bool store_abandoned(const store *s) { return s && s->abandoned; }

void store_close(store *s) {
    if (!s) return;
    bool inited = s->threads && s->slots; /* mutex initialised only past allocation */
    if (!store_stop(s)) return; /* abandoned: a stuck thread may still use all of it */
    for (store_chain *ch = s->done_chains, *n; ch; ch = n) {
        n = ch->next;
        store_chain_free(ch);
    }
    if (inited) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
        pthread_cond_destroy(&s->gc_cv);
        if (s->exit_cv_ok) pthread_cond_destroy(&s->exit_cv);
    }
    free(s->slots);
    free(s->slot_tokens);
    free(s->threads);
    free(s->dir);
    free(s);
}

int store_poll(store *s, store_event *ev, int cap) {
    int n = 0;
    st_lock(s);
    while (n < cap && s->done_chains) {
        store_chain *ch = s->done_chains;
        s->done_chains = ch->next;
        ch->next = NULL;
        ev[n++] = (store_event){.chain = ch};
    }
    while (n < cap && s->done_writes) {
        store_wslot *w = s->done_writes;
        s->done_writes = w->next;
        ev[n++] = (store_event){.chain = NULL, .tag = w->tag, .ok = w->ok};
        w->next = s->wfree;
        s->wfree = w;
    }
    st_unlock(s);
    return n;
}

void store_get_stats(store *s, store_stats *out) {
    st_lock(s);
    *out = s->st;
    st_unlock(s);
}
