/* xfer_ucx.c - see xfer_ucx.h. One ucp worker in single-thread mode, used
 * only from the owner's loop thread. Operations carry an xfer_op (given back
 * to the node's spare list after their completion callback, as receive
 * records are after delivery: no allocation per message once warm); received
 * messages are checked in the active message callback (before any
 * allocation), queued (rendezvous messages
 * with their descriptor: the pull into the owner's placement or a malloc'd
 * buffer starts from deliver, in order, outside UCX), and handed to on_message after
 * ucp_worker_progress returns, so the owner never runs inside UCX. Delivery
 * is strictly in arrival order: a placement answering "later" stops it at
 * that message (back-pressure) until a later progress call; finished pulls
 * of messages placed before it are reported from their own list meanwhile. Failed
 * endpoints (UCX's error callback) are marked and force-closed by the next
 * xfer_progress; their pending operations then complete with an error.
 * A flush waits for its peer's sends in flight (xfer_peer.sends) before
 * ucp_ep_flush_nbx, which covers the transport but not active messages. */
#include "xfer/xfer_ucx.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include "base/log.h"

#define XFER_AM_ID 17
#define XFER_MAX_PEERS 64
#define XFER_PEER_NAME 96
#define XFER_WORKER_ADDR_MAX 4096 /* bytes of a worker address we accept (hex: twice that) */
#define XFER_SPARE_MAX 256 /* finished operation / receive records kept for reuse, of each kind */

typedef struct xfer_op {
    struct xfer_op *next; /* on the done list, or on a peer's flush_wait list */
    xfer_node *n;
    xfer_done_fn cb;
    void *ctx;
    int status;
    ucp_ep_h send_ep; /* a send: its endpoint (the peer's count of sends in flight); NULL otherwise */
} xfer_op;

typedef struct xfer_peer {
    char *name; /* "host:port", "ucx:<hex>" or "shm:<hex>" (owned; NULL for accepted endpoints) */
    ucp_ep_h ep;
    bool failed;
    int sends; /* send operations not completed yet */
    xfer_op *flush_wait; /* flushes waiting for sends == 0 (ucp's flush does not cover active messages) */
} xfer_peer;

typedef struct xfer_spares { /* a free list of records (spare_take / spare_give) */
    void *head;
    int n;
} xfer_spares;

typedef struct xfer_rx { /* a received message waiting for its data or for delivery */
    struct xfer_rx *next; /* on the delivery queue, or on the in-flight list while its data comes */
    xfer_node *n;
    xfer_frame f;
    uint8_t *data; /* malloc'd, or the owner's placement */
    bool failed;
    bool placed; /* data is the owner's (xfer_place_fn): reported through on_placed, never freed here */
    bool rndv; /* data came by rendezvous (pulled), not eager (copied out of UCX's buffer) */
    bool decided; /* place was asked (or there is nothing to place) */
    void *token;
    void *desc; /* a rendezvous message not pulled yet: UCX's data descriptor (rx_pull) */
} xfer_rx;

struct xfer_node {
    ucp_context_h ctx;
    ucp_worker_h w;
    ucp_listener_h lis;
    int efd;
    xfer_message_fn on_message;
    xfer_place_fn place;
    xfer_placed_fn on_placed;
    void *mctx;
    uint64_t max_message;
    char listen[XFER_PEER_NAME];
    char *addr_hex; /* the worker's address in hex (xfer_worker_address) */
    xfer_peer peers[XFER_MAX_PEERS]; /* senders' connection cache */
    int n_peers;
    xfer_peer *accepted; /* endpoints made by the listener */
    int n_acc, cap_acc;
    int pending;
    xfer_rx *rx_head, *rx_tail; /* complete, to deliver */
    xfer_rx *rx_inflight; /* rendezvous receives not complete yet (failed at close) */
    xfer_rx *pulled_head, *pulled_tail; /* rendezvous receives complete (or failed), to report: never
                                         * behind a stalled arrival (its room may wait on these) */
    xfer_op *done_head, *done_tail; /* completed operations, callbacks to run */
    bool stalled; /* the head of the delivery queue waits on XFER_PLACE_LATER */
    xfer_rx_stats rx_stats;
    xfer_spares spare_ops, spare_rx; /* finished xfer_op / xfer_rx records for reuse: a steady stream of
                                      * messages allocates nothing once as many are in flight as ever were */
};

