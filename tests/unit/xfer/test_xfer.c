/* test_xfer.c - the KV handoff transport and wire format (src/xfer), two UCX
 * nodes in one process on 127.0.0.1:
 *  - wire: frames and BEGIN round-trip; bad magic, reserved bytes, unknown
 *    kinds, lengths that disagree with the kind, records outside BEGIN's range
 *    or of the wrong size, BEGIN geometry (zero, too many records for the
 *    prompt) are refused; WINDOW only as BEGIN announced it (size, boundary
 *    block, no records; none without records; END counts 0 or 1 of them);
 *    ids parse only as 32 hex digits;
 *  - transport: BEGIN + a 1 MiB RECORDS message (rendezvous) + END arrive
 *    intact through the listener ("host:port") and through the worker address
 *    ("ucx:<hex>") and as a peer of this host ("shm:<hex>": shared memory,
 *    no UCX peer-failure detection), and the flush completes after them; a
 *    flush with nothing outstanding completes too (from the next progress
 *    call); a frame with a bad
 *    magic is dropped by the receiver (never delivered); a message over the
 *    receiver's limit is dropped; a send to a port nobody listens on completes
 *    with an error (callback -1), never hangs;
 *  - placement (xfer_place_fn): a rendezvous RECORDS (1 MiB) the owner places
 *    lands in its buffer intact, over shared memory and the listener,
 *    reported through on_placed (never on_message), after the BEGIN sent
 *    before it was delivered; an eager one (64 bytes) not placed reaches
 *    on_message; back-pressure: "later" stops delivery in order until the
 *    owner has room, and an eager message placed is copied there
 *    (xfer_rx_stats counts pulled, copied bytes and the stall);
 *  - host identity (xfer_host.h): the host id is stable and well formed; this
 *    process is alive; a reaped child and a wrong start time are not. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "xfer/xfer_host.h"
#include "xfer/xfer_ucx.h"
#include "xfer/xfer_wire.h"

typedef struct rx {
    int n, kinds[16];
    uint64_t bytes[16];
    int data_ok;
} rx;

static uint8_t *g_big;
#define BIG (1u << 20)

static void on_msg(void *ctx, const xfer_frame *f, uint8_t *data) {
    rx *r = ctx;
    if (r->n < 16) {
        r->kinds[r->n] = f->kind;
        r->bytes[r->n] = f->data_len;
    }
    r->n++;
    if (f->kind == XFER_MSG_RECORDS && f->data_len == BIG && !memcmp(data, g_big, BIG)) r->data_ok = 1;
    free(data);
}

static void on_done(void *ctx, int status) { *(int *)ctx = status == 0 ? 1 : -1; }

static void pump(xfer_node *a, xfer_node *b, const int *until, int want) {
    time_t t0 = time(NULL);
    while ((until ? *until != want : 1) && time(NULL) - t0 < 20) {
        xfer_poll(a);
        xfer_poll(b);
        if (!until) break;
    }
}

static void test_wire(void) {
    xfer_frame f = {.kind = XFER_MSG_RECORDS, .seq = 2, .count = 3, .data_len = 30}, g;
    memset(f.id, 7, sizeof f.id);
    uint8_t buf[XFER_FRAME_BYTES];
    xfer_frame_encode(&f, buf);
    CHECK(xfer_frame_decode(buf, sizeof buf, 30, &g, NULL) == 0 && g.seq == 2 && g.count == 3);
    CHECK(xfer_frame_decode(buf, sizeof buf, 31, &g, NULL) != 0); /* length disagrees */
    CHECK(xfer_frame_decode(buf, sizeof buf - 1, 30, &g, NULL) != 0);
    buf[50] = 1;
    CHECK(xfer_frame_decode(buf, sizeof buf, 30, &g, NULL) != 0); /* reserved */
    buf[50] = 0;
    buf[0] = 'X';
    CHECK(xfer_frame_decode(buf, sizeof buf, 30, &g, NULL) != 0); /* magic */
    f.kind = 9;
    xfer_frame_encode(&f, buf);
    CHECK(xfer_frame_decode(buf, sizeof buf, 30, &g, NULL) != 0); /* kind */
    f = (xfer_frame){.kind = XFER_MSG_END, .count = 4, .data_len = 1};
    xfer_frame_encode(&f, buf);
    CHECK(xfer_frame_decode(buf, sizeof buf, 1, &g, NULL) != 0); /* END carries no data */
    xfer_begin b = {.prompt_tokens = 100, .block_tokens = 16, .n_records = 6, .record_bytes = 10}, c;
    uint8_t bb[XFER_BEGIN_BYTES];
    xfer_begin_encode(&b, bb);
    CHECK(xfer_begin_decode(bb, sizeof bb, &c, NULL) == 0 && c.n_records == 6 && c.record_bytes == 10);
    b.n_records = 7; /* (100 - 1) / 16 = 6 at most */
    xfer_begin_encode(&b, bb);
    CHECK(xfer_begin_decode(bb, sizeof bb, &c, NULL) != 0);
    b.n_records = 6;
    b.block_tokens = 0;
    xfer_begin_encode(&b, bb);
    CHECK(xfer_begin_decode(bb, sizeof bb, &c, NULL) != 0);
    b.block_tokens = 16;
    xfer_frame r = {.kind = XFER_MSG_RECORDS, .seq = 5, .count = 2, .data_len = 20};
    CHECK(xfer_records_check(&r, &b, NULL) != 0); /* 5 + 2 > 6 */
    r.seq = 4;
    CHECK(xfer_records_check(&r, &b, NULL) == 0);
    r.data_len = 21;
    CHECK(xfer_records_check(&r, &b, NULL) != 0);
    /* window state: BEGIN announces its bytes, WINDOW must match them at block n_records, END says 0 or 1 sent */
    xfer_frame w = {.kind = XFER_MSG_WINDOW, .seq = 6, .data_len = 40};
    CHECK(xfer_window_check(&w, &b, NULL) != 0); /* not announced */
    b.window_bytes = 40;
    xfer_begin_encode(&b, bb);
    CHECK(xfer_begin_decode(bb, sizeof bb, &c, NULL) == 0 && c.window_bytes == 40);
    CHECK(xfer_window_check(&w, &c, NULL) == 0);
    w.seq = 5;
    CHECK(xfer_window_check(&w, &c, NULL) != 0); /* another boundary */
    w.seq = 6;
    w.data_len = 41;
    CHECK(xfer_window_check(&w, &c, NULL) != 0); /* another size */
    w.data_len = 40;
    xfer_frame_encode(&w, buf);
    CHECK(xfer_frame_decode(buf, sizeof buf, 40, &g, NULL) == 0 && g.kind == XFER_MSG_WINDOW && g.seq == 6);
    CHECK(xfer_frame_decode(buf, sizeof buf, 0, &g, NULL) != 0);
    w.count = 1;
    xfer_frame_encode(&w, buf);
    CHECK(xfer_frame_decode(buf, sizeof buf, 40, &g, NULL) != 0); /* WINDOW carries no records */
    b.n_records = 0; /* a window with no records */
    xfer_begin_encode(&b, bb);
    CHECK(xfer_begin_decode(bb, sizeof bb, &c, NULL) != 0);
    b.n_records = 6;
    b.window_bytes = 0;
    f = (xfer_frame){.kind = XFER_MSG_END, .seq = 1, .count = 6};
    xfer_frame_encode(&f, buf);
    CHECK(xfer_frame_decode(buf, sizeof buf, 0, &g, NULL) == 0 && g.seq == 1);
    f.seq = 2;
    xfer_frame_encode(&f, buf);
    CHECK(xfer_frame_decode(buf, sizeof buf, 0, &g, NULL) != 0); /* at most one WINDOW */
    uint8_t id[XFER_ID_BYTES];
    char hex[2 * XFER_ID_BYTES + 1];
    CHECK(xfer_id_parse("00112233445566778899aabbccddeeff", id) == 0);
    xfer_id_hex(id, hex);
    CHECK(!strcmp(hex, "00112233445566778899aabbccddeeff"));
    CHECK(xfer_id_parse("00112233445566778899aabbccddeef", id) != 0);
    CHECK(xfer_id_parse("00112233445566778899aabbccddeefg", id) != 0);
}

