/* grammar_impl.h - the definitions behind the opaque types of cinfer/grammar.h that more than
 * one file of src/grammar/ needs: the compiled grammar (a finalized CFG plus a refcount), the
 * vocabulary trie, and the front ends that turn each spec kind into CFG rules.
 * Invariants: a cinfer_grammar's cfg is finalized and never changes; a vocab is immutable. */
#ifndef CINFER_GRAMMAR_IMPL_H
#define CINFER_GRAMMAR_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "cinfer/grammar.h"
#include "grammar/cfg.h"
#include "grammar/earley.h"
#include "grammar/mask_cache.h"

#define GR_MAX_MASK_CACHES 4

struct cinfer_grammar {
    atomic_int refs;
    gr_cfg *cfg;
    /* context-independent mask caches, one per vocabulary (by content hash), made on first use */
    pthread_mutex_t caches_mu;
    gr_mask_cache *caches[GR_MAX_MASK_CACHES];
    uint32_t n_caches;
    /* set once any matcher of this grammar hit the item limit (max_set_items): masks cached from
     * such a walk leave the over-limit tokens out, so a matcher served from the cache reports the
     * limit too (cinfer_grammar_matcher_limit_error) */
    atomic_int limit_hit;
};

/* The grammar's mask cache for v (created on first use), or NULL when GR_MAX_MASK_CACHES other
 * vocabularies already have one or memory ran out. */
gr_mask_cache *gr_grammar_mask_cache(cinfer_grammar *g, const cinfer_grammar_vocab *v);

/* Trie of the non-special, non-empty tokens. Node 0 is the root (the empty prefix). The
 * children of a node are contiguous in edge_byte/edge_node, sorted by byte. Nodes are numbered in
 * depth-first preorder and the trie tokens are sorted by bytes (trie_tokens), so the tokens at or
 * below a node are the contiguous range trie_tokens[tok_lo, tok_hi). */
typedef struct gr_trie_node {
    uint32_t first_edge;
    uint32_t n_edges;
    uint32_t n_own; /* tokens whose bytes end here: trie_tokens[tok_lo .. tok_lo + n_own) */
    int32_t token; /* first token whose bytes end here, or -1; more via same_next */
    uint32_t tok_lo, tok_hi; /* the tokens of this node's subtree, in trie_tokens */
} gr_trie_node;

struct cinfer_grammar_vocab {
    uint32_t n_tokens;
    gr_trie_node *nodes;
    uint32_t n_nodes;
    uint8_t *edge_byte;
    uint32_t *edge_node;
    int32_t *same_next; /* per token: next token with the same bytes, or -1 */
    uint32_t *eos;
    uint32_t n_eos;
    /* per token: its bytes (offsets into bytes), special flag */
    uint32_t *tok_off;
    uint32_t *tok_len;
    uint8_t *tok_special;
    uint8_t *bytes;
    uint8_t *is_eos;
    uint32_t max_depth;
    uint32_t *trie_tokens; /* the trie's token ids sorted by bytes (see gr_trie_node) */
    gr_class *below_bytes; /* per node: every byte on an edge strictly below it */
    uint64_t content_hash; /* of every token's bytes and flags and the EOS ids */
};

/* Front ends: each adds rules to g and returns the nonterminal deriving exactly the language of
 * the spec, or -1 with err filled. depth: remaining nesting budget. */

/* Regex modes. */
enum {
    GR_RX_RAW = 0, /* the whole byte string matches the regex (implicitly anchored) */
    GR_RX_JSON_STRING = 1, /* JSON Schema `pattern`: search semantics (unanchored unless ^/$), and
                              the result is the contents of a JSON string literal: each matched
                              character appears JSON-escaped where JSON requires it */
};
int32_t gr_regex_compile(gr_cfg *g, const char *re, size_t len, int mode, uint32_t depth, cinfer_grammar_error *err);
int32_t gr_gbnf_compile(gr_cfg *g, const char *text, size_t len, uint32_t depth, cinfer_grammar_error *err);
int32_t gr_json_schema_compile(gr_cfg *g, const char *text, size_t len, uint32_t flags, uint32_t depth,
                               cinfer_grammar_error *err);
int32_t gr_choice_compile(gr_cfg *g, const char *text, size_t len, cinfer_grammar_error *err);
/* Reports a builder limit failure in err (size/time/memory). Returns -1. */
int gr_limit_fail(const gr_cfg *g, cinfer_grammar_error *err);

#endif
