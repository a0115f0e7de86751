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
 * Counted lexemes (lexeme_count.c): `a E{min,max} b` with a, b byte classes and E a prefix-free
 * regular language (a JSON string with minLength/maxLength: `"` char{m,M} `"`) becomes one DFA
 * built directly as the product (E's state, count) — too large for subset construction, but
 * regular. Its states repeat every k (E's non-accepting states), so the mask walk for a state
 * depends only on E's state and the count clamped to the longest token (gr_dfa_canonical).
 * Lexification is best effort under a work budget: hitting a limit leaves that part a CFG (never
 * an error). DFA states are numbered from 1 (the start); 0 is the dead state. */
#ifndef CINFER_GRAMMAR_LEXEME_H
#define CINFER_GRAMMAR_LEXEME_H

#include <stdint.h>

#include "grammar/cfg.h"

/* Fits the position encoding's smallest state field (cfg.h, GR_POS_MIN_STATE_BITS); counted
 * lexemes may have more states, up to what the grammar's site count leaves (and 65000: uint16
 * transition tables). */
#define GR_DFA_MAX_STATES 2000 /* below 4096 (the subset table in lexeme.c) */
#define GR_COUNTED_MAX_STATES 65000u /* per counted lexeme: uint16 transition tables */

struct gr_dfa {
    uint32_t n_states; /* states 1..n_states; 1 is the start */
    uint32_t n_cols;
    uint8_t col[256]; /* byte -> column (bytes no class distinguishes share one) */
    uint16_t *next; /* (n_states + 1) * n_cols, 0 = dead; row 0 is all dead */
    uint8_t *accepting; /* n_states + 1 */
    gr_class *live; /* n_states + 1: the bytes with a live transition */
    gr_class *loop; /* n_states + 1: the bytes leading back to the same state */
    /* counted lexemes only (count_k > 0): state 1 before the opening byte, 2 + c * count_k + i
     * with c chars read (c <= count_top) in E's state i (0: between chars), n_states the state
     * after the closing byte; count_max < 0: unbounded (c saturates at count_min) */
    uint32_t count_k, count_top, count_min;
    int64_t count_max;
};

/* The lowest-numbered state that accepts the same byte strings of up to `horizon` bytes as st
 * (st itself for a DFA that is not counted). Tokens are at most horizon bytes long, so both
 * states have the same token masks and lexeme boundaries. */
uint32_t gr_dfa_canonical(const gr_dfa *d, uint32_t st, uint32_t horizon);
/* The counted DFA for open E{min,max} close (see above), or NULL when E (elem, its DFA) is not
 * prefix-free, close can start an E, the states would exceed max_states, or memory ran out. */
gr_dfa *gr_dfa_counted(const gr_dfa *elem, const gr_class *open, const gr_class *close, uint32_t min, int64_t max,
                       uint32_t max_states);
/* A two-state DFA for one byte of class c (an element of a counted lexeme). NULL: memory. */
gr_dfa *gr_dfa_byte_class(const gr_class *c);
/* Fills d->live and d->loop from d->next (allocated here). Returns 0 or -1 (memory). */
int gr_dfa_fill_sets(gr_dfa *d);

/* Rewrites g (finalized) in place. Returns 0, or -1 when memory ran out (g is then unchanged in
 * meaning: every replacement made is exact). */
int gr_cfg_lexify(gr_cfg *g);
void gr_dfa_free(gr_dfa *d);

static inline uint32_t gr_dfa_step(const gr_dfa *d, uint32_t s, uint8_t b) {
    return d->next[s * d->n_cols + d->col[b]];
}

#endif