static void send_all(xfer_node *s, xfer_node *d, rx *r, const char *peer) {
    uint8_t f1[XFER_FRAME_BYTES], f2[XFER_FRAME_BYTES], f3[XFER_FRAME_BYTES], f4[XFER_FRAME_BYTES];
    uint8_t begin[XFER_BEGIN_BYTES] = {0};
    xfer_begin b = {.prompt_tokens = 1000, .block_tokens = 16, .n_records = 1, .record_bytes = BIG};
    xfer_begin_encode(&b, begin);
    xfer_frame_encode(&(xfer_frame){.kind = XFER_MSG_BEGIN, .data_len = XFER_BEGIN_BYTES}, f1);
    xfer_frame_encode(&(xfer_frame){.kind = XFER_MSG_RECORDS, .count = 1, .data_len = BIG}, f2);
    xfer_frame_encode(&(xfer_frame){.kind = XFER_MSG_END, .count = 1}, f3);
    memcpy(f4, f3, sizeof f4);
    f4[0] = 'Z'; /* bad magic: dropped by the receiver */
    int d1 = 0, d2 = 0, d3 = 0, d4 = 0, fl = 0;
    int before = r->n;
    cf_err err = {0};
    CHECK(xfer_send(s, peer, f1, begin, sizeof begin, on_done, &d1, &err) == 0);
    CHECK(xfer_send(s, peer, f2, g_big, BIG, on_done, &d2, &err) == 0);
    CHECK(xfer_send(s, peer, f4, NULL, 0, on_done, &d4, &err) == 0);
    CHECK(xfer_send(s, peer, f3, NULL, 0, on_done, &d3, &err) == 0);
    CHECK(xfer_flush(s, peer, on_done, &fl, &err) == 0);
    pump(s, d, &fl, 1);
    CHECK(d1 == 1 && d2 == 1 && d3 == 1 && fl == 1);
    for (int i = 0; i < 200 && r->n < before + 3; i++) pump(s, d, NULL, 0);
    CHECK(r->n == before + 3);
    int seen = 0; /* a rendezvous RECORDS may complete after the END behind it: any order */
    for (int i = before; i < before + 3; i++) seen |= 1 << r->kinds[i];
    CHECK(seen == (1 << XFER_MSG_BEGIN | 1 << XFER_MSG_RECORDS | 1 << XFER_MSG_END));
    CHECK(r->data_ok == 1);
    r->data_ok = 0;
}