/* Operation and receive records come from the node's spare lists (malloc only when empty) and go back
 * there (free only above XFER_SPARE_MAX). A spare record's first bytes hold the link to the next one. */
static void *spare_take(xfer_spares *s, size_t size) {
    void *e = s->head;
    if (!e) return malloc(size);
    memcpy(&s->head, e, sizeof s->head);
    s->n--;
    return e;
}

static void spare_give(xfer_spares *s, void *e) {
    if (!e) return;
    if (s->n >= XFER_SPARE_MAX) {
        free(e);
        return;
    }
    memcpy(e, &s->head, sizeof s->head);
    s->head = e;
    s->n++;
}

static void spare_free(xfer_spares *s) {
    while (s->head) free(spare_take(s, 0));
}

static xfer_rx *rx_take(xfer_node *n) {
    xfer_rx *rx = spare_take(&n->spare_rx, sizeof *rx);
    if (rx) *rx = (xfer_rx){0};
    return rx;
}

int xfer_parse_hostport(const char *s, char *host, size_t host_cap, uint16_t *port, cf_err *err) {
    const char *colon = s ? strrchr(s, ':') : NULL;
    if (!colon || colon == s || (size_t)(colon - s) >= host_cap)
        return cf_fail(err, "handoff address '%s': expected HOST:PORT", s ? s : "");
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || p < 0 || p > 65535) return cf_fail(err, "handoff address '%s': bad port", s);
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = 0;
    *port = (uint16_t)p;
    return 0;
}

static int resolve(const char *hostport, struct sockaddr_in *sa, cf_err *err) {
    char host[XFER_PEER_NAME];
    uint16_t port;
    if (xfer_parse_hostport(hostport, host, sizeof host, &port, err)) return -1;
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons(port);
    if (inet_pton(AF_INET, host, &sa->sin_addr) == 1) return 0;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &ai);
    if (rc || !ai) return cf_fail(err, "handoff address '%s': %s", hostport, gai_strerror(rc));
    sa->sin_addr = ((struct sockaddr_in *)ai->ai_addr)->sin_addr;
    freeaddrinfo(ai);
    return 0;
}

static void op_complete(xfer_node *n, xfer_op *op, int status) {
    op->status = status;
    op->next = NULL;
    if (n->done_tail) n->done_tail->next = op;
    else n->done_head = op;
    n->done_tail = op;
}

static void op_done(void *req, ucs_status_t st, void *user) {
    xfer_op *op = user;
    op_complete(op->n, op, st == UCS_OK ? 0 : -1);
    ucp_request_free(req);
}

static void rx_push(xfer_node *n, xfer_rx *rx) {
    rx->next = NULL;
    if (n->rx_tail) n->rx_tail->next = rx;
    else n->rx_head = rx;
    n->rx_tail = rx;
}

static void pulled_push(xfer_node *n, xfer_rx *rx) {
    rx->next = NULL;
    if (n->pulled_tail) n->pulled_tail->next = rx;
    else n->pulled_head = rx;
    n->pulled_tail = rx;
}

static void rx_done(void *req, ucs_status_t st, size_t len, void *user) {
    xfer_rx *rx = user;
    (void)len;
    for (xfer_rx **pp = &rx->n->rx_inflight; *pp; pp = &(*pp)->next)
        if (*pp == rx) {
            *pp = rx->next;
            break;
        }
    rx->n->pending--; /* counted at the receive (deliver does not count messages) */
    rx->failed = st != UCS_OK;
    pulled_push(rx->n, rx);
    ucp_request_free(req);
}

/* Starts the pull of a rendezvous message (deliver, outside UCX) into its placement (rx_decide) or a malloc'd
 * buffer. The message is then on the in-flight list until rx_done, or queued again (done or failed). */
