/* vocab.c - the per-model token trie (cinfer_grammar_vocab): built once from the token byte
 * strings, immutable afterwards. Special tokens and empty tokens are kept out of the trie (they
 * are never allowed by bytes; EOS ids are allowed separately when the match is complete).
 * Construction: sort the token ids by bytes, then lay the trie out depth-first with each node's
 * children contiguous, so a mask walk touches memory roughly in order. The sorted ids are kept
 * (trie_tokens): a subtree's tokens are one range of them, and below_bytes says which bytes occur
 * below each node, so a walk can accept a whole subtree at once (mask.c). */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "grammar/grammar_impl.h"

static int cmp_tok(const void *a, const void *b, void *ctx) {
    const cinfer_grammar_vocab *v = ctx;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    uint32_t lx = v->tok_len[x], ly = v->tok_len[y], n = lx < ly ? lx : ly;
    int c = memcmp(v->bytes + v->tok_off[x], v->bytes + v->tok_off[y], n);
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : (x > y);
}

typedef struct builder {
    cinfer_grammar_vocab *v;
    const uint32_t *order; /* sorted token ids */
    uint32_t cap_nodes, cap_edges, n_edges;
} builder;

static int new_node(builder *b, uint32_t depth) {
    cinfer_grammar_vocab *v = b->v;
    if (v->n_nodes == b->cap_nodes) {
        uint32_t n = b->cap_nodes ? b->cap_nodes * 2 : 1024;
        gr_trie_node *p = realloc(v->nodes, (size_t)n * sizeof *p);
        if (!p) return -1;
        v->nodes = p;
        b->cap_nodes = n;
    }
    v->nodes[v->n_nodes] = (gr_trie_node){.first_edge = 0, .n_edges = 0, .n_own = 0, .token = -1};
    if (depth > v->max_depth) v->max_depth = depth;
    return (int)v->n_nodes++;
}

static int reserve_edges(builder *b, uint32_t need) {
    cinfer_grammar_vocab *v = b->v;
    if (need <= b->cap_edges) return 0;
    uint32_t n = b->cap_edges ? b->cap_edges : 1024;
    while (n < need) n *= 2;
    uint8_t *eb = realloc(v->edge_byte, n);
    if (!eb) return -1;
    v->edge_byte = eb;
    uint32_t *en = realloc(v->edge_node, (size_t)n * sizeof *en);
    if (!en) return -1;
    v->edge_node = en;
    b->cap_edges = n;
    return 0;
}

static uint8_t byte_at(const cinfer_grammar_vocab *v, uint32_t tok, uint32_t d) {
    return v->bytes[v->tok_off[tok] + d];
}

/* Fills node `node` from the sorted tokens [lo, hi), which all share their first `depth` bytes. */
static int build_node(builder *b, uint32_t node, uint32_t lo, uint32_t hi, uint32_t depth) {
    cinfer_grammar_vocab *v = b->v;
    int32_t last = -1;
    v->nodes[node].tok_lo = lo;
    v->nodes[node].tok_hi = hi;
    while (lo < hi && v->tok_len[b->order[lo]] == depth) { /* tokens ending here (sorted first) */
        int32_t t = (int32_t)b->order[lo++];
        if (last < 0) v->nodes[node].token = t;
        else v->same_next[last] = t;
        last = t;
        v->nodes[node].n_own++;
    }
    if (lo == hi) return 0;
    uint32_t n_groups = 0;
    for (uint32_t i = lo; i < hi; i++)
        if (i == lo || byte_at(v, b->order[i], depth) != byte_at(v, b->order[i - 1], depth)) n_groups++;
    uint32_t first = b->n_edges;
    if (reserve_edges(b, first + n_groups)) return -1;
    b->n_edges += n_groups;
    v->nodes[node].first_edge = first;
    v->nodes[node].n_edges = n_groups;
    uint32_t e = first, start = lo;
    for (uint32_t i = lo + 1; i <= hi; i++) {
        if (i < hi && byte_at(v, b->order[i], depth) == byte_at(v, b->order[start], depth)) continue;
        int child = new_node(b, depth + 1);
        if (child < 0) return -1;
        v->edge_byte[e] = byte_at(v, b->order[start], depth);
        v->edge_node[e] = (uint32_t)child;
        e++;
        if (build_node(b, (uint32_t)child, start, i, depth + 1)) return -1;
        start = i;
    }
    return 0;
}

/* Fills below_bytes. Children have higher preorder numbers than their parent, so one pass from
 * the last node back sees every child before its parent. Returns 0 or -1 (memory). */
static int below_bytes_fill(cinfer_grammar_vocab *v) {
    v->below_bytes = calloc(v->n_nodes, sizeof *v->below_bytes);
    if (!v->below_bytes) return -1;
    for (uint32_t n = v->n_nodes; n-- > 0;) {
        const gr_trie_node *nd = &v->nodes[n];
        gr_class *c = &v->below_bytes[n];
        for (uint32_t e = nd->first_edge; e < nd->first_edge + nd->n_edges; e++) {
            const gr_class *sub = &v->below_bytes[v->edge_node[e]];
            gr_class_set(c, v->edge_byte[e]);
            for (int w = 0; w < 4; w++) c->bits[w] |= sub->bits[w];
        }
    }
    return 0;
}