typedef struct placer {
    uint8_t *dest; /* BIG bytes: where the 1 MiB RECORDS goes */
    uint8_t small[64]; /* where a 64-byte RECORDS goes when place_small */
    int placed_ok, placed_bad, offered, begins, eager_ok, eager_big, small_ok;
    bool place_small; /* the eager 64-byte RECORDS is placed too (copied into small) */
    int later; /* answer XFER_PLACE_LATER this many times for the 1 MiB RECORDS first (back-pressure) */
    int asked_later, stalled_seen, eager_before_big; /* small RECORDS delivered before the big one: order broken */
} placer;

static xfer_place_result place_records(void *ctx, const xfer_frame *f, uint8_t **dst, void **token) {
    placer *p = ctx;
    *token = p;
    if (f->kind == XFER_MSG_RECORDS && f->data_len == 64 && p->place_small) {
        if (p->offered == 0) p->eager_before_big++; /* it is behind the big one */
        *dst = p->small;
        return XFER_PLACE_HERE;
    }
    if (f->kind != XFER_MSG_RECORDS || f->data_len != BIG) return XFER_PLACE_NONE;
    if (p->later > 0) {
        p->later--;
        p->asked_later++;
        return XFER_PLACE_LATER;
    }
    p->offered++;
    if (p->begins != p->offered) p->placed_bad++; /* its BEGIN was delivered first */
    *dst = p->dest;
    return XFER_PLACE_HERE;
}

static void on_placed(void *ctx, const xfer_frame *f, void *token, int status) {
    placer *p = ctx;
    bool big = f->data_len == BIG && !memcmp(p->dest, g_big, BIG);
    bool small = f->data_len == 64 && !memcmp(p->small, g_big, 64);
    bool ok = token == p && status == 0 && f->kind == XFER_MSG_RECORDS && (big || small);
    if (ok && big) p->placed_ok++;
    else if (ok) p->small_ok++;
    else p->placed_bad++;
}

static void on_msg_placer(void *ctx, const xfer_frame *f, uint8_t *data) {
    placer *p = ctx;
    if (f->kind == XFER_MSG_BEGIN) p->begins++;
    else if (f->kind == XFER_MSG_RECORDS && f->data_len == 64 && !memcmp(data, g_big, 64)) p->eager_ok++;
    else if (f->kind == XFER_MSG_RECORDS && f->data_len == BIG && !memcmp(data, g_big, BIG)) p->eager_big++;
    else p->placed_bad++; /* a placed message must not come here */
    free(data);
}