static void rx_pull(xfer_node *n, xfer_rx *rx) {
    void *desc = rx->desc;
    size_t len = (size_t)rx->f.data_len;
    rx->desc = NULL;
    if (!rx->placed && !(rx->data = malloc(len))) {
        LOG_WARN("handoff: message dropped: out of memory");
        ucp_am_data_release(n->w, desc); /* the sender's request completes without the data */
        spare_give(&n->spare_rx, rx);
        return;
    }
    if (rx->placed) n->rx_stats.pulled_bytes += len;
    else n->rx_stats.unplaced_bytes += len;
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                                             UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
                             .cb.recv_am = rx_done,
                             .user_data = rx};
    ucs_status_ptr_t r = ucp_am_recv_data_nbx(n->w, desc, rx->data, len, &p);
    if (UCS_PTR_IS_ERR(r)) {
        LOG_WARN("handoff: receive failed: %s", ucs_status_string(UCS_PTR_STATUS(r)));
        rx->failed = true; /* delivered as a failure (a placement hears of it) */
        pulled_push(n, rx);
    } else if (r == NULL) {
        pulled_push(n, rx);
    } else {
        n->pending++;
        rx->next = n->rx_inflight;
        n->rx_inflight = rx;
    }
}

/* Asks the owner where the head message's data goes (once, while the worker lives). false: not now
 * (XFER_PLACE_LATER), the message stays at the head. Eager data placed is copied there at once. */
static bool rx_decide(xfer_node *n, xfer_rx *rx) {
    if (rx->decided || !n->place || !n->w || rx->f.data_len == 0 || rx->failed) return true;
    uint8_t *dst = NULL;
    xfer_place_result pr = n->place(n->mctx, &rx->f, &dst, &rx->token);
    if (pr == XFER_PLACE_LATER) {
        if (!n->stalled) n->rx_stats.stalls++;
        n->stalled = true;
        return false;
    }
    rx->decided = true;
    if (pr != XFER_PLACE_HERE || !dst) return true;
    rx->placed = true;
    if (!rx->desc) { /* eager: already here in a malloc'd copy */
        memcpy(dst, rx->data, (size_t)rx->f.data_len);
        free(rx->data);
        n->rx_stats.copied_bytes += rx->f.data_len;
    }
    rx->data = dst;
    return true;
}

/* The active-message callback: checks the frame, then copies eager data, or queues a rendezvous
 * message's descriptor for rx_pull (UCS_INPROGRESS keeps it valid until then). */
static ucs_status_t on_am(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                          const ucp_am_recv_param_t *param) {
    xfer_node *n = arg;
    bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    xfer_frame f;
    cf_err err = {0};
    xfer_rx *rx = NULL;
    if (xfer_frame_decode(hdr, hlen, len, &f, &err) ||
        (len > n->max_message &&
         cf_fail(&err, "a %zu-byte message (limit %llu)", len, (unsigned long long)n->max_message)) ||
        !(rx = rx_take(n)) || (!rndv && len && !(rx->data = malloc(len)))) {
        LOG_WARN("handoff: message dropped: %s", err.msg[0] ? err.msg : "out of memory");
        spare_give(&n->spare_rx, rx);
        return UCS_OK; /* not received: UCX drops it (a rendezvous sender's request completes) */
    }
    rx->n = n;
    rx->f = f;
    rx->rndv = rndv;
    if (rndv) rx->desc = data;
    else if (len) memcpy(rx->data, data, len);
    rx_push(n, rx);
    return rndv ? UCS_INPROGRESS : UCS_OK;
}

static void mark_failed(xfer_peer *ps, int np, ucp_ep_h ep) {
    for (int i = 0; i < np; i++)
        if (ps[i].ep == ep) ps[i].failed = true;
}

static void on_peer_err(void *arg, ucp_ep_h ep, ucs_status_t st) {
    xfer_node *n = arg;
    LOG_DEBUG("handoff: connection failed: %s", ucs_status_string(st));
    mark_failed(n->peers, n->n_peers, ep);
    mark_failed(n->accepted, n->n_acc, ep);
}

