/* test_engine_check.c - the engine's invariant checker (engine_check.c) sees
 * deliberate corruption (stories260K):
 *  - after a request ran to its end (blocks cached, nothing referenced), the
 *    checker passes;
 *  - one extra reference on a cached block (a leaked ref count): reported as a
 *    reference mismatch; undone, it passes again;
 *  - the pool's cached flag cleared under the prefix cache (a block with a key
 *    the pool thinks is uncached): reported; restored, it passes;
 *  - eng_check_or_abort on a corrupted engine aborts with the message (in a
 *    forked child).
 * The engine thread is idle (no request) and e->mu is held while the test
 * reads or writes the engine's state. In the sanitizer build the same checker
 * also runs after every step of every engine test (CINFER_CHECK_INVARIANTS). */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/engine_internal.h"
#include "engine_testlib.h"

/* First cached, unreferenced block, or -1. */
static int32_t cached_block(cinfer_engine *e) {
    for (int32_t b = 0; b < kv_pool_n_blocks(e->kv); b++)
        if (kv_pool_is_cached(e->kv, b) && kv_pool_refs(e->kv, b) == 0) return b;
    return -1;
}

static void test_corruption(const model *m, thread_pool *tp) {
    cinfer_engine *e = tl_engine(m, tp, 4 << 20, 256, 4, 512);
    CHECK(e != NULL);
    if (!e) return;
    int32_t prompt[100];
    tl_prompt(prompt, 100);
    cinfer_request r = cinfer_request_default();
    r.prompt = prompt;
    r.n_prompt = 100;
    r.max_tokens = 8;
    static run_result res;
    CHECK(tl_run(e, &r, &res) == 0);
    char why[256] = "";
    pthread_mutex_lock(&e->mu);
    CHECKF(eng_check_invariants(e, why, sizeof why) == 0, "%s", why);
    int32_t b = cached_block(e);
    CHECK(b >= 0);
    if (b >= 0) {
        kv_pool_ref(e->kv, b); /* a reference nobody holds */
        why[0] = 0;
        CHECK(eng_check_invariants(e, why, sizeof why) == -1 && strstr(why, "references"));
        fprintf(stderr, "extra reference reported: %s\n", why);
        kv_pool_unref(e->kv, b);
        CHECKF(eng_check_invariants(e, why, sizeof why) == 0, "%s", why);

        kv_pool_unmark_cached(e->kv, b); /* the prefix cache still has its key */
        why[0] = 0;
        CHECK(eng_check_invariants(e, why, sizeof why) == -1 && strstr(why, "prefix cache"));
        fprintf(stderr, "cached flag mismatch reported: %s\n", why);
        int32_t again = -1; /* the block went onto the free stack's top: take it back and re-cache it */
        cf_err aerr;
        CHECK(kv_pool_alloc(e->kv, &again, &aerr) == 0 && again == b);
        kv_pool_mark_cached(e->kv, b);
        kv_pool_unref(e->kv, b);
        CHECKF(eng_check_invariants(e, why, sizeof why) == 0, "%s", why);

        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            kv_pool_ref(e->kv, b);
            eng_check_or_abort(e, "test");
            _exit(0); /* not reached when the checker works */
        }
        int st = 0;
        CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
        CHECKF(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "child status %d", st);
    }
    pthread_mutex_unlock(&e->mu);
    cinfer_engine_destroy(e);
}

int main(void) {
    model *m;
    cf_err err = {0};
    if (model_load(shared_path("models/stories260K.gguf"), &m, &err)) return tu_missing_fixture(err.msg);
    thread_pool *tp = pool_create(1);
    test_corruption(m, tp);
    pool_destroy(tp);
    model_free(m);
    return test_finish();
}