/* A receiver node listening on loopback whose placements go to pl; NULL (pl->dest freed) on failure. */
static xfer_node *open_placer(placer *pl) {
    xfer_node *p = NULL;
    cf_err err = {0};
    xfer_config pc = {.listen = "127.0.0.1:0",
                      .max_message = 2 * BIG,
                      .on_message = on_msg_placer,
                      .place = place_records,
                      .on_placed = on_placed,
                      .ctx = pl};
    CHECK(pl->dest && xfer_open(&pc, &p, &err) == 0);
    if (!p || !pl->dest) {
        xfer_close(p);
        free(pl->dest);
        pl->dest = NULL;
        return NULL;
    }
    return p;
}

/* A receiver that places RECORDS in its own buffer, reached as "shm:" and through its listener. */
static void test_place(xfer_node *s) {
    placer pl = {.dest = calloc(1, BIG)};
    xfer_node *p = open_placer(&pl);
    if (!p) return;
    cf_err err = {0};
    char shm[2 * 4096 + 8], listen[128];
    snprintf(shm, sizeof shm, "shm:%s", xfer_worker_address(p));
    snprintf(listen, sizeof listen, "%s", xfer_listen_addr(p));
    const char *peers[2] = {shm, listen};
    for (int k = 0; k < 2; k++) {
        uint8_t fb[XFER_FRAME_BYTES], fs[XFER_FRAME_BYTES], begin[XFER_BEGIN_BYTES] = {0};
        xfer_frame_encode(&(xfer_frame){.kind = XFER_MSG_RECORDS, .count = 1, .data_len = BIG}, fb);
        xfer_frame_encode(&(xfer_frame){.kind = XFER_MSG_RECORDS, .count = 1, .data_len = 64}, fs);
        uint8_t fbegin[XFER_FRAME_BYTES];
        xfer_frame_encode(&(xfer_frame){.kind = XFER_MSG_BEGIN, .data_len = XFER_BEGIN_BYTES}, fbegin);
        memset(pl.dest, 0, BIG);
        int d1 = 0, d2 = 0, d3 = 0, fl = 0, ok0 = pl.placed_ok + pl.eager_big, eager0 = pl.eager_ok;
        CHECK(xfer_send(s, peers[k], fbegin, begin, sizeof begin, on_done, &d1, &err) == 0);
        CHECK(xfer_send(s, peers[k], fb, g_big, BIG, on_done, &d2, &err) == 0);
        CHECK(xfer_send(s, peers[k], fs, g_big, 64, on_done, &d3, &err) == 0);
        CHECK(xfer_flush(s, peers[k], on_done, &fl, &err) == 0);
        pump(s, p, &fl, 1);
        for (int i = 0; i < 200 && (pl.placed_ok + pl.eager_big < ok0 + 1 || pl.eager_ok < eager0 + 1); i++)
            pump(s, p, NULL, 0);
        CHECK(d1 == 1 && d2 == 1 && d3 == 1 && fl == 1);
        CHECK(pl.placed_ok + pl.eager_big == ok0 + 1 && pl.eager_ok == eager0 + 1); /* once, by either path */
        if (k == 0) CHECK(pl.placed_ok == 1); /* shared memory: 1 MiB goes by rendezvous, placed */
    }
    CHECK(pl.placed_bad == 0 && pl.offered == pl.placed_ok && pl.begins == 2);
    xfer_close(p);
    free(pl.dest);
}

/* Back-pressure: the owner answers "later" for the 1 MiB RECORDS three times; delivery stops there (the
 * eager RECORDS behind it waits too: order is kept), xfer_stalled says so, and once placement is allowed
 * both arrive intact, the eager one copied into its placement. */
