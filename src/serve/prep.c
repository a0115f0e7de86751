/* prep.c - prompt workers (see prep.h): a mutex-protected FIFO of submitted tasks, N threads
 * that run them, a FIFO of finished tasks, and an eventfd written once per finished task (the
 * loop drains it when it takes the last one back).
 * Invariants: a task is in exactly one of {pending queue, a worker's hands, done queue, the caller's
 * hands}; `stop` is only set under the mutex and makes workers exit before taking new work. */
#include "serve/prep.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct prep_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    prep_task *pending, *pending_tail, *done, *done_tail;
    bool stop;
    int efd;
    pthread_t *threads;
    int n_threads;
};

static void push(prep_task **head, prep_task **tail, prep_task *t) {
    t->next = NULL;
    if (*tail) (*tail)->next = t;
    else *head = t;
    *tail = t;
}

static prep_task *pop(prep_task **head, prep_task **tail) {
    prep_task *t = *head;
    if (t && !(*head = t->next)) *tail = NULL;
    return t;
}

static void signal_done(prep_pool *p) {
    uint64_t one = 1;
    ssize_t w = write(p->efd, &one, sizeof one); /* EAGAIN: the counter is already nonzero */
    (void)w;
}

static void *worker(void *arg) {
    prep_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && !p->pending) pthread_cond_wait(&p->cv, &p->mu);
        if (p->stop) break;
        prep_task *t = pop(&p->pending, &p->pending_tail);
        pthread_mutex_unlock(&p->mu);
        t->run(t);
        t->ran = true;
        pthread_mutex_lock(&p->mu);
        push(&p->done, &p->done_tail, t);
        signal_done(p);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

prep_pool *prep_pool_new(int n_threads) {
    prep_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    p->threads = calloc((size_t)(n_threads > 0 ? n_threads : 1), sizeof *p->threads);
    if (p->efd < 0 || !p->threads || pthread_mutex_init(&p->mu, NULL)) {
        if (p->efd >= 0) close(p->efd);
        free(p->threads);
        free(p);
        return NULL;
    }
    pthread_cond_init(&p->cv, NULL);
    for (int i = 0; i < (n_threads > 0 ? n_threads : 1); i++) {
        if (pthread_create(&p->threads[i], NULL, worker, p)) break;
        p->n_threads++;
    }
    if (p->n_threads == 0) {
        prep_pool_stop(p);
        prep_pool_free(p);
        return NULL;
    }
    return p;
}

int prep_pool_fd(const prep_pool *p) { return p->efd; }

void prep_submit(prep_pool *p, prep_task *t) {
    t->ran = false;
    pthread_mutex_lock(&p->mu);
    if (p->stop) { /* no workers any more: handed straight back, not run */
        push(&p->done, &p->done_tail, t);
        signal_done(p);
    } else {
        push(&p->pending, &p->pending_tail, t);
        pthread_cond_signal(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
}

prep_task *prep_take_done(prep_pool *p) {
    pthread_mutex_lock(&p->mu);
    prep_task *t = pop(&p->done, &p->done_tail);
    if (!p->done) { /* the last one: reset the eventfd (a later push writes it again) */
        uint64_t v;
        ssize_t r = read(p->efd, &v, sizeof v);
        (void)r;
    }
    pthread_mutex_unlock(&p->mu);
    return t;
}

void prep_pool_stop(prep_pool *p) {
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    p->n_threads = 0;
    pthread_mutex_lock(&p->mu);
    prep_task *t;
    while ((t = pop(&p->pending, &p->pending_tail))) push(&p->done, &p->done_tail, t);
    pthread_mutex_unlock(&p->mu);
}

void prep_pool_free(prep_pool *p) {
    if (!p) return;
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    close(p->efd);
    free(p->threads);
    free(p);
}
