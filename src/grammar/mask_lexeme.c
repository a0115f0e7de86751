/* mask_lexeme.c - token masks inside a lexeme (gr_mask_lexeme): the lexer half of the mask.
 *
 * When every item of the matcher's top Earley set is a DFA terminal in progress (lexeme.h),
 * a token whose bytes keep some item's DFA alive is allowed whatever the parser context is:
 * continuing the lexeme is a live parse (every DFA state can still reach acceptance and the
 * grammar has no dead ends). Such tokens depend only on (DFA, state), so they are found once by
 * walking the vocabulary trie through the DFA's transition table alone and kept in the grammar's
 * mask cache as an entry keyed {GR_LEXEME_KEY, dfa}, {state, 0}. The only other tokens that can
 * be allowed are those that pass through an accepting state, where the lexeme may end and the
 * parser take over: the trie node right after each such byte is recorded as a boundary, and the
 * matcher walks each boundary's subtree with its real chart (gr_mask_replay), as it does for the
 * context-independent cache. Subtrees whose bytes all loop on a non-accepting state are accepted
 * as one range of token ids. Tokens that stay inside one lexeme so never touch the parser.
 * A counted lexeme's state is first mapped to the lowest state no token tells apart from it
 * (gr_dfa_canonical, horizon: the longest token), so a string with maxLength 1024 has one entry
 * per (character state, clamped counts), not one per position; the walk from that state marks
 * the same tokens and reaches the same boundary nodes, which are replayed with the real chart.
 * Counts within the longest token of maxLength cannot be clamped; past minLength their entries
 * are derived instead of walked: the walk from the lowest such count (the base) records what
 * each token and boundary needs (the characters it uses), and the entry of a count c keeps those
 * that need at most maxLength - c (count_role, derive_entry). */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "grammar/lexeme.h"
#include "grammar/matcher_impl.h"

#define LEXEME_MAX_KEYS 512 /* distinct (DFA, state) pairs in a top set handled here */

static int class_within(const gr_class *a, const gr_class *b) {
    return !((a->bits[0] & ~b->bits[0]) | (a->bits[1] & ~b->bits[1]) | (a->bits[2] & ~b->bits[2]) |
             (a->bits[3] & ~b->bits[3]));
}

static void mark_node_tokens(const cinfer_grammar_vocab *v, uint32_t node, uint32_t *mask) {
    const gr_trie_node *nd = &v->nodes[node];
    for (uint32_t i = nd->tok_lo; i < nd->tok_lo + nd->n_own; i++) {
        uint32_t t = v->trie_tokens[i];
        mask[t >> 5] |= 1u << (t & 31);
    }
}

/* What the tokens and boundaries found by a walk from a counted string's base state (count c0)
 * need: the characters each uses from there, one more when it ends inside a character
 * (lexeme.h: state 2 + c * k + i). A token that needs n is allowed from count c >= c0 (in the
 * same character state) exactly when c + n <= maxLength. */
typedef struct need_rec {
    uint32_t c0, k;
    uint32_t *tok, n, cap;
    uint16_t *need;
    uint16_t *bound_need; /* per boundary of the walk */
    uint32_t cap_bounds;
} need_rec;

static uint32_t need_of(const need_rec *r, uint32_t st) {
    uint32_t c = (st - 2) / r->k, i = (st - 2) % r->k;
    return c - r->c0 + (i != 0);
}

/* Records trie_tokens[lo, hi) as needing what state st needs. Returns 0 or -1 (memory). */
static int rec_tokens(need_rec *r, const cinfer_grammar_vocab *v, uint32_t lo, uint32_t hi, uint32_t st) {
    if (!r || lo == hi) return 0;
    if (r->n + (hi - lo) > r->cap) {
        uint32_t cap = r->cap ? r->cap : 4096;
        while (cap < r->n + (hi - lo)) cap *= 2;
        uint32_t *t = realloc(r->tok, cap * sizeof *t);
        if (!t) return -1;
        r->tok = t;
        uint16_t *n = realloc(r->need, cap * sizeof *n);
        if (!n) return -1;
        r->need = n;
        r->cap = cap;
    }
    uint16_t need = (uint16_t)need_of(r, st);
    for (uint32_t i = lo; i < hi; i++) {
        r->tok[r->n] = v->trie_tokens[i];
        r->need[r->n++] = need;
    }
    return 0;
}

