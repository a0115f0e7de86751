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
 * the same tokens and reaches the same boundary nodes, which are replayed with the real chart. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "grammar/lexeme.h"
#include "grammar/matcher_impl.h"

#define LEXEME_MAX_KEYS 4 /* distinct (DFA, state) pairs in a top set handled here */

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

/* The DFA-only walk below trie node `node` in DFA state `st`. Returns 0 or -1 (memory). */
static int dfa_walk(cinfer_grammar_matcher *m, const gr_dfa *d, uint32_t node, uint32_t st, uint32_t depth,
                    uint32_t *mask) {
    const cinfer_grammar_vocab *v = m->v;
    const gr_trie_node *nd = &v->nodes[node];
    const gr_class *live = &d->live[st];
    for (uint32_t e = nd->first_edge; e < nd->first_edge + nd->n_edges; e++) {
        uint8_t b = v->edge_byte[e];
        if (!gr_class_has(live, b)) continue;
        uint32_t t = gr_dfa_step(d, st, b), child = v->edge_node[e];
        m->ms.path[depth] = b;
        if (d->accepting[t]) { /* the lexeme may end here: the real chart decides this subtree */
            if (gr_mask_add_boundary(&m->ms, child, m->ms.path, depth + 1)) return -1;
            continue;
        }
        if (v->nodes[child].n_edges &&
            (d->loop[t].bits[0] | d->loop[t].bits[1] | d->loop[t].bits[2] | d->loop[t].bits[3]) &&
            class_within(&v->below_bytes[child], &d->loop[t])) {
            const gr_trie_node *cn = &v->nodes[child];
            for (uint32_t i = cn->tok_lo; i < cn->tok_hi; i++) {
                uint32_t tok = v->trie_tokens[i];
                mask[tok >> 5] |= 1u << (tok & 31);
            }
            continue;
        }
        mark_node_tokens(v, child, mask);
        if (v->nodes[child].n_edges && dfa_walk(m, d, child, t, depth + 1, mask)) return -1;
    }
    return 0;
}

/* The cache entry for (dfa, st), built on a miss. NULL on memory failure. */
static const gr_ci_entry *lexeme_entry(cinfer_grammar_matcher *m, uint32_t dfa, uint32_t st, int *kept) {
    gr_item key[2] = {{GR_LEXEME_KEY, dfa}, {st, 0}};
    uint64_t hash = XXH3_64bits(key, sizeof key);
    *kept = 1;
    const gr_ci_entry *found = gr_mask_cache_find(m->cache, hash, key, 2);
    if (found) return found;
    gr_mask_scratch *s = &m->ms;
    size_t words = cinfer_grammar_mask_words(m->v);
    gr_ci_entry *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->mask = calloc(words, sizeof *e->mask);
    e->items = malloc(sizeof key);
    s->n_bounds = s->n_pool = 0;
    if (!e->mask || !e->items || dfa_walk(m, m->g->cfg->dfas[dfa], 0, st, 0, e->mask)) goto fail;
    memcpy(e->items, key, sizeof key);
    e->n_items = 2;
    e->hash = hash;
    e->n_bounds = s->n_bounds;
    e->bounds = malloc((s->n_bounds ? s->n_bounds : 1) * sizeof *e->bounds);
    e->prefix = malloc(s->n_pool ? s->n_pool : 1);
    if (!e->bounds || !e->prefix) goto fail;
    if (s->n_bounds) memcpy(e->bounds, s->bounds, s->n_bounds * sizeof *e->bounds);
    if (s->n_pool) memcpy(e->prefix, s->pool, s->n_pool);
    e->bytes = sizeof *e + words * 4 + sizeof key + s->n_bounds * sizeof *e->bounds + s->n_pool;
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
