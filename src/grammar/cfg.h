/* cfg.h - the grammar every spec compiles to: a context-free grammar over bytes.
 *
 * Terminals are byte classes (256-bit sets); nonterminals are small integers. A symbol is
 * encoded as an int32: >= 0 a nonterminal id, < 0 the terminal -(class + 1). The builder adds
 * nonterminals, classes (deduplicated) and productions, checking the size and time limits on
 * every production (so a pathological spec fails cleanly, not slowly); gr_cfg_finalize then
 * sorts productions by left-hand side, adds the augmented start production, and computes the
 * dotted-position tables the Earley matcher (earley.h) walks:
 *   pos p (an index into rhs[]) holds the symbol after the dot, or GR_END at a production's
 *   end; pos_prod[p] is the production p belongs to.
 * Invariants after finalize: immutable; prod_first[nt]..prod_first[nt+1] are nt's productions;
 * nullable[nt] is 1 iff nt derives the empty string. Owned by cinfer_grammar (grammar.c). */
#ifndef CINFER_GRAMMAR_CFG_H
#define CINFER_GRAMMAR_CFG_H

#include <stddef.h>
#include <stdint.h>

#include "cinfer/grammar.h"

#define GR_END INT32_MIN

/* DFA terminals (lexeme.h): symbol GR_DFA_SYM_BASE - d is the grammar's DFA number d. */
#define GR_DFA_SYM_BASE (-(1 << 28))
static inline int gr_sym_is_dfa(int32_t s) { return s <= GR_DFA_SYM_BASE && s != GR_END; }
static inline uint32_t gr_sym_dfa(int32_t s) { return (uint32_t)(GR_DFA_SYM_BASE - s); }

/* An Earley item's pos: an index into rhs[] (the dotted position), or, for an item inside a
 * lexeme (the symbol after the dot a DFA terminal, its DFA state st >= 2),
 * GR_POS_IN_LEXEME | site << state_bits | st, where site numbers the positions before a DFA
 * terminal (gr_cfg's site_at / site_of, made by the lexer layer). A lexeme at its start state 1
 * is the plain position. n_rhs stays below GR_POS_IN_LEXEME, and the site numbers below
 * 2^(31 - state_bits) - 1, so encoded positions stay below the mask cache's reserved values. */
#define GR_POS_IN_LEXEME 0x80000000u
#define GR_POS_MIN_STATE_BITS 11 /* GR_DFA_MAX_STATES (lexeme.h) fits */

typedef struct gr_cfg gr_cfg;
typedef struct gr_class {
    uint64_t bits[4];
} gr_class;

static inline int gr_class_has(const gr_class *c, uint8_t b) { return (int)((c->bits[b >> 6] >> (b & 63)) & 1); }
static inline void gr_class_set(gr_class *c, uint8_t b) { c->bits[b >> 6] |= 1ull << (b & 63); }
static inline void gr_class_clear(gr_class *c, uint8_t b) { c->bits[b >> 6] &= ~(1ull << (b & 63)); }
static inline void gr_class_set_range(gr_class *c, unsigned lo, unsigned hi) {
    for (unsigned b = lo; b <= hi && b < 256; b++) gr_class_set(c, (uint8_t)b);
}

typedef struct gr_dfa gr_dfa;

typedef struct gr_prod {
    int32_t lhs;
    uint32_t rhs_start; /* first pos in rhs[]; the production's GR_END follows its symbols */
    uint32_t rhs_len;
} gr_prod;

/* A counted repetition sym{min,max} made by gr_repeat (max < 0: unbounded): nt is the
 * nonterminal it returned. The lexer layer builds counted lexemes from these (lexeme.h). */
typedef struct gr_counted {
    int32_t nt, sym;
    uint32_t min;
    int64_t max;
} gr_counted;