/* Records that boundary number b needs what state st needs. Returns 0 or -1 (memory). */
static int rec_bound(need_rec *r, uint32_t b, uint32_t st) {
    if (!r) return 0;
    if (b >= r->cap_bounds) {
        uint32_t cap = r->cap_bounds ? r->cap_bounds * 2 : 256;
        uint16_t *p = realloc(r->bound_need, cap * sizeof *p);
        if (!p) return -1;
        r->bound_need = p;
        r->cap_bounds = cap;
    }
    r->bound_need[b] = (uint16_t)need_of(r, st);
    return 0;
}

/* The DFA-only walk below trie node `node` in DFA state `st`, recording needs in r (or NULL).
 * Returns 0 or -1 (memory). */
static int dfa_walk(cinfer_grammar_matcher *m, const gr_dfa *d, uint32_t node, uint32_t st, uint32_t depth,
                    uint32_t *mask, need_rec *r) {
    const cinfer_grammar_vocab *v = m->v;
    const gr_trie_node *nd = &v->nodes[node];
    const gr_class *live = &d->live[st];
    for (uint32_t e = nd->first_edge; e < nd->first_edge + nd->n_edges; e++) {
        uint8_t b = v->edge_byte[e];
        if (!gr_class_has(live, b)) continue;
        uint32_t t = gr_dfa_step(d, st, b), child = v->edge_node[e];
        m->ms.path[depth] = b;
        if (d->accepting[t]) { /* the lexeme may end here: the real chart decides this subtree */
            if (rec_bound(r, m->ms.n_bounds, st) || gr_mask_add_boundary(&m->ms, child, m->ms.path, depth + 1))
                return -1;
            continue;
        }
        const gr_trie_node *cn = &v->nodes[child];
        if (cn->n_edges && (d->loop[t].bits[0] | d->loop[t].bits[1] | d->loop[t].bits[2] | d->loop[t].bits[3]) &&
            class_within(&v->below_bytes[child], &d->loop[t])) {
            for (uint32_t i = cn->tok_lo; i < cn->tok_hi; i++) {
                uint32_t tok = v->trie_tokens[i];
                mask[tok >> 5] |= 1u << (tok & 31);
            }
            if (rec_tokens(r, v, cn->tok_lo, cn->tok_hi, t)) return -1;
            continue;
        }
        mark_node_tokens(v, child, mask);
        if (rec_tokens(r, v, cn->tok_lo, cn->tok_lo + cn->n_own, t)) return -1;
        if (cn->n_edges && dfa_walk(m, d, child, t, depth + 1, mask, r)) return -1;
    }
    return 0;
}

/* How a lexeme entry for state st of d is made: 0 by a plain walk; for a counted string with a
 * maxLength, in a state past minLength and within `horizon` + 1 characters of maxLength (each
 * such count is its own key, gr_dfa_canonical), 1 when st is the base state (the lowest such
 * count, *c0: its walk records needs) or 2 when st's entry is derived from the base state's. */
static int count_role(const gr_dfa *d, uint32_t st, uint32_t horizon, uint32_t *c0) {
    if (!d->count_k || d->count_max < 0 || st < 2 || st >= d->n_states) return 0;
    uint64_t c = (st - 2) / d->count_k, max = (uint64_t)d->count_max, h = (uint64_t)horizon + 1;
    uint64_t base = max > h ? max - h : 0;
    if (base < d->count_min) base = d->count_min;
    if (c < base) return 0;
    *c0 = (uint32_t)base;
    return c == base ? 1 : 2;
}

