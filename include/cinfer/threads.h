/* cinfer/threads.h - the compute thread pool an engine runs its forward
 * passes on (implemented by src/base/threadpool.c; one struct, two names).
 *
 * Ownership: the caller creates the pool, lends it to one engine
 * (cinfer/engine.h) and destroys it after the engine. A pool must not be
 * shared by two engines at once (its runs must not overlap). This header
 * depends on nothing but the C standard library. */
#ifndef CINFER_THREADS_H
#define CINFER_THREADS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cinfer_thread_pool cinfer_thread_pool;

/* n_threads in total, including the thread that runs the forward pass;
 * <= 0: one per online core. NULL on failure. */
cinfer_thread_pool *cinfer_thread_pool_create(int n_threads);
/* NULL is a no-op. */
void cinfer_thread_pool_destroy(cinfer_thread_pool *p);
int cinfer_thread_pool_size(const cinfer_thread_pool *p);

#ifdef __cplusplus
}
#endif

#endif