static void on_conn(ucp_conn_request_h req, void *arg) {
    xfer_node *n = arg;
    if (n->n_acc == n->cap_acc) {
        int cap = n->cap_acc ? 2 * n->cap_acc : 8;
        xfer_peer *a = realloc(n->accepted, (size_t)cap * sizeof *a);
        if (!a) {
            ucp_listener_reject(n->lis, req);
            return;
        }
        n->accepted = a;
        n->cap_acc = cap;
    }
    ucp_ep_params_t p = {.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                                       UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
                         .conn_request = req,
                         .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                         .err_handler = {.cb = on_peer_err, .arg = n}};
    ucp_ep_h ep;
    if (ucp_ep_create(n->w, &p, &ep) != UCS_OK) return;
    n->accepted[n->n_acc++] = (xfer_peer){.ep = ep};
}

static void ep_force_close(xfer_node *n, ucp_ep_h ep) {
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE};
    ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &p);
    if (r && !UCS_PTR_IS_ERR(r)) {
        for (int i = 0; i < 100000 && ucp_request_check_status(r) == UCS_INPROGRESS; i++) ucp_worker_progress(n->w);
        ucp_request_free(r);
    }
}

/* Force-closes failed endpoints (their operations complete with errors). */
static void reap(xfer_node *n) {
    for (int i = 0; i < n->n_peers;)
        if (n->peers[i].failed) {
            ucp_ep_h ep = n->peers[i].ep;
            for (xfer_op *op = n->peers[i].flush_wait, *next; op; op = next) {
                next = op->next;
                op_complete(n, op, -1);
            }
            free(n->peers[i].name);
            n->peers[i] = n->peers[--n->n_peers];
            ep_force_close(n, ep);
        } else {
            i++;
        }
    for (int i = 0; i < n->n_acc;)
        if (n->accepted[i].failed) {
            ucp_ep_h ep = n->accepted[i].ep;
            n->accepted[i] = n->accepted[--n->n_acc];
            ep_force_close(n, ep);
        } else {
            i++;
        }
}

static void issue_flush(xfer_node *n, xfer_peer *pr, xfer_op *op) {
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                                             UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
                             .cb.send = op_done,
                             .user_data = op};
    ucs_status_ptr_t r = ucp_ep_flush_nbx(pr->ep, &p);
    if (UCS_PTR_IS_ERR(r)) {
        pr->failed = true;
        op_complete(n, op, -1);
    } else if (r == NULL) { /* nothing outstanding on the transport (NO_IMM_CMPL does not apply to flush) */
        op_complete(n, op, 0);
    }
}

/* A send completed: its peer's count drops; flushes waiting for that peer's sends go out. */
static void send_settled(xfer_node *n, ucp_ep_h ep) {
    for (int i = 0; i < n->n_peers; i++) {
        xfer_peer *pr = &n->peers[i];
        if (pr->ep != ep || pr->sends <= 0 || --pr->sends > 0 || pr->failed) continue;
        xfer_op *w = pr->flush_wait;
        pr->flush_wait = NULL;
        while (w) {
            xfer_op *next = w->next;
            issue_flush(n, pr, w);
            w = next;
        }
    }
}

/* Hands one received message over: on_placed for a placement, on_message for malloc'd data. */
static void rx_finish(xfer_node *n, xfer_rx *rx) {
    if (rx->placed) n->on_placed(n->mctx, &rx->f, rx->token, rx->failed ? -1 : 0);
    else if (rx->failed) free(rx->data);
    else {
        if (!rx->rndv) n->rx_stats.unplaced_bytes += rx->f.data_len; /* rendezvous: counted at the pull */
        n->on_message(n->mctx, &rx->f, rx->data);
    }
    spare_give(&n->spare_rx, rx);
}

/* Reports finished rendezvous receives. They are apart from the arrival queue: a placement answering
 * "later" may be waiting for exactly these (their buffer goes back when its handoff is complete), so
 * they must not queue behind it. */
static void deliver_pulled(xfer_node *n) {
    while (n->pulled_head) {
        xfer_rx *rx = n->pulled_head;
        n->pulled_head = rx->next;
        if (!n->pulled_head) n->pulled_tail = NULL;
        rx_finish(n, rx);
    }
}