struct gr_cfg {
    /* limits */
    uint32_t max_rules;
    uint32_t max_set_items; /* matching limit per Earley set (cinfer_grammar_limits) */
    double deadline_ms; /* monotonic ms after which building fails */
    int failed; /* a limit was hit: later adds are no-ops returning -1 */
    /* classes */
    gr_class *classes;
    uint32_t n_classes, cap_classes;
    uint32_t *class_hash; /* open addressing, class index + 1 (0 = empty) */
    uint32_t class_hash_cap;
    /* nonterminals */
    uint32_t n_nts;
    /* productions and their symbols */
    gr_prod *prods;
    uint32_t n_prods, cap_prods;
    int32_t *rhs;
    uint32_t n_rhs, cap_rhs;
    int32_t start; /* the user's start nonterminal */
    /* finalize output */
    int32_t aug_start; /* S' -> start */
    uint32_t *pos_prod; /* n_rhs: production of each pos */
    uint32_t *prod_first; /* n_nts + 1 */
    uint8_t *nullable; /* n_nts */
    uint32_t accept_pos; /* the pos of "S' -> start ." */
    uint32_t aug_pos; /* the pos of "S' -> . start" */
    /* lexer layer (lexeme.h): the DFA terminals, owned */
    gr_dfa **dfas;
    uint32_t n_dfas;
    /* position encoding (above): state_mask = (1 << state_bits) - 1; site_at[site] is the rhs
     * position of a site, site_of[pos] the site of a position before a DFA terminal (n_rhs) */
    uint32_t state_bits, state_mask, n_sites;
    uint32_t *site_at, *site_of;
    /* gr_repeat's counted repetitions, in creation order */
    gr_counted *counted;
    uint32_t n_counted, cap_counted;
};

static inline uint32_t gr_pos_at(const gr_cfg *g, uint32_t pos) {
    return pos & GR_POS_IN_LEXEME ? g->site_at[(pos & ~GR_POS_IN_LEXEME) >> g->state_bits] : pos;
}
static inline uint32_t gr_pos_state(const gr_cfg *g, uint32_t pos) {
    return pos & GR_POS_IN_LEXEME ? pos & g->state_mask : 0;
}
/* The pos of dotted position at (before a DFA terminal) in DFA state st (1, the start: plain). */
static inline uint32_t gr_pos_with_state(const gr_cfg *g, uint32_t at, uint32_t st) {
    return st == 1 ? at : GR_POS_IN_LEXEME | g->site_of[at] << g->state_bits | st;
}
static inline int gr_pos_plain(const gr_cfg *g, uint32_t pos) {
    (void)g;
    return !(pos & GR_POS_IN_LEXEME);
}

/* Fills err with a message naming keyword (may be NULL/"") and position (-1: none). Returns -1. */
int gr_fail(cinfer_grammar_error *err, const char *keyword, long position, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* limits must be resolved (gr_limits_resolve). Returns NULL on allocation failure. */
gr_cfg *gr_cfg_new(const cinfer_grammar_limits *limits);
void gr_cfg_free(gr_cfg *g);
/* Fills defaults into a copy of limits (may be NULL). */
cinfer_grammar_limits gr_limits_resolve(const cinfer_grammar_limits *limits);

/* A new nonterminal id, or -1 (limit). */
int32_t gr_nt(gr_cfg *g);
/* The terminal symbol for a class (deduplicated), or 0 on failure. Nonterminal 0 and class 0 (symbol -1,
 * the empty class) are reserved, so the failure values 0 and -1 are never valid symbols. */
int32_t gr_term(gr_cfg *g, const gr_class *c);
int32_t gr_term_byte(gr_cfg *g, uint8_t b);
int32_t gr_term_range(gr_cfg *g, uint8_t lo, uint8_t hi);
/* Adds lhs -> rhs[0..n). Returns 0 or -1 when a limit (size, time) was hit or memory ran out. */
int gr_prod_add(gr_cfg *g, int32_t lhs, const int32_t *rhs, uint32_t n);
/* Why the last add failed: "size", "time" or "memory". */
const char *gr_cfg_failure(const gr_cfg *g);

/* Convenience constructors; each returns a new nonterminal or -1. */
int32_t gr_literal(gr_cfg *g, const uint8_t *bytes, size_t len); /* exactly these bytes */
int32_t gr_star(gr_cfg *g, int32_t sym); /* sym* (left recursive) */
int32_t gr_plus(gr_cfg *g, int32_t sym); /* sym+ */
int32_t gr_opt(gr_cfg *g, int32_t sym); /* sym? */
/* sym{min,max}; max < 0: unbounded. */
int32_t gr_repeat(gr_cfg *g, int32_t sym, uint32_t min, int64_t max);
/* A nonterminal with one production per alternative symbol. */
int32_t gr_alt(gr_cfg *g, const int32_t *syms, uint32_t n);
int32_t gr_seq(gr_cfg *g, const int32_t *syms, uint32_t n);

/* Sorts productions, adds S' -> start, computes tables. Returns 0 or -1 (memory). */
int gr_cfg_finalize(gr_cfg *g, int32_t start);
/* After finalize: 1 if the grammar derives no string at all. */
int gr_cfg_matches_nothing(const gr_cfg *g);

#endif