static int copy_tokens(cinfer_grammar_vocab *v, const cinfer_grammar_token *tokens, uint32_t n) {
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) total += tokens[i].len;
    v->bytes = malloc(total ? total : 1);
    v->tok_off = malloc((size_t)n * sizeof *v->tok_off);
    v->tok_len = malloc((size_t)n * sizeof *v->tok_len);
    v->tok_special = malloc(n);
    v->is_eos = calloc(n, 1);
    v->same_next = malloc((size_t)n * sizeof *v->same_next);
    if (!v->bytes || !v->tok_off || !v->tok_len || !v->tok_special || !v->is_eos || !v->same_next) return -1;
    size_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (tokens[i].len) memcpy(v->bytes + off, tokens[i].bytes, tokens[i].len);
        v->tok_off[i] = (uint32_t)off;
        v->tok_len[i] = tokens[i].len;
        v->tok_special[i] = tokens[i].special ? 1 : 0;
        v->same_next[i] = -1;
        off += tokens[i].len;
    }
    return 0;
}

cinfer_grammar_vocab *cinfer_grammar_vocab_new(const cinfer_grammar_token *tokens, uint32_t n_tokens,
                                               const uint32_t *eos_ids, uint32_t n_eos, cinfer_grammar_error *err) {
    if (!tokens || n_tokens == 0) return gr_fail(err, "", -1, "empty vocabulary"), NULL;
    for (uint32_t i = 0; i < n_tokens; i++)
        if (tokens[i].len > 60000 || (tokens[i].len && !tokens[i].bytes))
            return gr_fail(err, "", -1, "token %u has invalid bytes", i), NULL;
    for (uint32_t i = 0; i < n_eos; i++)
        if (eos_ids[i] >= n_tokens) return gr_fail(err, "", -1, "eos id %u out of range", eos_ids[i]), NULL;
    cinfer_grammar_vocab *v = calloc(1, sizeof *v);
    uint32_t *order = malloc((size_t)n_tokens * sizeof *order);
    builder b = {.v = v};
    int ok = v && order && !copy_tokens(v, tokens, n_tokens);
    if (ok) {
        v->n_tokens = n_tokens;
        v->eos = malloc((size_t)(n_eos ? n_eos : 1) * sizeof *v->eos);
        ok = v->eos != NULL;
    }
    if (ok) {
        v->n_eos = n_eos;
        for (uint32_t i = 0; i < n_eos; i++) v->eos[i] = eos_ids[i], v->is_eos[eos_ids[i]] = 1;
        uint32_t n = 0;
        for (uint32_t i = 0; i < n_tokens; i++)
            if (!v->tok_special[i] && v->tok_len[i] > 0) order[n++] = i;
        qsort_r(order, n, sizeof *order, cmp_tok, v);
        b.order = order;
        ok = new_node(&b, 0) == 0 && !build_node(&b, 0, 0, n, 0);
    }
    if (v) v->trie_tokens = order; /* owned by v from here */
    else free(order);
    if (ok) ok = !below_bytes_fill(v);
    if (ok) {
        XXH3_state_t *st = XXH3_createState();
        ok = st && XXH3_64bits_reset(st) == XXH_OK;
        for (uint32_t i = 0; ok && i < n_tokens; i++) {
            uint32_t meta[2] = {v->tok_len[i], v->tok_special[i]};
            XXH3_64bits_update(st, meta, sizeof meta);
            XXH3_64bits_update(st, v->bytes + v->tok_off[i], v->tok_len[i]);
        }
        if (ok) XXH3_64bits_update(st, v->eos, (size_t)n_eos * sizeof *v->eos);
        if (ok) v->content_hash = XXH3_64bits_digest(st);
        XXH3_freeState(st);
    }
    if (!ok) {
        cinfer_grammar_vocab_free(v);
        return gr_fail(err, "", -1, "out of memory building the token trie"), NULL;
    }
    return v;
}

void cinfer_grammar_vocab_free(cinfer_grammar_vocab *v) {
    if (!v) return;
    free(v->nodes);
    free(v->trie_tokens);
    free(v->below_bytes);
    free(v->edge_byte);
    free(v->edge_node);
    free(v->same_next);
    free(v->eos);
    free(v->tok_off);
    free(v->tok_len);
    free(v->tok_special);
    free(v->bytes);
    free(v->is_eos);
    free(v);
}

uint32_t cinfer_grammar_vocab_size(const cinfer_grammar_vocab *v) { return v ? v->n_tokens : 0; }
size_t cinfer_grammar_mask_words(const cinfer_grammar_vocab *v) { return v ? (v->n_tokens + 31) / 32 : 0; }