/* Runs completed operations' callbacks and hands received messages over (outside UCX). */
static void deliver(xfer_node *n) {
    while (n->done_head) {
        xfer_op *op = n->done_head;
        n->done_head = op->next;
        if (!n->done_head) n->done_tail = NULL;
        n->pending--;
        if (op->send_ep) send_settled(n, op->send_ep);
        op->cb(op->ctx, op->status);
        spare_give(&n->spare_ops, op);
    }
    deliver_pulled(n);
    while (n->rx_head) {
        xfer_rx *rx = n->rx_head;
        if (!rx_decide(n, rx)) break; /* back-pressure: asked again on the next progress call */
        n->stalled = false;
        n->rx_head = rx->next;
        if (!n->rx_head) n->rx_tail = NULL;
        if (rx->desc) {
            if (n->w) rx_pull(n, rx); /* on the pulled list when done at once; else rx_done puts it there */
            else spare_give(&n->spare_rx, rx); /* closed before it was pulled: never received, nothing placed */
            continue;
        }
        rx_finish(n, rx);
    }
    if (!n->rx_head) n->stalled = false;
    deliver_pulled(n); /* pulls that completed at once above */
}

void xfer_poll(xfer_node *n) {
    while (ucp_worker_progress(n->w)) {}
    reap(n);
    deliver(n);
}

void xfer_progress(xfer_node *n) {
    for (int round = 0; round < 64; round++) {
        while (ucp_worker_progress(n->w)) {}
        reap(n);
        deliver(n);
        if (ucp_worker_arm(n->w) != UCS_ERR_BUSY) return;
    }
}

static int open_listener(xfer_node *n, const char *listen, cf_err *err) {
    struct sockaddr_in sa;
    if (resolve(listen, &sa, err)) return -1;
    ucp_listener_params_t lp = {.field_mask =
                                    UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
                                .sockaddr = {.addr = (const struct sockaddr *)&sa, .addrlen = sizeof sa},
                                .conn_handler = {.cb = on_conn, .arg = n}};
    ucs_status_t st = ucp_listener_create(n->w, &lp, &n->lis);
    if (st != UCS_OK) return cf_fail(err, "handoff: cannot listen on %s: %s", listen, ucs_status_string(st));
    ucp_listener_attr_t la = {.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR};
    if (ucp_listener_query(n->lis, &la) != UCS_OK) return cf_fail(err, "handoff: listener query failed");
    const struct sockaddr_in *b = (const struct sockaddr_in *)&la.sockaddr;
    char ip[INET_ADDRSTRLEN];
    if (!inet_ntop(AF_INET, &b->sin_addr, ip, sizeof ip)) return cf_fail(err, "handoff: listener address");
    snprintf(n->listen, sizeof n->listen, "%s:%u", ip, (unsigned)ntohs(b->sin_port));
    return 0;
}

int xfer_open(const xfer_config *c, xfer_node **out, cf_err *err) {
    *out = NULL;
    xfer_node *n = calloc(1, sizeof *n);
    if (!n) return cf_fail(err, "handoff: out of memory");
    n->on_message = c->on_message;
    n->place = c->on_placed ? c->place : NULL;
    n->on_placed = c->on_placed;
    n->mctx = c->ctx;
    n->max_message = c->max_message ? c->max_message : (uint64_t)1 << 30;
    n->efd = -1;
    ucp_config_t *cfg;
    ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP};
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    if (st == UCS_OK) {
        st = ucp_init(&p, cfg, &n->ctx);
        ucp_config_release(cfg);
    }
    if (st != UCS_OK) {
        free(n);
        return cf_fail(err, "handoff: UCX init failed: %s", ucs_status_string(st));
    }
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE, .thread_mode = UCS_THREAD_MODE_SINGLE};
    ucp_am_handler_param_t hp = {.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                                               UCP_AM_HANDLER_PARAM_FIELD_ARG,
                                 .id = XFER_AM_ID,
                                 .cb = on_am,
                                 .arg = n};
    if ((st = ucp_worker_create(n->ctx, &wp, &n->w)) != UCS_OK) {
        ucp_cleanup(n->ctx);
        free(n);
        return cf_fail(err, "handoff: UCX worker: %s", ucs_status_string(st));
    }
    *out = n;
    if ((st = ucp_worker_get_efd(n->w, &n->efd)) != UCS_OK ||
        (st = ucp_worker_set_am_recv_handler(n->w, &hp)) != UCS_OK)
        return cf_fail(err, "handoff: UCX worker setup: %s", ucs_status_string(st));
    if (c->listen && open_listener(n, c->listen, err)) return -1;
    xfer_progress(n); /* arms the fd */
    return 0;
}