static void test_place_later(xfer_node *s) {
    placer pl = {.dest = calloc(1, BIG), .place_small = true, .later = 3};
    xfer_node *p = open_placer(&pl);
    if (!p) return;
    cf_err err = {0};
    char shm[2 * 4096 + 8];
    snprintf(shm, sizeof shm, "shm:%s", xfer_worker_address(p));
    uint8_t fb[XFER_FRAME_BYTES], fs[XFER_FRAME_BYTES], fbegin[XFER_FRAME_BYTES], begin[XFER_BEGIN_BYTES] = {0};
    xfer_frame_encode(&(xfer_frame){.kind = XFER_MSG_RECORDS, .count = 1, .data_len = BIG}, fb);
    xfer_frame_encode(&(xfer_frame){.kind = XFER_MSG_RECORDS, .count = 1, .data_len = 64}, fs);
    xfer_frame_encode(&(xfer_frame){.kind = XFER_MSG_BEGIN, .data_len = XFER_BEGIN_BYTES}, fbegin);
    int d1 = 0, d2 = 0, d3 = 0, fl = 0;
    CHECK(xfer_send(s, shm, fbegin, begin, sizeof begin, on_done, &d1, &err) == 0);
    CHECK(xfer_send(s, shm, fb, g_big, BIG, on_done, &d2, &err) == 0);
    CHECK(xfer_send(s, shm, fs, g_big, 64, on_done, &d3, &err) == 0);
    CHECK(xfer_flush(s, shm, on_done, &fl, &err) == 0);
    for (int i = 0; i < 400 && (fl != 1 || pl.small_ok < 1); i++) {
        pump(s, p, NULL, 0);
        if (xfer_stalled(p)) pl.stalled_seen++;
    }
    CHECK(fl == 1 && d1 == 1 && d2 == 1 && d3 == 1);
    CHECK(pl.asked_later == 3 && pl.stalled_seen >= 1 && !xfer_stalled(p));
    CHECK(pl.placed_ok == 1 && pl.small_ok == 1 && pl.eager_before_big == 0 && pl.placed_bad == 0);
    xfer_rx_stats st;
    xfer_get_rx_stats(p, &st);
    CHECK(st.pulled_bytes == BIG && st.copied_bytes == 64 && st.stalls == 1);
    xfer_close(p);
    free(pl.dest);
}

/* A receiver with room for one 1 MiB RECORDS at a time (a receive-buffer pool that holds one handoff):
 * the next one waits ("later") until the one before is reported placed. That report must not queue
 * behind the waiting message: it did, and a full pool then deadlocked (found with bench_handoff's
 * one-handoff pool). Four messages in flight at once, all four must arrive intact. */
typedef struct one_slot {
    uint8_t *dest;
    bool busy;
    int placed_ok, placed_bad, asked_later;
} one_slot;

static xfer_place_result place_one(void *ctx, const xfer_frame *f, uint8_t **dst, void **token) {
    one_slot *o = ctx;
    *token = o;
    if (f->kind != XFER_MSG_RECORDS || f->data_len != BIG) return XFER_PLACE_NONE;
    if (o->busy) {
        o->asked_later++;
        return XFER_PLACE_LATER;
    }
    o->busy = true;
    *dst = o->dest;
    return XFER_PLACE_HERE;
}

static void placed_one(void *ctx, const xfer_frame *f, void *token, int status) {
    one_slot *o = ctx;
    if (token == o && status == 0 && f->data_len == BIG && !memcmp(o->dest, g_big, BIG)) o->placed_ok++;
    else o->placed_bad++;
    memset(o->dest, 0, BIG); /* the next message must bring its own bytes */
    o->busy = false;
}

static void msg_one(void *ctx, const xfer_frame *f, uint8_t *data) {
    (void)f;
    ((one_slot *)ctx)->placed_bad++; /* every message here is placed */
    free(data);
}

static void test_place_one_slot(xfer_node *s) {
    one_slot o = {.dest = calloc(1, BIG)};
    xfer_node *p = NULL;
    cf_err err = {0};
    xfer_config pc = {
        .max_message = 2 * BIG, .on_message = msg_one, .place = place_one, .on_placed = placed_one, .ctx = &o};
    CHECK(o.dest && xfer_open(&pc, &p, &err) == 0);
    if (!p || !o.dest) {
        xfer_close(p);
        free(o.dest);
        return;
    }
    char shm[2 * 4096 + 8];
    snprintf(shm, sizeof shm, "shm:%s", xfer_worker_address(p));
    uint8_t fb[XFER_FRAME_BYTES];
    xfer_frame_encode(&(xfer_frame){.kind = XFER_MSG_RECORDS, .count = 1, .data_len = BIG}, fb);
    int d[4] = {0}, fl = 0;
    for (int i = 0; i < 4; i++) CHECK(xfer_send(s, shm, fb, g_big, BIG, on_done, &d[i], &err) == 0);
    CHECK(xfer_flush(s, shm, on_done, &fl, &err) == 0);
    time_t t0 = time(NULL);
    while ((fl != 1 || o.placed_ok < 4) && o.placed_bad == 0 && time(NULL) - t0 < 20) pump(s, p, NULL, 0);
    CHECK(fl == 1 && d[0] == 1 && d[1] == 1 && d[2] == 1 && d[3] == 1);
    CHECK(o.placed_ok == 4 && o.placed_bad == 0 && !xfer_stalled(p));
    xfer_close(p);
    free(o.dest);
}

