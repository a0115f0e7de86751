/* store.h - the persistent KV block store as a running service: a store
 * directory (store_fs.h), I/O threads that look up, load and write objects
 * off the engine thread, a background GC thread, degradation, counters.
 *
 * Work items and ownership:
 *  - a chain (store_chain): consecutive blocks of one sequence, by key. The
 *    caller allocates it (store_chain_new), fills keys/tokens, and submits a
 *    LOOKUP (open each object in order until the first missing one; fds kept),
 *    then - after allocating n destination buffers - a LOAD (read + verify each
 *    into its buffer, in order, stopping at the first failure). The caller
 *    owns the chain between phases and frees it (store_chain_free closes any
 *    fd still open). Destination buffers must stay valid until the LOAD
 *    completes.
 *  - a write: one object from a caller buffer that must stay unchanged until
 *    its completion is polled (the engine holds a block reference). Writes go
 *    into a fixed number of slots; with no free slot, or while the store is not
 *    writable, store_write drops the write and counts it: the caller never waits.
 * Completed work is collected with store_poll() (any order); `notify` is
 * called (no store lock held) after each completion so the owner can wake up.
 *
 * Threads: store_* functions are thread-safe (one mutex, never held during
 * I/O). I/O threads prefer chains over writes (a waiting request beats
 * write-back), and all of them work on the chain at the queue head: its
 * blocks are handed out in order, so a long chain loads in parallel; after a
 * failure at block j, blocks beyond j are skipped. store_close() finishes queued writes (so a clean shutdown
 * publishes what it computed), cancels queued chains (completed with nothing
 * found / loaded), and joins the threads - within a deadline: a thread still
 * stuck in a syscall when it passes (a hung network mount) is detached and
 * logged, and the store is abandoned, not freed (it stays reachable from a
 * static list, so a thread that returns later touches valid memory and stops).
 *
 * Authentication: with a key (store_config.mac_key) objects are written as
 * version 2 with an HMAC-SHA256 trailer, and an object without a valid MAC is
 * corrupt on load (quarantined). Without a key, v1 and v2 both load.
 *
 * Degradation: an unusable directory fails store_open (the caller goes on
 * without a store). A write error that says the store cannot take writes
 * (ENOSPC, EDQUOT, EROFS, EACCES, EPERM, EIO) disables writes for
 * STORE_WRITE_BACKOFF_S (logged once per transition, counted in `degraded`);
 * ENOSPC also wakes the GC. Read errors and corrupt objects are misses.
 *
 * Clock: store time = wall clock + an offset from CINFER_STORE_CLOCK_OFFSET
 * (a duration, optionally negative; tests only) read at open.
 *
 * Callers: src/engine/engine_store.c; tests; bench. The store sits below the
 * engine and knows nothing of it (own traffic classes and counters). */
#ifndef CINFER_STORE_STORE_H
#define CINFER_STORE_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "store/store_format.h"

#define STORE_WRITE_BACKOFF_S 30

/* Counters (store_get_stats). Load latency: load_latency[i] counts loads (one
 * per completed chain LOAD, LOOKUP submit to completion) that took
 * <= 0.25 ms * 2^i, i < STORE_LATENCY_BUCKETS - 1; the last bucket the slower
 * ones. The engine reports them as cinfer_store_stats (cinfer/engine.h). */
#define STORE_LATENCY_BUCKETS 12
typedef struct store_stats {
    bool enabled; /* opened: the directory is usable for reading */
    bool writable; /* writes are currently accepted (false while degraded) */
    uint64_t lookups;
    uint64_t hit_blocks, hit_tokens;
    uint64_t miss_blocks;
    uint64_t expired, quarantined;
    uint64_t read_errors, write_errors;
    uint64_t bytes_read, bytes_written;
    uint64_t objects_written, writes_skipped;
    uint64_t writes_dropped;
    int64_t writes_in_flight; /* queued or being written (a gauge) */
    uint64_t degraded;
    uint64_t gc_runs, gc_deleted_expired, gc_deleted_lru;
    uint64_t loads;
    double load_seconds;
    uint64_t load_latency[STORE_LATENCY_BUCKETS];
} store_stats;

typedef struct store store;

