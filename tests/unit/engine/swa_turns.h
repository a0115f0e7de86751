/* swa_turns.h - the two-turn conversation the window-state tests (test_engine_swa*.c) run:
 * turn 1 is LEN1 random tokens, turn 2 is turn 1 + its greedy answer + new random tokens up to
 * LEN2; ref1/ref2 are their N_GEN-token greedy continuations from the single-sequence reference
 * (tl_greedy). The including test defines N_GEN, LEN1 and LEN2 first and includes
 * engine_testlib.h. Header-only; one copy of the prompts per test binary. */
#ifndef CINFER_TEST_SWA_TURNS_H
#define CINFER_TEST_SWA_TURNS_H

#include <string.h>

#include "engine_testlib.h"

static int32_t p1[LEN1], p2[LEN2], ref1[N_GEN], ref2[N_GEN];

/* Fills both turns' prompts from tl_rand and computes their references. */
static inline void make_turns(const model *m, thread_pool *pool) {
    int n_vocab = model_get_hparams(m)->n_vocab;
    for (int j = 0; j < LEN1; j++) p1[j] = 3 + (int32_t)(tl_rand() % (uint32_t)(n_vocab - 3));
    tl_greedy(m, pool, p1, LEN1, N_GEN, ref1);
    memcpy(p2, p1, sizeof p1);
    memcpy(p2 + LEN1, ref1, sizeof ref1);
    for (int j = LEN1 + N_GEN; j < LEN2; j++) p2[j] = 3 + (int32_t)(tl_rand() % (uint32_t)(n_vocab - 3));
    tl_greedy(m, pool, p2, LEN2, N_GEN, ref2);
}

/* A greedy request for N_GEN tokens of prompt p[0..n), EOS ignored. */
static inline cinfer_request greedy(const int32_t *p, int32_t n) {
    cinfer_request r = cinfer_request_default();
    r.prompt = p;
    r.n_prompt = n;
    r.max_tokens = N_GEN;
    r.ignore_eos = true;
    return r;
}

/* Runs one turn; checks its tokens against the reference; returns cached tokens (-1: failed). */
static inline int32_t turn(cinfer_engine *e, int which, const char *what) {
    static run_result res;
    memset(&res, 0, sizeof res);
    cinfer_request r = which == 1 ? greedy(p1, LEN1) : greedy(p2, LEN2);
    if (tl_run(e, &r, &res) != 0) return -1;
    const int32_t *ref = which == 1 ? ref1 : ref2;
    CHECKF(res.n_tokens == N_GEN && !memcmp(res.tokens, ref, sizeof ref1), "%s: turn %d differs from the reference",
           what, which);
    return res.usage.cached_tokens;
}

#endif
