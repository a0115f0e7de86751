/* threadpool.c - persistent, barrier-synchronised compute pool (see threadpool.h).
 *
 * Owns: the worker threads (nth - 1 of them; the caller is thread 0) and one
 * shared "job" slot (fn, ctx).
 * Protocol (lock-free on the hot path):
 *   - pool_run publishes fn/ctx, sets `pending` = nth - 1, then bumps the
 *     `generation` counter (seq_cst) and futex-wakes workers if any sleep.
 *   - A worker waits for `generation` to change: it spins (pause) for a while,
 *     then announces itself in `sleepers` and futex-waits on `generation`.
 *   - Slot ith of run g is executed by whoever first moves claimed[ith] from an
 *     older generation to g (CAS): normally worker ith; but after running
 *     ith = 0 the caller claims every slot whose worker has not started yet
 *     (descheduled, or still waking from the futex) and runs it itself. So a
 *     run never waits for a thread that is not running. Claims only move
 *     forward (a stale worker never claims an older generation).
 *   - Whoever ran a slot decrements `pending` (release); the caller spins
 *     (yielding after a while) until it is 0 (acquire), so all effects of fn
 *     are visible when pool_run returns.
 * Invariant: pool_run calls never overlap (single engine thread), so the job
 * slot is only written while every worker is idle. Destroy sets `quit` and
 * runs a no-op generation to wake everyone. */
#include "base/threadpool.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define POOL_SPIN_ITERS 2000 /* pause ~140 cycles on recent Intel: ~100 us of spinning before sleeping */

typedef struct worker {
    thread_pool *pool;
    int ith;
    pthread_t tid;
} worker;

struct cinfer_thread_pool {
    int nth;
    worker *workers;
    pool_task_fn fn;
    void *ctx;
    _Atomic uint32_t generation;
    _Atomic uint32_t *claimed; /* [nth]: last generation whose slot ith was claimed */
    _Atomic int pending;
    _Atomic int sleepers;
    _Atomic int quit;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void futex_wait(_Atomic uint32_t *addr, uint32_t expected) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* Blocks until generation != seen; returns the new generation. */
static uint32_t wait_new_generation(thread_pool *p, uint32_t seen) {
    for (int i = 0; i < POOL_SPIN_ITERS; i++) {
        uint32_t g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g != seen) return g;
        cpu_relax();
    }
    for (;;) {
        atomic_fetch_add_explicit(&p->sleepers, 1, memory_order_seq_cst);
        uint32_t g = atomic_load_explicit(&p->generation, memory_order_seq_cst);
        if (g == seen) futex_wait(&p->generation, seen);
        atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_seq_cst);
        g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g != seen) return g;
    }
}

/* Claims slot ith of run g if nobody has; true if the caller must run it. */
static int claim_slot(thread_pool *p, int ith, uint32_t g) {
    uint32_t c = atomic_load_explicit(&p->claimed[ith], memory_order_acquire);
    while ((int32_t)(c - g) < 0)
        if (atomic_compare_exchange_weak_explicit(&p->claimed[ith], &c, g, memory_order_acq_rel, memory_order_acquire))
            return 1;
    return 0;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    thread_pool *p = w->pool;
    uint32_t seen = 0; /* workers start before the first run: generation 0 (not a load, which could
                          already observe a run published before this thread got scheduled) */
    for (;;) {
        seen = wait_new_generation(p, seen);
        if (atomic_load_explicit(&p->quit, memory_order_acquire)) break;
        if (claim_slot(p, w->ith, seen)) {
            p->fn(p->ctx, w->ith, p->nth);
            atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
        }
    }
    return NULL;
}

static int online_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

thread_pool *pool_create(int n_threads) {
    if (n_threads <= 0) n_threads = online_cores();
    thread_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->nth = n_threads;
    p->workers = calloc((size_t)n_threads, sizeof *p->workers);
    p->claimed = calloc((size_t)n_threads, sizeof *p->claimed);
    if (!p->workers || !p->claimed) {
        free(p->workers);
        free(p->claimed);
        free(p);
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        p->workers[i].pool = p;
        p->workers[i].ith = i;
        if (pthread_create(&p->workers[i].tid, NULL, worker_main, &p->workers[i]) != 0) {
            p->nth = i; /* only threads 1..i-1 exist: shut those down */
            pool_destroy(p);
            return NULL;
        }
    }
    return p;
}

static void noop_task(void *ctx, int ith, int nth) { (void)ctx, (void)ith, (void)nth; }

void pool_destroy(thread_pool *p) {
    if (!p) return;
    atomic_store_explicit(&p->quit, 1, memory_order_release);
    p->fn = noop_task;
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_seq_cst);
    futex_wake_all(&p->generation);
    for (int i = 1; i < p->nth; i++) pthread_join(p->workers[i].tid, NULL);
    free(p->workers);
    free(p->claimed);
    free(p);
}

int pool_size(const thread_pool *p) { return p->nth; }

void pool_run(thread_pool *p, pool_task_fn fn, void *ctx) {
    if (p->nth == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->pending, p->nth - 1, memory_order_relaxed);
    uint32_t g = atomic_fetch_add_explicit(&p->generation, 1, memory_order_seq_cst) + 1;
    if (atomic_load_explicit(&p->sleepers, memory_order_seq_cst) > 0) futex_wake_all(&p->generation);
    fn(ctx, 0, p->nth);
    for (int ith = 1; ith < p->nth; ith++)
        if (claim_slot(p, ith, g)) { /* its worker has not started: run the slot here */
            fn(ctx, ith, p->nth);
            atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
        }
    for (long i = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; i++) {
        if (i < POOL_SPIN_ITERS) cpu_relax();
        else sched_yield();
    }
}

/* ---- public names (include/cinfer/threads.h) ---- */
cinfer_thread_pool *cinfer_thread_pool_create(int n_threads) { return pool_create(n_threads); }
void cinfer_thread_pool_destroy(cinfer_thread_pool *p) { pool_destroy(p); }
int cinfer_thread_pool_size(const cinfer_thread_pool *p) { return pool_size(p); }