typedef struct store_config {
    const char *dir; /* copied */
    uint8_t fingerprint[STORE_KEY_BYTES]; /* store_fingerprint() */
    uint32_t block_tokens;
    uint64_t payload_bytes; /* bytes of one block */
    int64_t quota_bytes; /* 0: none */
    bool sync; /* fsync before publishing */
    int64_t retention_s[STORE_N_CLASSES]; /* 0 entries: defaults */
    int32_t io_threads; /* 0: 2 */
    int32_t write_slots; /* 0: 64 */
    int64_t touch_interval_s; /* 0: 600; < 0: touch on every load */
    int32_t gc_interval_s; /* 0: 300; < 0: no GC thread */
    int32_t close_timeout_ms; /* store_stop waits this long for its threads (0: 5000) */
    const store_mac_key *mac_key; /* NULL: objects not authenticated; copied */
    void (*io_hook)(void *ctx); /* tests: called by an I/O thread before each block's syscalls */
    void *io_hook_ctx;
    void (*notify)(void *ctx);
    void *notify_ctx;
} store_config;

typedef enum store_chain_phase { STORE_CHAIN_LOOKUP = 0, STORE_CHAIN_LOAD } store_chain_phase;

typedef struct store_chain {
    /* filled by the caller */
    int32_t n; /* blocks in the chain */
    uint8_t (*keys)[STORE_KEY_BYTES]; /* n keys (arrays allocated by store_chain_new) */
    uint8_t parent0[STORE_KEY_BYTES]; /* parent of keys[0] (zeros: first block of the sequence) */
    int32_t *tokens; /* n * block_tokens */
    void **dst; /* LOAD: destination of block i < n_load */
    int32_t *ids; /* for the caller (e.g. pool block ids) */
    void *owner; /* for the caller */
    /* results */
    store_chain_phase phase;
    int32_t n_found; /* LOOKUP: leading objects present */
    int32_t n_load; /* LOAD: how many were asked for (<= n_found) */
    int32_t n_loaded; /* LOAD: leading objects loaded and verified */
    double t_submit; /* monotonic seconds at the LOOKUP submit */
    /* internal (store mutex) */
    int *fds;
    int32_t next_idx, end, inflight, fail_at; /* blocks handed out / to do / running; first failure */
    struct store_chain *next;
} store_chain;

typedef struct store_event {
    store_chain *chain; /* a completed chain phase, or NULL for a write */
    uint64_t tag; /* write: the caller's tag */
    bool ok; /* write: published (or already present) */
} store_event;

/* Tests: when set, used as the io_hook of every store opened without one
 * (an engine's store), e.g. to make the I/O threads hang like a dead mount. */
extern void (*store_test_io_hook)(void);

/* Fingerprint written in every object: SHA-256 over "cinfer-store-fp-v1", the
 * model fingerprint, block_tokens, each KV layer group (kind, layers, floats
 * per token, window) and the element type name ("f32"). */
int store_fingerprint(const uint8_t model_fp[STORE_KEY_BYTES], uint32_t block_tokens, const int32_t *group_desc,
                      int n_ints, const char *dtype, uint8_t out[STORE_KEY_BYTES], cf_err *err);

/* Prepares the directory and starts the threads. Fails when the directory
 * cannot be made or read; a directory that exists but cannot be written opens
 * read-only (writes dropped, logged once). */
int store_open(const store_config *c, store **out, cf_err *err);
/* Finishes queued writes, cancels queued chains, joins the threads (within
 * close_timeout_ms; returns false when a thread was still stuck then and the
 * store is abandoned); the completions stay pollable. Idempotent. */
bool store_stop(store *s);
/* store_stop, then frees the store and every unpolled chain - unless it was
 * abandoned: then nothing is freed (a stuck thread may still use it). */
void store_close(store *s);
/* True once store_stop gave up on a stuck thread. */
bool store_abandoned(const store *s);

int64_t store_now(const store *s);

store_chain *store_chain_new(const store *s, int32_t n);
void store_chain_free(store_chain *ch);
void store_submit_lookup(store *s, store_chain *ch);
/* n <= ch->n_found; ch->dst[0..n) set. */
void store_submit_load(store *s, store_chain *ch, int32_t n);

/* Queues one object write; 0 queued, -1 dropped (counted). parent NULL: first block. */
int store_write(store *s, const uint8_t key[STORE_KEY_BYTES], const uint8_t *parent, const int32_t *tokens,
                int32_t traffic_class, const void *payload, uint64_t tag);

/* Moves up to cap completions into ev[]; returns how many. */
int store_poll(store *s, store_event *ev, int cap);

/* Runs a GC pass now on the calling thread (also what the GC thread runs). */
int store_gc_now(store *s, cf_err *err);

void store_get_stats(store *s, store_stats *out);

#endif