static void test_host(void) {
    char a[XFER_HOST_ID_MAX], b[XFER_HOST_ID_MAX];
    CHECK(xfer_host_id(a, sizeof a) == 0);
    CHECK(xfer_host_id(b, sizeof b) == 0);
    CHECK(strcmp(a, b) == 0 && strlen(a) > 36 && strchr(a, '/') != NULL);
    CHECK(xfer_host_id(a, 8) == -1); /* too small: refused, not truncated */
    int64_t pid;
    uint64_t start;
    CHECK(xfer_process_self(&pid, &start) == 0 && pid == (int64_t)getpid());
    CHECK(xfer_process_alive(pid, start) == 1);
    CHECK(xfer_process_alive(pid, start + 1) == 0); /* same pid, another process */
    CHECK(xfer_process_alive(0, 0) == -1);
    pid_t child = fork();
    if (child == 0) _exit(0);
    CHECK(child > 0);
    int status;
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(xfer_process_alive((int64_t)child, start) == 0);
}

static void flush_idle(xfer_node *s, xfer_node *d, const char *peer) {
    int fl = 0;
    cf_err err = {0};
    CHECK(xfer_flush(s, peer, on_done, &fl, &err) == 0);
    CHECK(fl == 0); /* never from inside the call */
    pump(s, d, &fl, 1);
    CHECK(fl == 1);
}

int main(void) {
    test_wire();
    test_host();
    g_big = malloc(BIG);
    for (uint32_t i = 0; i < BIG; i++) g_big[i] = (uint8_t)(i * 31 + 7);
    rx r = {0};
    xfer_node *d = NULL, *s = NULL;
    cf_err err = {0};
    xfer_config dc = {.listen = "127.0.0.1:0", .max_message = 2 * BIG, .on_message = on_msg, .ctx = &r};
    xfer_config sc = {.on_message = on_msg, .ctx = &r};
    if (xfer_open(&dc, &d, &err) || xfer_open(&sc, &s, &err)) {
        fprintf(stderr, "UCX unavailable: %s\n", err.msg);
        xfer_close(d);
        xfer_close(s);
        free(g_big);
        return tu_missing_fixture("UCX (libucx)");
    }
    char listen[128], worker[2 * 4096 + 8];
    snprintf(listen, sizeof listen, "%s", xfer_listen_addr(d));
    CHECK(strncmp(listen, "127.0.0.1:", 10) == 0);
    snprintf(worker, sizeof worker, "ucx:%s", xfer_worker_address(d));
    send_all(s, d, &r, listen);
    send_all(s, d, &r, worker);
    flush_idle(s, d, worker);
    char shm[2 * 4096 + 8];
    snprintf(shm, sizeof shm, "shm:%s", xfer_worker_address(d));
    send_all(s, d, &r, shm);
    flush_idle(s, d, shm);
    test_place(s);
    test_place_later(s);
    test_place_one_slot(s);
    /* over the receiver's limit: dropped, never delivered */
    uint8_t *huge = calloc(1, 3 * BIG);
    uint8_t fh[XFER_FRAME_BYTES];
    xfer_frame_encode(&(xfer_frame){.kind = XFER_MSG_RECORDS, .count = 1, .data_len = 3 * BIG}, fh);
    int dh = 0, n0 = r.n;
    CHECK(xfer_send(s, listen, fh, huge, 3 * BIG, on_done, &dh, &err) == 0);
    pump(s, d, &dh, 1);
    for (int i = 0; i < 100; i++) pump(s, d, NULL, 0);
    CHECK(r.n == n0);
    /* nobody listens there: the send completes with an error */
    char dead[64];
    snprintf(dead, sizeof dead, "127.0.0.1:1");
    int dd = 0;
    if (xfer_send(s, dead, fh, NULL, 0, on_done, &dd, &err) == 0) {
        time_t t0 = time(NULL);
        while (dd == 0 && time(NULL) - t0 < 20) {
            xfer_poll(s);
            xfer_poll(d);
        }
        CHECK(dd == -1);
    }
    CHECK(xfer_pending(s) == 0);
    xfer_close(s);
    xfer_close(d);
    free(huge);
    free(g_big);
    return test_finish();
}