void xfer_close(xfer_node *n) {
    if (!n) return;
    if (n->lis) ucp_listener_destroy(n->lis);
    for (int i = 0; i < n->n_peers; i++) n->peers[i].failed = true;
    for (int i = 0; i < n->n_acc; i++) n->accepted[i].failed = true;
    reap(n);
    deliver(n); /* rendezvous messages still queued are pulled (or fail) before the worker goes */
    for (int i = 0; i < 100000 && n->pending > 0; i++) {
        ucp_worker_progress(n->w);
        deliver(n);
    }
    if (n->pending > 0) LOG_WARN("handoff: %d transfers still pending at close", n->pending);
    ucp_worker_destroy(n->w);
    n->w = NULL;
    while (n->rx_inflight) { /* the worker is gone: nothing writes into these any more */
        xfer_rx *rx = n->rx_inflight;
        n->rx_inflight = rx->next;
        rx->failed = true;
        pulled_push(n, rx);
    }
    deliver(n);
    ucp_cleanup(n->ctx);
    spare_free(&n->spare_ops);
    spare_free(&n->spare_rx);
    free(n->addr_hex);
    free(n->accepted);
    free(n);
}

int xfer_fd(const xfer_node *n) { return n->efd; }
int xfer_pending(const xfer_node *n) { return n->pending; }

bool xfer_stalled(const xfer_node *n) { return n->stalled; }

void xfer_get_rx_stats(const xfer_node *n, xfer_rx_stats *out) { *out = n->rx_stats; }
const char *xfer_listen_addr(const xfer_node *n) { return n->lis ? n->listen : NULL; }

static int hexval(char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; }

/* The endpoint parameters for a peer name: by worker address ("ucx:<hex>": UCX then selects every
 * transport the two workers share, shared memory included) or by socket address ("host:port":
 * through UCX's TCP connection manager). buf receives the decoded address. */
static int peer_params(const char *name, ucp_ep_params_t *p, struct sockaddr_in *sa, uint8_t **buf, cf_err *err) {
    bool by_address = !strncmp(name, "ucx:", 4) || !strncmp(name, "shm:", 4);
    if (!by_address) {
        if (resolve(name, sa, err)) return -1;
        p->field_mask |= UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
        p->flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
        p->sockaddr = (ucs_sock_addr_t){.addr = (const struct sockaddr *)sa, .addrlen = sizeof *sa};
        return 0;
    }
    const char *hex = name + 4;
    size_t len = strlen(hex);
    if (len == 0 || len % 2 || len / 2 > XFER_WORKER_ADDR_MAX) return cf_fail(err, "handoff: bad UCX worker address");
    if (!(*buf = malloc(len / 2))) return cf_fail(err, "handoff: out of memory");
    for (size_t i = 0; i < len / 2; i++) {
        int a = hexval(hex[2 * i]), b = hexval(hex[2 * i + 1]);
        if (a < 0 || b < 0) return cf_fail(err, "handoff: bad UCX worker address");
        (*buf)[i] = (uint8_t)(a << 4 | b);
    }
    p->field_mask |= UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    p->address = (const ucp_address_t *)*buf;
    return 0;
}

