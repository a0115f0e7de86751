/* test_xfer_pool.c - the decode worker's receive-buffer pool (xfer_pool.h):
 *  - runs are contiguous, inside the arena, lowest address first, and never
 *    overlap; a run larger than the arena does not fit; a full pool answers
 *    NULL (back-pressure) and has room again after a put;
 *  - free runs merge with both neighbours (after every run is back, the
 *    whole arena is one run again);
 *  - a buffer given back is handed out again (recycled: the same warm pages);
 *  - the live-run limit makes a get wait like a full pool;
 *  - puts from another thread (the engine's) while the owner gets;
 *  - the owner may free the pool while a run is still out: the last put
 *    destroys it (run under ASan: no leak, no use after free);
 *  - stats: capacity, used, high water, gets. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "xfer/xfer_pool.h"

#define UNIT 1000 /* not a page multiple on purpose */

static void test_first_fit(void) {
    xfer_pool *p = NULL;
    cf_err err = {0};
    CHECK(xfer_pool_new(UNIT, 10 * UNIT + 7, 8, true, &p, &err) == 0);
    if (!p) return;
    CHECK(xfer_pool_fits(p, 10) && !xfer_pool_fits(p, 11) && !xfer_pool_fits(p, 0));
    uint8_t *a = xfer_pool_get(p, 3), *b = xfer_pool_get(p, 3), *c = xfer_pool_get(p, 4);
    CHECK(a && b == a + 3 * UNIT && c == b + 3 * UNIT);
    CHECK(xfer_pool_owns(p, a) && xfer_pool_owns(p, c + 4 * UNIT - 1) && !xfer_pool_owns(p, c + 4 * UNIT));
    memset(a, 1, 3 * UNIT);
    memset(b, 2, 3 * UNIT);
    memset(c, 3, 4 * UNIT);
    CHECK(xfer_pool_get(p, 1) == NULL); /* full: wait */
    xfer_pool_put(p, b);
    CHECK(xfer_pool_get(p, 4) == NULL); /* 3 free units: not enough */
    uint8_t *d = xfer_pool_get(p, 2);
    CHECK(d == b); /* recycled: the same pages */
    xfer_pool_put(p, a);
    xfer_pool_put(p, d); /* merges with a's run and the unit after it: 6 free at the start */
    uint8_t *e = xfer_pool_get(p, 7);
    CHECK(e == NULL);
    e = xfer_pool_get(p, 6);
    CHECK(e == a);
    xfer_pool_stats st;
    xfer_pool_get_stats(p, &st);
    CHECK(st.capacity_bytes == 10 * UNIT && st.used_bytes == 10 * UNIT && st.high_water_bytes == 10 * UNIT &&
          st.gets == 5);
    xfer_pool_put(p, e);
    xfer_pool_put(p, c);
    CHECK((a = xfer_pool_get(p, 10)) != NULL); /* every run merged back into one */
    xfer_pool_put(p, a);
    xfer_pool_free(p);
}

static void test_run_limit(void) {
    xfer_pool *p = NULL;
    cf_err err = {0};
    CHECK(xfer_pool_new(UNIT, 100 * UNIT, 2, false, &p, &err) == 0);
    if (!p) return;
    uint8_t *a = xfer_pool_get(p, 1), *b = xfer_pool_get(p, 1);
    CHECK(a && b && xfer_pool_get(p, 1) == NULL); /* two live runs at most */
    xfer_pool_put(p, a);
    CHECK((a = xfer_pool_get(p, 1)) != NULL);
    xfer_pool_put(p, a);
    xfer_pool_put(p, b);
    xfer_pool_free(p);
    CHECK(xfer_pool_new(UNIT, UNIT - 1, 2, false, &p, &err) == -1 && p == NULL); /* holds no record */
}

typedef struct putter {
    xfer_pool *p;
    uint8_t *bufs[64];
    int n;
} putter;

static void *put_all(void *arg) {
    putter *t = arg;
    for (int i = 0; i < t->n; i++) xfer_pool_put(t->p, t->bufs[i]);
    return NULL;
}

static void test_threads(void) {
    xfer_pool *p = NULL;
    cf_err err = {0};
    CHECK(xfer_pool_new(UNIT, 256 * UNIT, 128, false, &p, &err) == 0);
    if (!p) return;
    putter t = {.p = p, .n = 64};
    for (int i = 0; i < 64; i++) CHECK((t.bufs[i] = xfer_pool_get(p, 2)) != NULL);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, put_all, &t) == 0);
    int got = 0; /* the owner keeps taking and giving back while the other thread gives back */
    for (int i = 0; i < 2000; i++) {
        uint8_t *x = xfer_pool_get(p, 1 + i % 3);
        if (x) {
            got++;
            xfer_pool_put(p, x);
        }
    }
    CHECK(pthread_join(th, NULL) == 0);
    CHECK(got > 0);
    xfer_pool_stats st;
    xfer_pool_get_stats(p, &st);
    CHECK(st.used_bytes == 0);
    uint8_t *all = xfer_pool_get(p, 256);
    CHECK(all != NULL);
    xfer_pool_put(p, all);
    xfer_pool_free(p);
}

/* The server closes while an engine request still holds a buffer: the engine's put frees the pool. */
static void test_free_before_put(void) {
    xfer_pool *p = NULL;
    cf_err err = {0};
    CHECK(xfer_pool_new(UNIT, 4 * UNIT, 4, false, &p, &err) == 0);
    if (!p) return;
    uint8_t *a = xfer_pool_get(p, 2);
    CHECK(a != NULL);
    xfer_pool_free(p);
    memset(a, 7, 2 * UNIT); /* still valid */
    xfer_pool_release(p, a); /* the last run back: destroyed here */
}

int main(void) {
    test_first_fit();
    test_run_limit();
    test_threads();
    test_free_before_put();
    return test_finish();
}
