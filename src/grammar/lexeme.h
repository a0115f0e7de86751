/* lexeme.h - the lexer layer of a compiled grammar: regular parts of the CFG become DFA terminals.
 *
 * After finalization (cfg.h), gr_cfg_lexify walks the grammar from the start symbol and replaces
 * every reachable nonterminal whose language is regular (no recursion other than the left
 * recursion `N -> N a | b` the front ends use for repetition), does not contain the empty string
 * and determinizes within GR_DFA_MAX_STATES by one DFA terminal (a lexeme: a JSON string with its
 * escapes and length limits, a number, a literal, a regex-derived string, or a whole
 * non-recursive object). The maximal such nonterminals are taken, top down; a nonterminal that
 * does not qualify keeps its productions and its children are tried. The language of the grammar
 * does not change: the Earley matcher (earley.h) scans a DFA terminal byte by byte, an item
 * inside a lexeme carrying its DFA state in the position (gr_pos_*), and a lexeme may end at any
 * accepting state (both continuations are kept, so no maximal-munch assumption is made).
 * Inside a lexeme a chart set is one item per live parse whatever the lexeme's length, so the
 * mask walk's interned states (scan_memo.h) repeat and loop: the walk becomes a DFA walk.
 * Lexification is best effort under a work budget: hitting a limit leaves that part a CFG (never
 * an error). DFA states are numbered from 1 (the start); 0 is the dead state. */
#ifndef CINFER_GRAMMAR_LEXEME_H
#define CINFER_GRAMMAR_LEXEME_H

#include <stdint.h>

#include "grammar/cfg.h"

/* Fits the position encoding (cfg.h, GR_POS_STATE_SHIFT) and keeps encoded positions below the
 * mask cache's reserved values (mask_cache.h, GR_LEXEME_KEY). */
#define GR_DFA_MAX_STATES 2000 /* below 4096 (the subset table in lexeme.c) */

struct gr_dfa {
    uint32_t n_states; /* states 1..n_states; 1 is the start */
    uint32_t n_cols;
    uint8_t col[256]; /* byte -> column (bytes no class distinguishes share one) */
    uint16_t *next; /* (n_states + 1) * n_cols, 0 = dead; row 0 is all dead */
    uint8_t *accepting; /* n_states + 1 */
    gr_class *live; /* n_states + 1: the bytes with a live transition */
    gr_class *loop; /* n_states + 1: the bytes leading back to the same state */
};

/* Rewrites g (finalized) in place. Returns 0, or -1 when memory ran out (g is then unchanged in
 * meaning: every replacement made is exact). */
int gr_cfg_lexify(gr_cfg *g);
void gr_dfa_free(gr_dfa *d);

static inline uint32_t gr_dfa_step(const gr_dfa *d, uint32_t s, uint8_t b) {
    return d->next[s * d->n_cols + d->col[b]];
}

#endif