static xfer_peer *peer_get(xfer_node *n, const char *name, cf_err *err) {
    for (int i = 0; i < n->n_peers; i++)
        if (!n->peers[i].failed && !strcmp(n->peers[i].name, name)) return &n->peers[i];
    if (n->n_peers == XFER_MAX_PEERS) return cf_fail(err, "handoff: %d peers connected already", XFER_MAX_PEERS), NULL;
    struct sockaddr_in sa;
    uint8_t *abuf = NULL;
    bool one_host = !strncmp(name, "shm:", 4);
    ucp_ep_params_t p = {.field_mask = UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
                         .err_mode = one_host ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER,
                         .err_handler = {.cb = on_peer_err, .arg = n}};
    xfer_peer *pr = &n->peers[n->n_peers];
    if (peer_params(name, &p, &sa, &abuf, err) || !(pr->name = strdup(name))) {
        free(abuf);
        if (err && !err->msg[0]) cf_fail(err, "handoff: out of memory");
        return NULL;
    }
    ucs_status_t st = ucp_ep_create(n->w, &p, &pr->ep);
    free(abuf); /* ucp_ep_create copies what it needs */
    if (st != UCS_OK) {
        free(pr->name);
        return cf_fail(err, "handoff: connect to %.80s: %s", name, ucs_status_string(st)), NULL;
    }
    pr->failed = false;
    pr->sends = 0;
    pr->flush_wait = NULL;
    n->n_peers++;
    return pr;
}

const char *xfer_worker_address(xfer_node *n) {
    if (n->addr_hex) return n->addr_hex;
    ucp_address_t *a;
    size_t len;
    if (ucp_worker_get_address(n->w, &a, &len) != UCS_OK) return NULL;
    static const char hx[] = "0123456789abcdef";
    if ((n->addr_hex = malloc(2 * len + 1))) {
        for (size_t i = 0; i < len; i++) {
            n->addr_hex[2 * i] = hx[((const uint8_t *)a)[i] >> 4];
            n->addr_hex[2 * i + 1] = hx[((const uint8_t *)a)[i] & 15];
        }
        n->addr_hex[2 * len] = 0;
    }
    ucp_worker_release_address(n->w, a);
    return n->addr_hex;
}

static xfer_op *op_new(xfer_node *n, xfer_done_fn cb, void *ctx, cf_err *err) {
    xfer_op *op = spare_take(&n->spare_ops, sizeof *op);
    if (!op) return cf_fail(err, "handoff: out of memory"), NULL;
    *op = (xfer_op){.n = n, .cb = cb, .ctx = ctx};
    return op;
}

static int op_issued(xfer_node *n, xfer_peer *pr, xfer_op *op, ucs_status_ptr_t r, cf_err *err) {
    if (UCS_PTR_IS_ERR(r)) {
        spare_give(&n->spare_ops, op);
        pr->failed = true;
        return cf_fail(err, "handoff: send to %.80s: %s", pr->name, ucs_status_string(UCS_PTR_STATUS(r)));
    }
    n->pending++; /* NO_IMM_CMPL: r is a request, completed through op_done */
    op->send_ep = pr->ep;
    pr->sends++;
    return 0;
}

int xfer_send(xfer_node *n, const char *peer, const uint8_t *frame, const void *data, size_t len, xfer_done_fn cb,
              void *ctx, cf_err *err) {
    xfer_peer *pr = peer_get(n, peer, err);
    xfer_op *op = pr ? op_new(n, cb, ctx, err) : NULL;
    if (!op) return -1;
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                                             UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
                             .cb.send = op_done,
                             .user_data = op};
    return op_issued(n, pr, op, ucp_am_send_nbx(pr->ep, XFER_AM_ID, frame, XFER_FRAME_BYTES, data, len, &p), err);
}

/* ucp_ep_flush covers the transport, not active messages still in flight (a rendezvous send to a
 * shared-memory peer completes when the receiver has pulled the data): the flush waits for the
 * peer's sends first. Its callback always comes from a later progress call. */
int xfer_flush(xfer_node *n, const char *peer, xfer_done_fn cb, void *ctx, cf_err *err) {
    xfer_peer *pr = peer_get(n, peer, err);
    xfer_op *op = pr ? op_new(n, cb, ctx, err) : NULL;
    if (!op) return -1;
    n->pending++;
    if (pr->sends > 0) {
        op->next = pr->flush_wait;
        pr->flush_wait = op;
    } else {
        issue_flush(n, pr, op);
    }
    return 0;
}

void xfer_drop_peer(xfer_node *n, const char *peer) {
    for (int i = 0; i < n->n_peers; i++)
        if (n->peers[i].name && !strcmp(n->peers[i].name, peer)) n->peers[i].failed = true;
    reap(n);
}
