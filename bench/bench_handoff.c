/* bench_handoff.c - KV handoff transport throughput (src/xfer/, docs/pd.md):
 * one receiving and one sending process exchange RECORDS messages of SIZE
 * bytes through xfer_ucx exactly as a prefill worker pushes blocks to a decode
 * worker (active messages, rendezvous above UCX's threshold, WINDOW messages
 * in flight), and the sender reports GB/s from its first send to the flush
 * that confirms everything reached the receiver. bench/handoff.sh runs it
 * next to `ucx_perftest -t ucp_am_bw` on the same path (same UCX_TLS, same
 * namespaces, same sizes). The sender's buffer is allocated as a prefill
 * worker's export buffer is (kern_alloc_stream: 2 MiB aligned, transparent
 * huge pages asked for; a CMA pull walks the sender's pages).
 *
 * The receiver either places each message's data straight into a staging
 * buffer of STAGING bytes (round robin; as a decode worker receives RECORDS
 * into the handoff's records buffer, xfer_place_fn), or, with no STAGING,
 * takes a malloc'd buffer per message, or (pool:SIZE:POOL:MSGS) receives as a
 * decode worker does now: every MSGS messages of SIZE bytes are one handoff,
 * placed into a run of a pre-faulted receive-buffer pool of POOL bytes
 * (xfer_pool.h) that goes back to the pool once the handoff is complete (the
 * engine's return after its copy into KV blocks, which is not timed here); a
 * full pool makes delivery wait (back-pressure).
 *
 *   bench_handoff recv HOST:PORT [STAGING | pool:SIZE:POOL:MSGS]   prints "listening HOST:PORT" and
 *       "worker ucx:HEX", exits after an END
 *   bench_handoff send PEER SIZE COUNT [WINDOW]   PEER: HOST:PORT or ucx:HEX; prints bytes, seconds, GB/s */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tensor/kernels.h"
#include "xfer/xfer_pool.h"
#include "xfer/xfer_ucx.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define BH_FILL 0x5A /* the sender's bytes (the receiver spot-checks placed data) */

typedef struct bh_state {
    uint64_t bytes, msgs;
    int ended, failed, inflight, flushed;
    uint64_t events; /* callbacks run so far (bh_wait sleeps only when a progress call ran none) */
    uint64_t sleeps, timeouts; /* bh_wait: waits on the fd, and those that ended by the 1 ms timeout */
    uint8_t *staging; /* receiver: where data is placed (NULL: malloc per message) */
    size_t staging_bytes, staging_at;
    xfer_pool *pool; /* pool mode: one run of pool_msgs messages per handoff */
    size_t pool_unit;
    uint64_t pool_msgs;
    uint8_t *run; /* the handoff being received (NULL: take a run at its next message) */
    uint64_t run_placed, run_done; /* messages placed into run / reported */
    uint8_t *runs_out[64]; /* runs whose messages are not all reported yet, with their counts */
    uint64_t runs_left[64];
} bh_state;

static xfer_place_result place_pool(bh_state *s, const xfer_frame *f, uint8_t **dst, void **token) {
    if (f->data_len != s->pool_unit) return XFER_PLACE_NONE;
    if (!s->run) {
        int slot = 0;
        while (slot < 64 && s->runs_out[slot]) slot++;
        if (slot == 64 || !(s->run = xfer_pool_get(s->pool, s->pool_msgs))) return XFER_PLACE_LATER;
        s->runs_out[slot] = s->run;
        s->runs_left[slot] = s->pool_msgs;
        s->run_placed = 0;
    }
    *dst = s->run + s->run_placed * s->pool_unit;
    *token = *dst;
    if (++s->run_placed == s->pool_msgs) s->run = NULL; /* the next message starts the next handoff */
    return XFER_PLACE_HERE;
}

/* A placed message of a pool run arrived: the run goes back once all of its messages have. */
static void placed_pool(bh_state *s, const uint8_t *at) {
    for (int i = 0; i < 64; i++)
        if (s->runs_out[i] && at >= s->runs_out[i] && at < s->runs_out[i] + s->pool_msgs * s->pool_unit) {
            if (--s->runs_left[i] == 0 && s->runs_out[i] != s->run) {
                xfer_pool_put(s->pool, s->runs_out[i]);
                s->runs_out[i] = NULL;
            }
            return;
        }
}

