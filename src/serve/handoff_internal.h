/* handoff_internal.h - state shared by handoff.c (the manager, headers,
 * /handoff/info, the decode side's table of received handoffs) and
 * handoff_push.c (the prefill side's pushes). Loop thread only. */
#ifndef CINFER_SERVE_HANDOFF_INTERNAL_H
#define CINFER_SERVE_HANDOFF_INTERNAL_H

#include "serve/handoff.h"
#include "xfer/xfer_host.h"
#include "xfer/xfer_pool.h"
#include "xfer/xfer_ucx.h"

/* One handoff on the decode side, from its BEGIN or its first waiter until claimed or expired. */
typedef struct hd_entry {
    struct hd_entry *next;
    uint8_t id[XFER_ID_BYTES];
    bool begun, ended, aborted;
    xfer_begin begin;
    uint8_t *records; /* begin.n_records * record_bytes, then the window snapshot (begin.window_bytes): a run of
                       * handoff_mgr.pool (NULL: waiting for one) */
    uint8_t *have; /* per record: arrived */
    uint32_t n_have, n_end; /* records arrived; END's total */
    bool win_have; /* the WINDOW snapshot arrived (after the records in `records`) */
    uint32_t win_end; /* END's WINDOW messages sent (0 or 1) */
    int32_t placing; /* RECORDS being received straight into records (xfer_place_fn) */
    bool unlinked; /* claimed or expired while placing: on handoff_mgr.zombies until placing is 0 */
    bool waited; /* found the pool full once (counted in handoff_mgr.waited_handoffs) */
    double created;
    handoff_ready_fn cb; /* a parked job, or NULL */
    void *cb_ctx;
    double deadline; /* when the parked job stops waiting */
} hd_entry;

/* D's transport address as P learned it from GET <url>/handoff/info. */
typedef struct hp_peer {
    struct hp_peer *next;
    struct handoff_mgr *m;
    char url[256];
    char addr[2 * 4096 + 8]; /* xfer peer: "shm:" / "ucx:<worker address>" or "host:port"; empty while resolving
                                or failed */
    bool resolving, failed;
    bool local; /* "shm:": D runs on this host; no UCX peer-failure detection, liveness by D's process */
    int64_t pid; /* D's process (local peers): pid and start time, from /handoff/info */
    uint64_t start_ticks;
    double probed; /* when D's process was last checked (local peers) */
    struct evhttp_connection *evcon;
} hp_peer;

struct handoff_mgr {
    handoff_config cfg;
    struct event_base *base;
    cinfer_engine *engine;
    xfer_node *node; /* NULL: no transport (role both without --handoff-listen, or UCX failed) */
    struct event *ev_fd, *ev_tick;
    bool ticking;
    uint8_t fingerprint[XFER_DIGEST_BYTES];
    char host_id[XFER_HOST_ID_MAX]; /* xfer_host_id, or "" when unknown (no peer is then local) */
    int64_t pid; /* this process, as /handoff/info reports it */
    uint64_t start_ticks;
    size_t record_bytes;
    size_t window_bytes; /* this engine's handoff window snapshot (0: not a window model, or no window state) */
    int32_t block_tokens;
    hd_entry *entries;
    hd_entry *zombies; /* unlinked entries whose records UCX is still writing into */
    xfer_pool *pool; /* receive buffers (decode side; NULL when this worker takes no handoffs) */
    uint64_t waited_handoffs; /* handoffs that found the pool full (their RECORDS waited: back-pressure) */
    uint64_t claim_copied_bytes; /* records copied at claim (a pull still in flight kept the buffer) */
    int32_t n_entries;
    struct handoff_push *pushes;
    hp_peer *peers;
};

/* handoff.c: keeps the 1 ms tick running while anything is in flight. */
void hm_arm_tick(handoff_mgr *m);
/* handoff_push.c: one tick of every push; true while any is active. */
bool hp_tick_all(handoff_mgr *m, double now);
void hp_close_all(handoff_mgr *m);
/* SHA-256 of the salt ("" for none). */
void hm_salt_digest(const char *salt, uint8_t out[XFER_DIGEST_BYTES]);

#endif
