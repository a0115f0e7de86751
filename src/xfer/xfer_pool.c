/* xfer_pool.c - see xfer_pool.h. A first-fit allocator of record runs over
 * one mmap'd arena: free runs sorted by offset (merged on put), live runs in
 * an unsorted table (found by offset on put). Both tables are sized at
 * creation; a mutex guards them (get: the loop thread; put: the loop or the
 * engine thread). The pool is destroyed by whichever comes last: the owner's
 * xfer_pool_free or the put of the last run. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/log.h"
#include "xfer/xfer_pool.h"

typedef struct xp_run {
    uint64_t off, len; /* units */
} xp_run;

struct xfer_pool {
    pthread_mutex_t mu;
    uint8_t *arena;
    size_t unit, map_bytes;
    uint64_t n_units;
    xp_run *free_runs; /* sorted by off, never adjacent (merged) */
    int32_t n_free;
    xp_run *live; /* handed out */
    int32_t n_live, max_runs;
    uint64_t used_units, high_units, gets;
    bool closed; /* xfer_pool_free was called: the last put frees the pool */
};

static void xp_prefault(uint8_t *a, size_t bytes) {
    long pg = sysconf(_SC_PAGESIZE);
    size_t step = pg > 0 ? (size_t)pg : 4096;
    for (size_t o = 0; o < bytes; o += step) a[o] = 0; /* a write: the page is really allocated */
}

int xfer_pool_new(size_t unit, uint64_t bytes, int32_t max_runs, bool prefault, xfer_pool **out, cf_err *err) {
    *out = NULL;
    if (unit == 0 || max_runs < 1 || bytes < unit)
        return cf_fail(err, "handoff pool: %llu bytes hold no record of %zu", (unsigned long long)bytes, unit);
    xfer_pool *p = calloc(1, sizeof *p);
    if (!p) return cf_fail(err, "out of memory");
    p->unit = unit;
    p->n_units = bytes / unit;
    p->map_bytes = (size_t)(p->n_units * unit);
    p->max_runs = max_runs;
    p->free_runs = calloc((size_t)max_runs + 1, sizeof *p->free_runs);
    p->live = calloc((size_t)max_runs, sizeof *p->live);
    void *a = mmap(NULL, p->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (a == MAP_FAILED || !p->free_runs || !p->live || pthread_mutex_init(&p->mu, NULL)) {
        if (a != MAP_FAILED) munmap(a, p->map_bytes);
        free(p->free_runs);
        free(p->live);
        free(p);
        return cf_fail(err, "handoff pool: cannot map %zu bytes", (size_t)bytes);
    }
    p->arena = a;
#ifdef MADV_HUGEPAGE
    (void)madvise(a, p->map_bytes, MADV_HUGEPAGE); /* fewer, larger faults; advisory only */
#endif
    if (prefault) xp_prefault(p->arena, p->map_bytes);
    p->free_runs[0] = (xp_run){0, p->n_units};
    p->n_free = 1;
    *out = p;
    return 0;
}

static void xp_destroy(xfer_pool *p) {
    munmap(p->arena, p->map_bytes);
    pthread_mutex_destroy(&p->mu);
    free(p->free_runs);
    free(p->live);
    free(p);
}

void xfer_pool_free(xfer_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->closed = true;
    bool last = p->n_live == 0;
    pthread_mutex_unlock(&p->mu);
    if (last) xp_destroy(p);
}

size_t xfer_pool_unit(const xfer_pool *p) { return p->unit; }

bool xfer_pool_fits(const xfer_pool *p, uint64_t n_units) { return n_units >= 1 && n_units <= p->n_units; }

bool xfer_pool_owns(const xfer_pool *p, const void *buf) {
    const uint8_t *b = buf;
    return b >= p->arena && b < p->arena + p->map_bytes;
}

uint8_t *xfer_pool_get(xfer_pool *p, uint64_t n) {
    if (n == 0) return NULL;
    uint8_t *got = NULL;
    pthread_mutex_lock(&p->mu);
    for (int32_t i = 0; i < p->n_free && p->n_live < p->max_runs; i++) {
        xp_run *f = &p->free_runs[i];
        if (f->len < n) continue;
        p->live[p->n_live++] = (xp_run){f->off, n};
        got = p->arena + f->off * p->unit;
        f->off += n;
        f->len -= n;
        if (f->len == 0) {
            memmove(f, f + 1, (size_t)(p->n_free - i - 1) * sizeof *f);
            p->n_free--;
        }
        p->used_units += n;
        if (p->used_units > p->high_units) p->high_units = p->used_units;
        p->gets++;
        break;
    }
    pthread_mutex_unlock(&p->mu);
    return got;
}

/* Inserts run r into the sorted free table, merged with its neighbours (the table has room: a free run
 * lies between two live runs, so there are at most n_live + 1). */
static void xp_insert_free(xfer_pool *p, xp_run r) {
    int32_t i = 0;
    while (i < p->n_free && p->free_runs[i].off < r.off) i++;
    bool join_prev = i > 0 && p->free_runs[i - 1].off + p->free_runs[i - 1].len == r.off;
    bool join_next = i < p->n_free && r.off + r.len == p->free_runs[i].off;
    if (join_prev && join_next) {
        p->free_runs[i - 1].len += r.len + p->free_runs[i].len;
        memmove(&p->free_runs[i], &p->free_runs[i + 1], (size_t)(p->n_free - i - 1) * sizeof r);
        p->n_free--;
    } else if (join_prev) {
        p->free_runs[i - 1].len += r.len;
    } else if (join_next) {
        p->free_runs[i].off = r.off;
        p->free_runs[i].len += r.len;
    } else {
        memmove(&p->free_runs[i + 1], &p->free_runs[i], (size_t)(p->n_free - i) * sizeof r);
        p->free_runs[i] = r;
        p->n_free++;
    }
}

void xfer_pool_put(xfer_pool *p, uint8_t *buf) {
    if (!buf) return;
    uint64_t off = (uint64_t)(buf - p->arena) / p->unit;
    pthread_mutex_lock(&p->mu);
    int32_t i = 0;
    while (i < p->n_live && p->live[i].off != off) i++;
    if (i == p->n_live) {
        pthread_mutex_unlock(&p->mu);
        LOG_ERROR("handoff pool: a buffer given back that is not out (ignored)");
        return;
    }
    xp_run r = p->live[i];
    p->live[i] = p->live[--p->n_live];
    p->used_units -= r.len;
    xp_insert_free(p, r);
    bool last = p->closed && p->n_live == 0;
    pthread_mutex_unlock(&p->mu);
    if (last) xp_destroy(p); /* the owner let go before this run came back */
}

void xfer_pool_release(void *pool, void *buf) { xfer_pool_put(pool, buf); }

void xfer_pool_get_stats(xfer_pool *p, xfer_pool_stats *out) {
    pthread_mutex_lock(&p->mu);
    *out = (xfer_pool_stats){.capacity_bytes = p->n_units * p->unit,
                             .used_bytes = p->used_units * p->unit,
                             .high_water_bytes = p->high_units * p->unit,
                             .gets = p->gets};
    pthread_mutex_unlock(&p->mu);
}