static xfer_place_result on_place(void *ctx, const xfer_frame *f, uint8_t **dst, void **token) {
    bh_state *s = ctx;
    *token = NULL;
    if (f->kind != XFER_MSG_RECORDS) return XFER_PLACE_NONE;
    if (s->pool) return place_pool(s, f, dst, token);
    if (!s->staging || f->data_len > s->staging_bytes) return XFER_PLACE_NONE;
    if (s->staging_at + f->data_len > s->staging_bytes) s->staging_at = 0;
    uint8_t *at = s->staging + s->staging_at;
    s->staging_at += f->data_len;
    *token = at;
    *dst = at;
    return XFER_PLACE_HERE;
}

static void on_placed(void *ctx, const xfer_frame *f, void *token, int status) {
    bh_state *s = ctx;
    s->events++;
    const uint8_t *at = token;
    if (status || at[0] != BH_FILL || at[f->data_len / 2] != BH_FILL || at[f->data_len - 1] != BH_FILL) s->failed = 1;
    s->bytes += f->data_len;
    s->msgs++;
    if (s->pool) placed_pool(s, at);
}

static void on_msg(void *ctx, const xfer_frame *f, uint8_t *data) {
    bh_state *s = ctx;
    s->events++;
    s->bytes += f->data_len;
    s->msgs++;
    if (f->kind == XFER_MSG_END) s->ended = 1;
    free(data);
}

static void on_sent(void *ctx, int status) {
    bh_state *s = ctx;
    s->events++;
    s->inflight--;
    if (status) s->failed = 1;
}

static void on_flush(void *ctx, int status) {
    bh_state *s = ctx;
    s->events++;
    s->flushed = status ? -1 : 1;
}

/* One turn of the loop a worker runs (serve/handoff.c): progress and arm the fd; when that ran no callback,
 * sleep on the fd (at most the worker's 1 ms tick). A callback returns at once: the caller acts on it (a
 * freed window slot is refilled before sleeping). Neither side spins: on a shared machine a spinning peer
 * takes the CPU the copy needs. */
static void bh_wait(xfer_node *n, bh_state *s) {
    uint64_t seen = s->events;
    xfer_progress(n);
    if (s->events != seen) return;
    struct pollfd p = {.fd = xfer_fd(n), .events = POLLIN};
    s->sleeps++;
    if (poll(&p, 1, 1) == 0) s->timeouts++;
}

/* "pool:SIZE:POOL:MSGS" -> a pre-faulted pool in s (0), or -1. */
static int open_pool(bh_state *s, const char *spec) {
    unsigned long long size = 0, bytes = 0, msgs = 0;
    cf_err err = {0};
    if (sscanf(spec, "pool:%llu:%llu:%llu", &size, &bytes, &msgs) != 3 || !size || !msgs) {
        fprintf(stderr, "bench_handoff: expected pool:SIZE:POOL_BYTES:MSGS, got '%s'\n", spec);
        return -1;
    }
    if (xfer_pool_new((size_t)size, bytes, 64, true, &s->pool, &err) || !xfer_pool_fits(s->pool, msgs)) {
        fprintf(stderr, "bench_handoff: %s\n", err.msg[0] ? err.msg : "a handoff does not fit the pool");
        xfer_pool_free(s->pool);
        return -1;
    }
    s->pool_unit = (size_t)size;
    s->pool_msgs = msgs;
    return 0;
}

static int run_recv(const char *listen, const char *mode) {
    size_t staging = mode && strncmp(mode, "pool:", 5) ? (size_t)strtoull(mode, NULL, 10) : 0;
    bh_state s = {.staging_bytes = staging};
    if (mode && !strncmp(mode, "pool:", 5) && open_pool(&s, mode)) return 2;
    xfer_node *n;
    cf_err err = {0};
    xfer_config c = {.listen = listen,
                     .max_message = (uint64_t)1 << 31,
                     .on_message = on_msg,
                     .place = on_place,
                     .on_placed = on_placed,
                     .ctx = &s};
    if (staging && !(s.staging = malloc(staging))) { /* not touched: the first pass faults pages in, as D's does */
        fprintf(stderr, "bench_handoff: out of memory\n");
        return 1;
    }
    if (xfer_open(&c, &n, &err)) {
        fprintf(stderr, "bench_handoff: %s\n", err.msg);
        free(s.staging);
        xfer_pool_free(s.pool);
        return 1;
    }
    printf("listening %s\nworker ucx:%s\n", xfer_listen_addr(n), xfer_worker_address(n));
    fflush(stdout);
    while (!s.ended) bh_wait(n, &s);
    uint64_t sleeps = s.sleeps, timeouts = s.timeouts; /* until the END (the tail below waits on purpose) */
    for (double t = now_s(); now_s() - t < 1.0;) bh_wait(n, &s); /* the sender's flush completes, it leaves */
    xfer_rx_stats rs;
    xfer_get_rx_stats(n, &rs);
    printf("received %llu bytes in %llu messages%s: pulled %llu, copied %llu, unplaced %llu bytes, %llu stalls; "
           "%llu waits, %llu timed out\n",
           (unsigned long long)s.bytes, (unsigned long long)s.msgs, s.failed ? " (some receives failed)" : "",
           (unsigned long long)rs.pulled_bytes, (unsigned long long)rs.copied_bytes,
           (unsigned long long)rs.unplaced_bytes, (unsigned long long)rs.stalls, (unsigned long long)sleeps,
           (unsigned long long)timeouts);
    xfer_close(n);
    free(s.staging);
    for (int i = 0; i < 64; i++) xfer_pool_put(s.pool, s.runs_out[i]); /* a partial last handoff */
    xfer_pool_free(s.pool);
    return s.failed;
}