/* Fills e's need arrays from r (counting sort by need). Returns 0 or -1 (memory). */
static int keep_needs(gr_ci_entry *e, const need_rec *r, uint32_t n_bounds) {
    uint32_t n_need = 1;
    for (uint32_t i = 0; i < r->n; i++)
        if (r->need[i] + 1u > n_need) n_need = r->need[i] + 1u;
    e->n_need = n_need;
    e->need_start = calloc(n_need + 1, sizeof *e->need_start);
    e->need_tok = malloc((r->n ? r->n : 1) * sizeof *e->need_tok);
    e->bound_need = malloc((n_bounds ? n_bounds : 1) * sizeof *e->bound_need);
    if (!e->need_start || !e->need_tok || !e->bound_need) return -1;
    for (uint32_t i = 0; i < r->n; i++) e->need_start[r->need[i] + 1]++;
    for (uint32_t n = 0; n < n_need; n++) e->need_start[n + 1] += e->need_start[n];
    uint32_t *at = malloc(n_need * sizeof *at);
    if (!at) return -1;
    memcpy(at, e->need_start, n_need * sizeof *at);
    for (uint32_t i = 0; i < r->n; i++) e->need_tok[at[r->need[i]]++] = r->tok[i];
    free(at);
    if (n_bounds) memcpy(e->bound_need, r->bound_need, n_bounds * sizeof *e->bound_need);
    e->bytes += (size_t)r->n * 4 + (n_need + 1) * 4 + n_bounds * 2;
    return 0;
}

/* The entry of a state `limit` characters below maxLength from its base entry b: the tokens and
 * boundaries that need at most `limit`. Costs the smaller of the tokens kept and those dropped,
 * instead of a trie walk. NULL on memory failure. */
static gr_ci_entry *derive_entry(const gr_ci_entry *b, uint32_t limit, size_t words) {
    gr_ci_entry *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->mask = malloc(words * sizeof *e->mask);
    e->bounds = malloc((b->n_bounds ? b->n_bounds : 1) * sizeof *e->bounds);
    uint32_t pool = 0;
    for (uint32_t i = 0; i < b->n_bounds; i++) pool += b->bound_need[i] <= limit ? b->bounds[i].prefix_len : 0;
    e->prefix = malloc(pool ? pool : 1);
    if (!e->mask || !e->bounds || !e->prefix) {
        gr_ci_entry_free(e);
        return NULL;
    }
    uint32_t in = b->need_start[limit + 1 < b->n_need ? limit + 1 : b->n_need], all = b->need_start[b->n_need];
    if (in <= all - in) {
        memset(e->mask, 0, words * sizeof *e->mask);
        for (uint32_t i = 0; i < in; i++) e->mask[b->need_tok[i] >> 5] |= 1u << (b->need_tok[i] & 31);
    } else {
        memcpy(e->mask, b->mask, words * sizeof *e->mask);
        for (uint32_t i = in; i < all; i++) e->mask[b->need_tok[i] >> 5] &= ~(1u << (b->need_tok[i] & 31));
    }
    pool = 0;
    for (uint32_t i = 0; i < b->n_bounds; i++) {
        if (b->bound_need[i] > limit) continue;
        memcpy(e->prefix + pool, b->prefix + b->bounds[i].prefix_off, b->bounds[i].prefix_len);
        e->bounds[e->n_bounds++] = (gr_boundary){b->bounds[i].node, pool, b->bounds[i].prefix_len};
        pool += b->bounds[i].prefix_len;
    }
    e->bytes = sizeof *e + words * 4 + e->n_bounds * sizeof *e->bounds + pool;
    return e;
}

