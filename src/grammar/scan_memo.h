/* scan_memo.h - a transition memo that turns repeated Earley scans into table lookups during a
 * trie walk (mask.c), so walking the trie inside a string or number costs a lookup per byte.
 *
 * Within one walk from a base set k, every chart set made by the walk is interned as a state:
 * its items (completed ones dropped: they are never read again) with each origin written as
 * "here", as an absolute index at or below k (those sets do not change during the walk), or as
 * (state of the origin set, distance back) for a set made by the walk. A state so determines
 * everything a scan from it can read, so (state, byte) -> (next state, whether the scan read a
 * set below the chart's guard) is exact and is remembered. A memo hit pushes the
 * interned items instead of running the closure. Valid for one base; gr_scan_memo_reset starts
 * over. Bounded: past GR_MEMO_MAX_STATES it stops interning (scans just run normally). */
#ifndef CINFER_GRAMMAR_SCAN_MEMO_H
#define CINFER_GRAMMAR_SCAN_MEMO_H

#include <stdint.h>

#include "grammar/cfg.h"

#define GR_MEMO_MAX_STATES 2048
#define GR_ORIGIN_HERE_MEMO (UINT32_MAX - 2)

typedef struct gr_scan_memo {
    uint32_t base;
    uint32_t n_states, cap_states;
    uint32_t *st_off, *st_n;
    uint64_t *st_hash;
    gr_class *st_bytes;
    gr_class *st_loop; /* per state: the bytes known to lead back to it without crossing */
    int32_t *trans; /* 256 per state: -2 unknown, -1 dead, else next << 1 | crossed */
    struct gr_item *pool;
    uint32_t n_pool, cap_pool;
    uint32_t *tab; /* open addressing: state + 1 */
    uint32_t tab_cap;
    int32_t *set_state; /* per chart set above base - 1: its state or -1 */
    uint32_t cap_set_state;
} gr_scan_memo;

struct gr_chart;

void gr_scan_memo_free(gr_scan_memo *m);
/* For gr_chart_scan: the state of chart set j (interning the base set on first use), or -1. */
int gr_memo_state_of(struct gr_chart *c, uint32_t j);
/* Pushes the set after byte b from top set k from the memo: 1 pushed, 0 dead, -2 not known. */
int gr_memo_lookup(struct gr_chart *c, uint32_t k, uint8_t b);
/* Pushes state q's items as the next chart set. Returns 0 or -1. */
int gr_memo_push(struct gr_chart *c, int32_t q);
/* Records the outcome of a real scan of b from set k (result 1 pushed / 0 dead). */
void gr_memo_record(struct gr_chart *c, uint32_t k, uint8_t b, int result, int crossed);
/* Starts a memo for walks from base set `base`. Returns 0 or -1 (memory). */
int gr_scan_memo_reset(gr_scan_memo *m, uint32_t base, uint32_t max_depth);

#endif