static int run_send(const char *peer, size_t size, int count, int window) {
    bh_state s = {0};
    xfer_node *n;
    cf_err err = {0};
    xfer_config c = {.on_message = on_msg, .ctx = &s};
    uint8_t *buf = kern_alloc_stream(size, NULL); /* as a prefill worker's export buffer (cinfer_kv_export_new) */
    uint8_t frame[XFER_FRAME_BYTES];
    if (!buf || xfer_open(&c, &n, &err)) {
        fprintf(stderr, "bench_handoff: %s\n", buf ? err.msg : "out of memory");
        return 1;
    }
    memset(buf, BH_FILL, size);
    xfer_frame f = {.kind = XFER_MSG_RECORDS, .count = 1, .data_len = size};
    xfer_frame_encode(&f, frame);
    /* warm-up: connect and one message */
    s.inflight = 1;
    if (xfer_send(n, peer, frame, buf, size, on_sent, &s, &err)) goto fail;
    while (s.inflight && !s.failed) bh_wait(n, &s);
    double t0 = now_s();
    int sent = 0;
    while (sent < count && !s.failed) {
        while (s.inflight < window && sent < count) {
            s.inflight++;
            if (xfer_send(n, peer, frame, buf, size, on_sent, &s, &err)) goto fail;
            sent++;
        }
        bh_wait(n, &s);
    }
    while (s.inflight && !s.failed) bh_wait(n, &s);
    xfer_frame e = {.kind = XFER_MSG_END};
    uint8_t eframe[XFER_FRAME_BYTES];
    xfer_frame_encode(&e, eframe);
    s.inflight++;
    if (xfer_send(n, peer, eframe, NULL, 0, on_sent, &s, &err) || xfer_flush(n, peer, on_flush, &s, &err)) goto fail;
    while (!s.flushed && !s.failed) bh_wait(n, &s);
    double dt = now_s() - t0;
    if (s.failed || s.flushed < 0) goto fail;
    double bytes = (double)size * count;
    printf("size %zu count %d window %d: %.0f bytes in %.4f s = %.3f GB/s (%llu waits, %llu timed out)\n", size, count,
           window, bytes, dt, bytes / dt / 1e9, (unsigned long long)s.sleeps, (unsigned long long)s.timeouts);
    xfer_close(n);
    free(buf);
    return 0;
fail:
    fprintf(stderr, "bench_handoff: send failed: %s\n", err.msg[0] ? err.msg : "transport error");
    xfer_close(n);
    free(buf);
    return 1;
}

static const char handoff_usage[] = "usage: bench_handoff recv HOST:PORT [STAGING_BYTES | pool:SIZE:POOL_BYTES:MSGS] | "
                                    "send HOST:PORT|ucx:HEX|shm:HEX SIZE COUNT [WINDOW]\n";

int main(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(handoff_usage, stdout);
        return 0;
    }
    if (argc >= 2 && argv[1][0] == '-') {
        fprintf(stderr, "bench_handoff: unknown option '%s' (--help for usage)\n", argv[1]);
        return 2;
    }
    if ((argc == 3 || argc == 4) && !strcmp(argv[1], "recv")) return run_recv(argv[2], argc == 4 ? argv[3] : NULL);
    if ((argc == 5 || argc == 6) && !strcmp(argv[1], "send"))
        return run_send(argv[2], (size_t)strtoull(argv[3], NULL, 10), atoi(argv[4]), argc == 6 ? atoi(argv[5]) : 8);
    fputs(handoff_usage, stderr);
    return 2;
}
