/* prep.h - prompt workers: the CPU-heavy part of starting a generation request (chat template
 * rendering and tokenization, gen_job_prepare) runs here instead of on the HTTP loop, so one
 * huge prompt (megabytes of messages: about a second of work) does not stall every other
 * connection. The loop hands a task over with prep_submit, goes on, and learns that tasks are
 * done through an eventfd (prep_pool_fd, readable when some are) - the same wake-up pattern as
 * the engine's cinfer_engine_fd - then takes them back with prep_take_done and finishes them on
 * the loop.
 *
 * Ownership: a task is owned by the pool from prep_submit until prep_take_done returns it; the
 * worker only calls task->run(task) and touches nothing else of the caller's. The pool owns its
 * threads, queues and eventfd. prep_pool_free stops the workers after the task each is running
 * and returns without running what is still queued: the caller then takes every task back with
 * prep_take_done (ran = false for those never run). Thread-safe: submit / take_done from the loop,
 * run on the workers. */
#ifndef CINFER_SERVE_PREP_H
#define CINFER_SERVE_PREP_H

#include <stdbool.h>

typedef struct prep_task {
    struct prep_task *next; /* the pool's queues */
    void (*run)(struct prep_task *t); /* on a worker thread */
    bool ran;
} prep_task;

typedef struct prep_pool prep_pool;

/* n_threads >= 1 workers; NULL when the threads or the eventfd cannot be made. */
prep_pool *prep_pool_new(int n_threads);
int prep_pool_fd(const prep_pool *p);
void prep_submit(prep_pool *p, prep_task *t);
/* One finished task (oldest first), or NULL; clears the eventfd when it returns the last one. */
prep_task *prep_take_done(prep_pool *p);
/* Stops and joins the workers (see above); every task not yet taken moves to the done queue. */
void prep_pool_stop(prep_pool *p);
/* After prep_pool_stop and taking every task back. */
void prep_pool_free(prep_pool *p);

#endif
