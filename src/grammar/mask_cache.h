/* mask_cache.h - the context-independent token mask cache, one per (grammar, vocabulary).
 *
 * A mask depends on the matcher's top Earley set and, through completions, on older sets. The
 * part of the trie walk that never completes into a set older than the top one depends on the
 * top set alone; and its items differ between contexts only in which older sets their origins
 * name, which that part of the walk never reads. So an entry is keyed by the top set's items
 * with origins canonicalized (the top set itself -> ORIGIN_HERE, older ones -> their rank) and
 * holds: the mask of the tokens accepted without reading an older set, and the trie nodes where
 * the walk had to read one (boundaries, with the bytes leading to them), which the matcher then
 * walks with its real chart. Entries are immutable once inserted and live as long as the cache
 * (the grammar), so a pointer from find/insert stays valid; find and insert take a mutex, so
 * matchers on different threads share the cache. The cache stops growing at max_bytes. */
#ifndef CINFER_GRAMMAR_MASK_CACHE_H
#define CINFER_GRAMMAR_MASK_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "grammar/earley.h"

#define GR_ORIGIN_HERE UINT32_MAX
/* The pos of the first item of a lexeme entry's key: {GR_LEXEME_KEY, dfa}, {state, 0} (mask_lexeme.c).
 * Encoded positions stay below it (cfg.h, GR_POS_IN_LEXEME), as does the signature's set
 * separator (UINT32_MAX - 1 in mask.c) above it, so the two kinds of key never meet. */
#define GR_LEXEME_KEY (UINT32_MAX - 16)

typedef struct gr_boundary {
    uint32_t node; /* trie node reached by the prefix */
    uint32_t prefix_off; /* into the entry's prefix bytes */
    uint32_t prefix_len;
} gr_boundary;

typedef struct gr_ci_entry {
    uint64_t hash;
    uint32_t n_items;
    gr_item *items; /* canonical, sorted */
    uint32_t *mask;
    gr_boundary *bounds;
    uint32_t n_bounds;
    uint8_t *prefix;
    /* lexeme entries of a counted string's base state only (mask_lexeme.c): the tokens of mask
     * grouped by need (characters a token uses, counted from the base state's count),
     * need_tok[need_start[n] .. need_start[n + 1]) needing n; and each boundary's need */
    uint32_t *need_tok, *need_start;
    uint16_t *bound_need;
    uint32_t n_need;
    size_t bytes; /* memory held */
} gr_ci_entry;

typedef struct gr_mask_cache gr_mask_cache;

gr_mask_cache *gr_mask_cache_new(uint64_t vocab_hash, size_t max_bytes);
void gr_mask_cache_free(gr_mask_cache *c);
uint64_t gr_mask_cache_vocab(const gr_mask_cache *c);
/* The entry with exactly these canonical items, or NULL. */
const gr_ci_entry *gr_mask_cache_find(gr_mask_cache *c, uint64_t hash, const gr_item *items, uint32_t n);
/* Offers e to the cache. Returns the cached entry (e, or an equal one already there, in which
 * case e is freed) and sets *kept = 1; or, when the cache is full, returns e with *kept = 0 (the
 * caller frees it after use). */
const gr_ci_entry *gr_mask_cache_insert(gr_mask_cache *c, gr_ci_entry *e, int *kept);
void gr_ci_entry_free(gr_ci_entry *e);

#endif
