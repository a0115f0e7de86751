/* matcher_impl.h - the matcher's state, shared by matcher.c (lifecycle, accept, rollback, fork)
 * and mask.c (token masks). Owns: the Earley chart, the step history (chart height before each
 * step and whether it was EOS), the terminated flag, the mask cache it uses (the grammar's for
 * its vocabulary, or a private one), and scratch buffers for mask computation, which grow and are
 * then reused (no allocation per mask once warm, except on a cache miss). */
#ifndef CINFER_GRAMMAR_MATCHER_IMPL_H
#define CINFER_GRAMMAR_MATCHER_IMPL_H

#include "grammar/earley.h"
#include "grammar/grammar_impl.h"
#include "grammar/mask_cache.h"

typedef struct gr_mask_scratch {
    gr_item *sig; /* canonical signature of the top set and the sets it reads */
    uint32_t *origins;
    uint32_t *readable; /* the older sets the cached walk may read */
    uint32_t n_readable;
    uint32_t cap_sig;
    uint8_t *path; /* bytes of the current trie path (max token length + 1) */
    uint8_t *replay;
    int32_t *path_state; /* memo state per trie depth in a cache-miss walk */
    gr_boundary *bounds; /* boundaries found by a cache-miss walk */
    uint32_t n_bounds, cap_bounds;
    uint8_t *pool; /* their prefix bytes */
    uint32_t n_pool, cap_pool;
    gr_scan_memo memo; /* transition memo of a cache-miss walk */
} gr_mask_scratch;

struct cinfer_grammar_matcher {
    cinfer_grammar *g;
    const cinfer_grammar_vocab *v;
    gr_chart chart;
    uint32_t *step_sets; /* chart height before each step */
    uint8_t *step_eos; /* 1 if that step was an EOS token */
    uint32_t n_steps, cap_steps;
    int terminated;
    uint32_t *scratch_mask; /* for forced_token; allocated on first use */
    gr_mask_cache *cache; /* the grammar's (shared) or private_cache */
    gr_mask_cache *private_cache;
    gr_mask_scratch ms;
};

/* mask.c */
void gr_mask_scratch_free(gr_mask_scratch *s);
/* Records a boundary (trie node `node` reached by path[0..len)) in s. Returns 0 or -1 (memory). */
int gr_mask_add_boundary(gr_mask_scratch *s, uint32_t node, const uint8_t *path, uint32_t len);
/* Walks each boundary of e with the real chart (prefix replayed), marking tokens in mask. */
void gr_mask_replay(cinfer_grammar_matcher *m, const gr_ci_entry *e, uint32_t *mask);

/* mask_lexeme.c: when every item of the top set is inside (or before) a lexeme, fills mask from
 * the per-(DFA, state) entries and returns 1; returns 0 (mask untouched) otherwise. */
int gr_mask_lexeme(cinfer_grammar_matcher *m, uint32_t *mask);

#endif