/* The cache entry for (dfa, st), built on a miss. NULL on memory failure. */
static const gr_ci_entry *lexeme_entry(cinfer_grammar_matcher *m, uint32_t dfa, uint32_t st, int *kept) {
    gr_item key[2] = {{GR_LEXEME_KEY, dfa}, {st, 0}};
    uint64_t hash = XXH3_64bits(key, sizeof key);
    *kept = 1;
    const gr_ci_entry *found = gr_mask_cache_find(m->cache, hash, key, 2);
    if (found) return found;
    gr_mask_scratch *s = &m->ms;
    const gr_dfa *d = m->g->cfg->dfas[dfa];
    size_t words = cinfer_grammar_mask_words(m->v);
    uint32_t c0 = 0;
    int role = count_role(d, st, m->v->max_depth, &c0);
    gr_ci_entry *e = NULL;
    if (role == 2) {
        int base_kept;
        uint32_t base_st = 2 + c0 * d->count_k + (st - 2) % d->count_k;
        const gr_ci_entry *b = lexeme_entry(m, dfa, base_st, &base_kept);
        if (!b) return NULL;
        uint32_t limit = (uint32_t)(d->count_max - (int64_t)((st - 2) / d->count_k));
        e = b->need_start ? derive_entry(b, limit, words) : NULL;
        if (!base_kept) gr_ci_entry_free((gr_ci_entry *)b);
        if (!e) return NULL;
        e->items = malloc(sizeof key);
        if (!e->items) goto fail;
    } else {
        need_rec rec = {.c0 = c0, .k = d->count_k}, *r = role == 1 ? &rec : NULL;
        e = calloc(1, sizeof *e);
        if (!e) return NULL;
        e->mask = calloc(words, sizeof *e->mask);
        e->items = malloc(sizeof key);
        s->n_bounds = s->n_pool = 0;
        int rc = !e->mask || !e->items || dfa_walk(m, d, 0, st, 0, e->mask, r);
        e->n_bounds = s->n_bounds;
        e->bounds = malloc((s->n_bounds ? s->n_bounds : 1) * sizeof *e->bounds);
        e->prefix = malloc(s->n_pool ? s->n_pool : 1);
        e->bytes = sizeof *e + words * 4 + s->n_bounds * sizeof *e->bounds + s->n_pool;
        if (!rc && r) rc = keep_needs(e, r, s->n_bounds);
        free(rec.tok);
        free(rec.need);
        free(rec.bound_need);
        if (rc || !e->bounds || !e->prefix) goto fail;
        if (s->n_bounds) memcpy(e->bounds, s->bounds, s->n_bounds * sizeof *e->bounds);
        if (s->n_pool) memcpy(e->prefix, s->pool, s->n_pool);
    }
    memcpy(e->items, key, sizeof key);
    e->n_items = 2;
    e->hash = hash;
    e->bytes += sizeof key;
    return gr_mask_cache_insert(m->cache, e, kept);
fail:
    gr_ci_entry_free(e);
    return NULL;
}

/* Collects the distinct (dfa, state) pairs of the top set into keys. Returns their count, or 0
 * when an item is not inside or before a lexeme or there are more than LEXEME_MAX_KEYS. */
static uint32_t top_lexemes(const gr_chart *c, uint32_t horizon, uint32_t keys[][2]) {
    const gr_cfg *g = c->g;
    uint32_t k = c->n_sets - 1, n = 0;
    if (!g->n_dfas) return 0;
    for (uint32_t i = c->set_start[k]; i < c->set_start[k + 1]; i++) {
        uint32_t pos = c->items[i].pos;
        int32_t sym = g->rhs[gr_pos_at(g, pos)];
        if (!gr_sym_is_dfa(sym)) return 0;
        uint32_t dfa = gr_sym_dfa(sym), st = gr_pos_state(g, pos) ? gr_pos_state(g, pos) : 1, j = 0;
        st = gr_dfa_canonical(g->dfas[dfa], st, horizon); /* counted lexemes: one entry per class */
        while (j < n && (keys[j][0] != dfa || keys[j][1] != st)) j++;
        if (j < n) continue;
        if (n == LEXEME_MAX_KEYS) return 0;
        keys[n][0] = dfa;
        keys[n][1] = st;
        n++;
    }
    return n;
}

int gr_mask_lexeme(cinfer_grammar_matcher *m, uint32_t *mask) {
    uint32_t keys[LEXEME_MAX_KEYS][2];
    uint32_t n = top_lexemes(&m->chart, m->v->max_depth, keys);
    if (!n) return 0;
    const gr_ci_entry *es[LEXEME_MAX_KEYS];
    int kept[LEXEME_MAX_KEYS];
    uint32_t got = 0;
    for (; got < n; got++) {
        es[got] = lexeme_entry(m, keys[got][0], keys[got][1], &kept[got]);
        if (!es[got]) break;
    }
    size_t words = cinfer_grammar_mask_words(m->v);
    for (uint32_t i = 0; i < got && got == n; i++) {
        for (size_t w = 0; w < words; w++) mask[w] |= es[i]->mask[w];
        gr_mask_replay(m, es[i], mask);
    }
    for (uint32_t i = 0; i < got; i++)
        if (!kept[i]) gr_ci_entry_free((gr_ci_entry *)es[i]);
    return got == n;
}
