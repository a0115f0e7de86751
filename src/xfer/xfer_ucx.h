/* xfer_ucx.h - the KV handoff transport: UCX (ucp) active messages between
 * workers (docs/pd.md). UCX picks the transport itself (UCX_TLS restricts
 * it). Peers named "ucx:" or "host:port" get UCP_ERR_HANDLING_MODE_PEER, so
 * a dead peer fails operations instead of hanging them: TCP between hosts or
 * namespaces, RDMA where the cluster has it (UCX 1.13's shared-memory
 * transports cannot detect a dead peer and are left out). Peers named "shm:"
 * (the caller found them on this host: xfer_host.h) get
 * UCP_ERR_HANDLING_MODE_NONE, so shared memory (sysv/posix FIFOs, CMA
 * rendezvous) is used; a dead "shm:" peer is NOT detected here: its
 * operations stay pending until the caller, which watches the peer's process
 * (xfer_process_alive), calls xfer_drop_peer. Large payloads go by
 * rendezvous (the receiver pulls them into its own buffer).
 *
 * One node per process: a ucp context and one worker in single-thread mode,
 * driven by the owner's event loop (xfer_fd readable -> xfer_progress, plus a
 * short timer while sends are pending). Optionally a listener
 * (--handoff-listen HOST:PORT) accepting connections from senders; senders
 * keep one endpoint per peer "host:port" (a connection cache; a failed
 * endpoint is dropped and re-made by the next send).
 *
 * Messages are an XFER_FRAME_BYTES frame header (xfer_wire.h) plus data. The
 * receiver checks the frame before allocating anything and refuses data
 * larger than max_message. Received messages reach on_message in the loop
 * thread with the data in a malloc'd buffer the callee owns, unless the owner
 * places them: its place callback (optional) names where a message's data
 * lands (the decode worker's per-handoff receive buffer), rendezvous data is
 * pulled there directly (no allocation, no copy), eager data copied, and
 * on_placed reports the outcome; or it answers "later" (no buffer free yet)
 * and delivery waits: back-pressure through the transport.
 *
 * Ownership: a send's frame and data must stay valid until its callback
 * (which always comes, from xfer_progress or xfer_close, never from inside
 * xfer_send). xfer_flush's callback reports remote completion of everything
 * sent to the peer before it. */
#ifndef CINFER_XFER_XFER_UCX_H
#define CINFER_XFER_XFER_UCX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "xfer/xfer_wire.h"

typedef struct xfer_node xfer_node;

/* A checked message: f is decoded; data (f->data_len bytes, malloc'd or NULL) belongs to the callee. */
typedef void (*xfer_message_fn)(void *ctx, const xfer_frame *f, uint8_t *data);
/* status: 0 done, -1 failed (peer unreachable, connection lost, closed) */
typedef void (*xfer_done_fn)(void *ctx, int status);

/* Where a checked message's data (f->data_len > 0 bytes) lands. Called from xfer_progress / xfer_poll outside
 * UCX, in arrival order, after every message received before it was delivered (a BEGIN is seen before its
 * RECORDS):
 *  XFER_PLACE_NONE: xfer mallocs the data and on_message gets it;
 *  XFER_PLACE_HERE: *dst names where the data lands: a rendezvous (large) message is pulled there directly
 *    (no allocation, no copy), an eager (small) one is copied there; on_placed reports the outcome (always,
 *    from a later progress call or from xfer_close); *token is handed back there. *dst must stay valid
 *    until then;
 *  XFER_PLACE_LATER: back-pressure (no room yet): delivery stops at this message, which stays unreceived
 *    (a rendezvous sender's operation stays pending, so its sends stop at its window), and place is asked
 *    again on the next progress call. xfer_stalled is true meanwhile. Messages placed before it still
 *    report on_placed when their data is in (the room asked for may come back only then). */
typedef enum xfer_place_result { XFER_PLACE_NONE = 0, XFER_PLACE_HERE, XFER_PLACE_LATER } xfer_place_result;
typedef xfer_place_result (*xfer_place_fn)(void *ctx, const xfer_frame *f, uint8_t **dst, void **token);
/* A placed message: status 0, its data is in place; -1, the receive failed (the bytes there are undefined). */
typedef void (*xfer_placed_fn)(void *ctx, const xfer_frame *f, void *token, int status);

/* Bytes received, by how they reached their destination (the handoff's placed vs copied metric). */
typedef struct xfer_rx_stats {
    uint64_t pulled_bytes; /* rendezvous data pulled straight into a placement */
    uint64_t copied_bytes; /* eager data copied into a placement (a bounce through UCX's buffer) */
    uint64_t unplaced_bytes; /* data handed to on_message in a malloc'd buffer */
    uint64_t stalls; /* deliveries stopped by XFER_PLACE_LATER */
} xfer_rx_stats;

typedef struct xfer_config {
    const char *listen; /* "host:port" to accept handoffs on (port 0: any), or NULL: send only */
    uint64_t max_message; /* largest data part accepted (0: 1 GiB) */
    xfer_message_fn on_message;
    xfer_place_fn place; /* optional; with on_placed */
    xfer_placed_fn on_placed;
    void *ctx;
} xfer_config;

int xfer_open(const xfer_config *c, xfer_node **out, cf_err *err);
/* Force-closes every endpoint (pending callbacks run with -1) and frees the node. */
void xfer_close(xfer_node *n);
int xfer_fd(const xfer_node *n);
void xfer_progress(xfer_node *n);
/* Progress without arming the fd: for busy loops and for a loop that polls while transfers are in
 * flight (an armed receiver makes shared-memory senders signal it for every message). Call
 * xfer_progress before waiting on xfer_fd again. */
void xfer_poll(xfer_node *n);
/* Operations whose callback has not run yet. */
int xfer_pending(const xfer_node *n);
/* Delivery waits on XFER_PLACE_LATER (the owner must keep calling xfer_progress until it clears). */
bool xfer_stalled(const xfer_node *n);
void xfer_get_rx_stats(const xfer_node *n, xfer_rx_stats *out);
/* "host:port" the listener is bound to (port resolved), or NULL. */
const char *xfer_listen_addr(const xfer_node *n);

/* This worker's UCX address in hex (stable for the node's life; NULL on failure): a peer named
 * "ucx:<hex>" is reached with every transport the two workers share that supports peer-failure
 * detection (in UCX 1.13 not shared memory: docs/pd.md), "shm:<hex>" with every transport they
 * share (shared memory on one host; no peer-failure detection), "host:port" through the listener
 * (TCP connection manager, then UCX's choice of lanes). */
const char *xfer_worker_address(xfer_node *n);

/* Queues frame (XFER_FRAME_BYTES) + data to peer ("host:port", "ucx:<hex>" or "shm:<hex>"). 0, or -1 with err (bad address, no
 * endpoint; the callback then never runs). */
int xfer_send(xfer_node *n, const char *peer, const uint8_t *frame, const void *data, size_t len, xfer_done_fn cb,
              void *ctx, cf_err *err);
/* Completes (cb 0) when everything sent to peer so far has reached it; -1 when that failed. */
int xfer_flush(xfer_node *n, const char *peer, xfer_done_fn cb, void *ctx, cf_err *err);
/* Force-closes the endpoint to peer (its pending operations fail); the next send reconnects. */
void xfer_drop_peer(xfer_node *n, const char *peer);

/* Splits "host:port" (host: IPv4 dotted quad or a name; [v6] not supported). 0, or -1 with err. */
int xfer_parse_hostport(const char *s, char *host, size_t host_cap, uint16_t *port, cf_err *err);

#endif
