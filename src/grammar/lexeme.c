/* lexeme.c - gr_cfg_lexify: regular nonterminals compiled to DFA terminals (see lexeme.h).
 *
 * Per candidate nonterminal: an epsilon-NFA is built by expanding its productions (left
 * recursion `N -> N a` becomes a loop; any other recursion means "not regular"). Fragments are
 * shared by (nonterminal, start state): two expansions of N from one NFA state accept the same
 * strings, and concatenation distributes over the union of their continuations, so sharing is
 * exact and keeps counted repetitions (`x{0,n}` = n alternatives of left-linear counters) linear
 * instead of quadratic. Then subset construction over byte columns (the partition of the bytes
 * that the NFA's classes induce) with GR_DFA_MAX_STATES as the limit. Decisions are made on the
 * original productions first and the right-hand sides rewritten at the end, so no candidate ever
 * sees a DFA symbol. Owns: the DFAs until they are handed to the grammar. */
#include "grammar/lexeme.h"

#include <stdlib.h>
#include <string.h>

#define LX_MAX_NFA 1500u /* NFA states per candidate */
#define LX_CANDIDATE_WORK 20000u /* subset-construction work per candidate */
#define LX_DELIMITED_WORK 150000u /* the same for `open X close` (a string with a pattern) */
#define LX_MAX_DEPTH 1000u /* nested nonterminals per candidate (C stack) */
#define LX_BUDGET 400000u /* NFA states + DFA work over the whole grammar (general pool) */
#define LX_STRING_BUDGET 1200000u /* the same for strings: `"` X `"`, `"` X, counted (string pool) */
#define LX_SMALL_BUDGET 200000u /* the same for small candidates once the general pool is spent */
#define LX_SMALL_NFA 64u /* NFA states per candidate in the small pool */
#define LX_SMALL_WORK 2000u /* subset-construction work per candidate in the small pool */
#define LX_COUNTED_TOTAL 300000u /* states of all counted DFAs of a grammar (~90 bytes each) */

/* Work pools (see try_nt). A large candidate that fails still costs up to its work limit, and
 * candidates are taken top down, so in a large schema the general pool is often spent on objects
 * that do not fit before the strings and property names nested in them are reached. Strings get
 * a pool of their own (a string left to the CFG costs an Earley closure per byte on every mask),
 * and once the general pool is spent, small candidates (a property name, a literal) still get
 * one. Each pool bounds its own share of compile time. */
enum { LX_POOL_GENERAL, LX_POOL_STRING, LX_POOL_SMALL, LX_N_POOLS };
static const struct {
    uint64_t budget, candidate_work;
    uint32_t max_nfa;
} lx_pool[LX_N_POOLS] = {
    {LX_BUDGET, LX_CANDIDATE_WORK, LX_MAX_NFA},
    {LX_STRING_BUDGET, LX_DELIMITED_WORK, LX_MAX_NFA},
    {LX_SMALL_BUDGET, LX_SMALL_WORK, LX_SMALL_NFA},
};
#define LX_MAX_UNWRAP 8u /* single-symbol wrappers followed to a counted repetition */

typedef struct nfa_edge {
    uint32_t from, to;
    int32_t cls; /* class index, or -1 for epsilon */
} nfa_edge;

typedef struct memo_slot {
    int32_t nt;
    uint32_t from, end;
} memo_slot;

typedef struct lexer_build {
    gr_cfg *g;
    uint32_t n_states;
    nfa_edge *edges;
    uint32_t n_edges, cap_edges;
    uint8_t *on_stack; /* per nonterminal */
    memo_slot *memo;
    uint32_t memo_cap, memo_n;
    uint64_t work, work_start; /* work_start: at the current candidate's start */
    uint64_t work_limit; /* of the current candidate */
    uint64_t budget; /* what work may reach in the current pool */
    uint32_t max_nfa; /* NFA states per candidate in the current pool */
    int pool; /* the current pool: `work` is its count, pool_work[] holds the others' */
    uint64_t pool_work[LX_N_POOLS];
    uint32_t depth; /* of frag_nt recursion, bounded by LX_MAX_DEPTH */
    uint32_t counted_cap; /* most states of a counted DFA (decide_fitting) */
    uint64_t counted_total; /* states of the counted DFAs made so far (LX_COUNTED_TOTAL) */
    int oom;
} lexer_build;

static uint32_t new_state(lexer_build *x) { return x->n_states++; }

/* Makes pool p the current one. Returns the pool that was. */
static int use_pool(lexer_build *x, int p) {
    int was = x->pool;
    x->pool_work[was] = x->work;
    x->pool = p;
    x->work = x->pool_work[p];
    x->budget = lx_pool[p].budget;
    x->max_nfa = lx_pool[p].max_nfa;
    return was;
}

static int add_edge(lexer_build *x, uint32_t from, uint32_t to, int32_t cls) {
    if (x->n_edges == x->cap_edges) {
        uint32_t n = x->cap_edges ? x->cap_edges * 2 : 1024;
        nfa_edge *e = realloc(x->edges, (size_t)n * sizeof *e);
        if (!e) return x->oom = 1, -1;
        x->edges = e;
        x->cap_edges = n;
    }
    x->edges[x->n_edges++] = (nfa_edge){from, to, cls};
    return 0;
}

static uint32_t memo_hash(int32_t nt, uint32_t from) {
    uint64_t h = ((uint64_t)(uint32_t)nt << 32 | from) * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(h >> 32);
}

static memo_slot *memo_find(lexer_build *x, int32_t nt, uint32_t from) {
    uint32_t mask = x->memo_cap - 1;
    for (uint32_t h = memo_hash(nt, from) & mask;; h = (h + 1) & mask)
        if (x->memo[h].nt < 0 || (x->memo[h].nt == nt && x->memo[h].from == from)) return &x->memo[h];
}

static int memo_put(lexer_build *x, int32_t nt, uint32_t from, uint32_t end) {
    if ((x->memo_n + 1) * 2 > x->memo_cap) {
        memo_slot *old = x->memo;
        uint32_t old_cap = x->memo_cap;
        x->memo_cap = old_cap ? old_cap * 2 : 1024;
        x->memo = malloc((size_t)x->memo_cap * sizeof *x->memo);
        if (!x->memo) return x->memo = old, x->memo_cap = old_cap, x->oom = 1, -1;
        for (uint32_t i = 0; i < x->memo_cap; i++) x->memo[i].nt = -1;
        for (uint32_t i = 0; i < old_cap; i++)
            if (old[i].nt >= 0) *memo_find(x, old[i].nt, old[i].from) = old[i];
        free(old);
    }
    *memo_find(x, nt, from) = (memo_slot){nt, from, end};
    x->memo_n++;
    return 0;
}

static int64_t frag_nt(lexer_build *x, int32_t nt, uint32_t from);

/* Adds a path for rhs[first .. first + n) from state `from`. Returns its end state or -1. */
static int64_t frag_seq(lexer_build *x, uint32_t first, uint32_t n, uint32_t from) {
    const gr_cfg *g = x->g;
    uint32_t cur = from;
    for (uint32_t i = 0; i < n; i++) {
        int32_t sym = g->rhs[first + i];
        if (x->n_states >= x->max_nfa || x->work >= x->budget) return -1;
        if (sym >= 0) {
            int64_t e = frag_nt(x, sym, cur);
            if (e < 0) return -1;
            cur = (uint32_t)e;
        } else if (gr_sym_is_dfa(sym) || sym == GR_END) {
            return -1;
        } else {
            uint32_t t = new_state(x);
            x->work++;
            if (add_edge(x, cur, t, -sym - 1)) return -1;
            cur = t;
        }
    }
    return cur;
}

/* Adds nt's language from state `from`; returns the end state or -1 (not regular, a limit). */
static int64_t frag_nt(lexer_build *x, int32_t nt, uint32_t from) {
    const gr_cfg *g = x->g;
    if (x->on_stack[nt] || x->depth >= LX_MAX_DEPTH) return -1;
    if (x->memo_cap) {
        memo_slot *m = memo_find(x, nt, from);
        if (m->nt >= 0) return m->end;
    }
    x->on_stack[nt] = 1;
    x->depth++;
    uint32_t mid = new_state(x);
    int64_t rc = mid;
    /* base alternatives first: the loop alternatives start where they end */
    for (int pass = 0; pass < 2 && rc >= 0; pass++)
        for (uint32_t p = g->prod_first[nt]; p < g->prod_first[nt + 1] && rc >= 0; p++) {
            const gr_prod *pr = &g->prods[p];
            int looping = pr->rhs_len > 0 && g->rhs[pr->rhs_start] == nt;
            if (looping != pass) continue;
            uint32_t start = looping ? mid : from, skip = looping ? 1 : 0;
            int64_t e = frag_seq(x, pr->rhs_start + skip, pr->rhs_len - skip, start);
            if (e < 0 || add_edge(x, (uint32_t)e, mid, -1)) rc = -1;
        }
    x->on_stack[nt] = 0;
    x->depth--;
    if (rc >= 0 && memo_put(x, nt, from, mid)) rc = -1;
    return rc;
}

/* Subset construction ---------------------------------------------------------------------- */

typedef struct subset_build {
    uint32_t n_nfa, final;
    uint32_t *adj_off; /* CSR of edges by source */
    nfa_edge *adj;
    uint32_t *stamp, gen;
    uint32_t *stack;
    /* subsets: sorted state lists in pool; open addressing table of dfa state ids */
    uint32_t *pool, n_pool, cap_pool;
    uint32_t *set_off, *set_len, n_sets, cap_sets;
    uint32_t *tab, tab_cap;
} subset_build;

/* Epsilon closure of the states in s->stack[0..n) into a sorted list at the end of the pool. */
static int64_t closure_into_pool(subset_build *s, uint32_t n) {
    if (++s->gen == 0) {
        memset(s->stamp, 0, (size_t)s->n_nfa * sizeof *s->stamp);
        s->gen = 1;
    }
    uint32_t out = s->n_pool;
    for (uint32_t i = 0; i < n; i++) s->stamp[s->stack[i]] = s->gen;
    while (n) {
        uint32_t q = s->stack[--n];
        if (s->n_pool == s->cap_pool) {
            uint32_t c = s->cap_pool ? s->cap_pool * 2 : 4096;
            uint32_t *p = realloc(s->pool, (size_t)c * sizeof *p);
            if (!p) return -1;
            s->pool = p;
            s->cap_pool = c;
        }
        s->pool[s->n_pool++] = q;
        for (uint32_t e = s->adj_off[q]; e < s->adj_off[q + 1]; e++)
            if (s->adj[e].cls < 0 && s->stamp[s->adj[e].to] != s->gen) {
                s->stamp[s->adj[e].to] = s->gen;
                s->stack[n++] = s->adj[e].to;
            }
    }
    return out;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static uint32_t hash_list(const uint32_t *v, uint32_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint32_t i = 0; i < n; i++) h = (h ^ v[i]) * 0x100000001b3ull;
    return (uint32_t)(h ^ (h >> 29));
}

/* The DFA state (1-based) of the subset at pool[at..n_pool) (sorted and interned here), 0 for an
 * empty subset, or -1 (memory, or more than GR_DFA_MAX_STATES states). */
static int64_t intern_subset(subset_build *s, uint32_t at) {
    uint32_t n = s->n_pool - at;
    if (!n) return 0;
    qsort(s->pool + at, n, sizeof *s->pool, cmp_u32);
    uint32_t h = hash_list(s->pool + at, n), mask = s->tab_cap - 1, slot = h & mask;
    for (; s->tab[slot]; slot = (slot + 1) & mask) {
        uint32_t d = s->tab[slot] - 1;
        if (s->set_len[d] == n && !memcmp(s->pool + s->set_off[d], s->pool + at, n * sizeof *s->pool)) {
            s->n_pool = at;
            return d + 1;
        }
    }
    if (s->n_sets >= GR_DFA_MAX_STATES) return -1;
    if (s->n_sets == s->cap_sets) {
        uint32_t c = s->cap_sets ? s->cap_sets * 2 : 64;
        uint32_t *o = realloc(s->set_off, (size_t)c * sizeof *o);
        if (o) s->set_off = o;
        uint32_t *l = realloc(s->set_len, (size_t)c * sizeof *l);
        if (l) s->set_len = l;
        if (!o || !l) return -1;
        s->cap_sets = c;
    }
    s->set_off[s->n_sets] = at;
    s->set_len[s->n_sets] = n;
    s->tab[slot] = ++s->n_sets;
    return s->n_sets;
}

/* Splits the byte columns by every class the NFA uses. Returns the column count. */
static uint32_t byte_columns(const gr_cfg *g, const nfa_edge *e, uint32_t n_edges, uint8_t col[256]) {
    uint32_t n_cols = 1;
    memset(col, 0, 256);
    int32_t seen[64]; /* the last classes split by, so runs of repeated classes cost nothing */
    uint32_t n_seen = 0;
    for (uint32_t i = 0; i < n_edges; i++) {
        if (e[i].cls < 0) continue;
        uint32_t j = 0;
        while (j < n_seen && seen[j] != e[i].cls) j++;
        if (j < n_seen) continue;
        seen[n_seen++ & 63] = e[i].cls;
        if (n_seen > 64) n_seen = 64;
        const gr_class *c = &g->classes[e[i].cls];
        int16_t remap[2][256];
        memset(remap, 0xff, sizeof remap);
        uint32_t n = 0;
        uint8_t out[256];
        for (int b = 0; b < 256; b++) {
            int in = gr_class_has(c, (uint8_t)b);
            if (remap[in][col[b]] < 0) remap[in][col[b]] = (int16_t)n++;
            out[b] = (uint8_t)(remap[in][col[b]] & 255);
        }
        memcpy(col, out, 256);
        n_cols = n;
    }
    return n_cols;
}

static void subset_free(subset_build *s) {
    free(s->adj_off);
    free(s->adj);
    free(s->stamp);
    free(s->stack);
    free(s->pool);
    free(s->set_off);
    free(s->set_len);
    free(s->tab);
}

void gr_dfa_free(gr_dfa *d) {
    if (!d) return;
    free(d->next);
    free(d->accepting);
    free(d->live);
    free(d->loop);
    free(d);
}

static int build_adjacency(subset_build *s, const lexer_build *x) {
    s->adj_off = calloc(s->n_nfa + 1, sizeof *s->adj_off);
    s->adj = malloc((x->n_edges ? x->n_edges : 1) * sizeof *s->adj);
    s->stamp = calloc(s->n_nfa, sizeof *s->stamp);
    s->stack = malloc((size_t)s->n_nfa * sizeof *s->stack);
    s->tab_cap = 8192; /* a power of two, over twice GR_DFA_MAX_STATES */
    s->tab = calloc(s->tab_cap, sizeof *s->tab);
    if (!s->adj_off || !s->adj || !s->stamp || !s->stack || !s->tab) return -1;
    for (uint32_t i = 0; i < x->n_edges; i++) s->adj_off[x->edges[i].from + 1]++;
    for (uint32_t q = 0; q < s->n_nfa; q++) s->adj_off[q + 1] += s->adj_off[q];
    uint32_t *fill = s->stack; /* borrowed as a cursor per state */
    memcpy(fill, s->adj_off, (size_t)s->n_nfa * sizeof *fill);
    for (uint32_t i = 0; i < x->n_edges; i++) s->adj[fill[x->edges[i].from]++] = x->edges[i];
    return 0;
}

/* The byte-class edges leaving one subset, bucketed by DFA column: a class's columns come from
 * its column mask (computed once per determinization), so a subset's successors cost one pass
 * over its edges instead of one pass per column. */
typedef struct col_buckets {
    uint32_t n_cols;
    uint64_t (*cols_of)[4]; /* per grammar class: the columns its bytes fall in */
    uint32_t *off; /* n_cols + 1 */
    uint32_t *to;
    uint32_t cap_to;
} col_buckets;

static int col_buckets_init(col_buckets *cb, const lexer_build *x, const gr_dfa *d) {
    const gr_cfg *g = x->g;
    cb->n_cols = d->n_cols;
    cb->cols_of = calloc(g->n_classes ? g->n_classes : 1, sizeof *cb->cols_of);
    cb->off = calloc(d->n_cols + 1, sizeof *cb->off);
    uint8_t *done = calloc(g->n_classes ? g->n_classes : 1, 1);
    int ok = cb->cols_of && cb->off && done;
    for (uint32_t i = 0; ok && i < x->n_edges; i++) {
        int32_t cls = x->edges[i].cls;
        if (cls < 0 || done[cls]) continue;
        done[cls] = 1;
        for (int b = 0; b < 256; b++)
            if (gr_class_has(&g->classes[cls], (uint8_t)b))
                cb->cols_of[cls][d->col[b] >> 6] |= 1ull << (d->col[b] & 63);
    }
    free(done);
    return ok ? 0 : -1;
}

/* Buckets the targets of subset ds's class edges by column into off/to. Returns 0 or -1. */
static int col_buckets_fill(col_buckets *cb, const subset_build *s, uint32_t ds) {
    memset(cb->off, 0, (cb->n_cols + 1) * sizeof *cb->off);
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < s->set_len[ds]; i++) {
            uint32_t q = s->pool[s->set_off[ds] + i];
            for (uint32_t e = s->adj_off[q]; e < s->adj_off[q + 1]; e++) {
                const nfa_edge *ed = &s->adj[e];
                if (ed->cls < 0) continue;
                for (int w = 0; w < 4; w++)
                    for (uint64_t bits = cb->cols_of[ed->cls][w]; bits; bits &= bits - 1) {
                        uint32_t c = (uint32_t)w * 64 + (uint32_t)__builtin_ctzll(bits);
                        if (pass == 0) cb->off[c + 1]++;
                        else cb->to[cb->off[c]++] = ed->to;
                    }
            }
        }
        if (pass == 0) {
            for (uint32_t c = 0; c < cb->n_cols; c++) cb->off[c + 1] += cb->off[c];
            uint32_t total = cb->off[cb->n_cols];
            if (total > cb->cap_to) {
                uint32_t cap = cb->cap_to ? cb->cap_to : 1024;
                while (cap < total) cap *= 2;
                uint32_t *t = realloc(cb->to, cap * sizeof *t);
                if (!t) return -1;
                cb->to = t;
                cb->cap_to = cap;
            }
        }
    }
    /* the fill advanced each start to its end: shift back */
    for (uint32_t c = cb->n_cols; c > 0; c--) cb->off[c] = cb->off[c - 1];
    cb->off[0] = 0;
    return 0;
}

static void col_buckets_free(col_buckets *cb) {
    free(cb->cols_of);
    free(cb->off);
    free(cb->to);
}

/* Determinizes the NFA of x (start 0, final state `final`). Returns the DFA or NULL (limit, memory). */
static gr_dfa *determinize(lexer_build *x, uint32_t final) {
    subset_build s = {.n_nfa = x->n_states, .final = final};
    gr_dfa *d = calloc(1, sizeof *d);
    uint16_t *next = NULL;
    uint32_t cap_rows = 0;
    int ok = d && !build_adjacency(&s, x);
    if (ok) d->n_cols = byte_columns(x->g, x->edges, x->n_edges, d->col);
    if (ok) s.stack[0] = 0;
    int64_t at = ok ? closure_into_pool(&s, 1) : -1;
    ok = ok && at >= 0 && intern_subset(&s, (uint32_t)at) == 1;
    col_buckets cb = {0};
    ok = ok && !col_buckets_init(&cb, x, d);
    for (uint32_t ds = 0; ok && ds < s.n_sets; ds++) {
        if (s.n_sets + 1 > cap_rows) {
            cap_rows = cap_rows ? cap_rows * 2 : 64;
            uint16_t *n = realloc(next, (size_t)(cap_rows + 1) * d->n_cols * sizeof *n);
            if (!n) {
                ok = 0;
                break;
            }
            next = n;
        }
        if (ds == 0) memset(next, 0, d->n_cols * sizeof *next);
        if (col_buckets_fill(&cb, &s, ds)) {
            ok = 0;
            break;
        }
        for (uint32_t c = 0; ok && c < d->n_cols; c++) {
            uint32_t n = 0;
            if (++s.gen == 0) memset(s.stamp, 0, (size_t)s.n_nfa * sizeof *s.stamp), s.gen = 1;
            for (uint32_t i = cb.off[c]; i < cb.off[c + 1]; i++) {
                uint32_t to = cb.to[i];
                if (s.stamp[to] != s.gen) {
                    s.stamp[to] = s.gen;
                    s.stack[n++] = to;
                }
            }
            x->work += s.set_len[ds];
            int64_t t = -1, from = n ? closure_into_pool(&s, n) : (int64_t)s.n_pool;
            if (from >= 0) t = intern_subset(&s, (uint32_t)from);
            if (t < 0 || x->work >= x->budget || x->work - x->work_start >= x->work_limit) ok = 0;
            else next[(size_t)(ds + 1) * d->n_cols + c] = (uint16_t)t;
        }
    }
    col_buckets_free(&cb);
    if (ok) {
        d->n_states = s.n_sets;
        d->next = next;
        next = NULL;
        d->accepting = calloc(d->n_states + 1, 1);
        d->live = calloc(d->n_states + 1, sizeof *d->live);
        d->loop = calloc(d->n_states + 1, sizeof *d->loop);
        gr_class *col_bytes = calloc(d->n_cols, sizeof *col_bytes); /* the bytes of each column */
        ok = d->accepting && d->live && d->loop && col_bytes;
        for (int b = 0; ok && b < 256; b++) gr_class_set(&col_bytes[d->col[b]], (uint8_t)b);
        for (uint32_t ds = 0; ok && ds < s.n_sets; ds++) {
            for (uint32_t i = 0; i < s.set_len[ds]; i++)
                if (s.pool[s.set_off[ds] + i] == final) d->accepting[ds + 1] = 1;
            for (uint32_t c = 0; c < d->n_cols; c++) {
                uint32_t t = d->next[(size_t)(ds + 1) * d->n_cols + c];
                for (int w = 0; w < 4; w++) {
                    if (t) d->live[ds + 1].bits[w] |= col_bytes[c].bits[w];
                    if (t == ds + 1) d->loop[ds + 1].bits[w] |= col_bytes[c].bits[w];
                }
            }
        }
        free(col_bytes);
    }
    free(next);
    subset_free(&s);
    if (!ok) {
        gr_dfa_free(d);
        return NULL;
    }
    return d;
}

static gr_dfa *try_nt(lexer_build *x, int32_t nt);

static int is_class_sym(int32_t s) { return s < -1 && !gr_sym_is_dfa(s) && s != GR_END; }

/* 1 when nt's one production is `open X close` with byte classes at both ends (a JSON string with
 * a pattern, whose search DFA is worth more subset-construction work than a large object), or
 * `"` X (the JSON front end's property names other than the declared ones). */
static int is_delimited(const gr_cfg *g, int32_t nt) {
    uint32_t p = g->prod_first[nt];
    if (g->prod_first[nt + 1] - p != 1) return 0;
    const int32_t *rhs = &g->rhs[g->prods[p].rhs_start];
    if (g->prods[p].rhs_len == 3) return is_class_sym(rhs[0]) && is_class_sym(rhs[2]);
    if (g->prods[p].rhs_len != 2 || !is_class_sym(rhs[0]) || rhs[1] < 0) return 0;
    const gr_class *c = &g->classes[-rhs[0] - 1];
    gr_class quote = {{0}};
    gr_class_set(&quote, '"');
    return !memcmp(c, &quote, sizeof quote);
}

/* The counted repetition nt stands for, following nonterminals with one single-symbol
 * production (the regex front end's groups), or NULL. */
static const gr_counted *counted_of(const gr_cfg *g, int32_t nt) {
    for (uint32_t hop = 0; hop < LX_MAX_UNWRAP && nt >= 0; hop++) {
        for (uint32_t i = 0; i < g->n_counted; i++)
            if (g->counted[i].nt == nt) return &g->counted[i];
        uint32_t p = g->prod_first[nt];
        if (g->prod_first[nt + 1] - p != 1 || g->prods[p].rhs_len != 1) return NULL;
        nt = g->rhs[g->prods[p].rhs_start];
    }
    return NULL;
}

/* The counted DFA (lexeme.h) when nt's one production is `open R close` with R a counted
 * repetition of a prefix-free regular element; NULL otherwise (x->oom on memory failure). */
static gr_dfa *try_counted(lexer_build *x, int32_t nt) {
    gr_cfg *g = x->g;
    uint32_t p = g->prod_first[nt];
    if (g->prod_first[nt + 1] - p != 1 || g->prods[p].rhs_len != 3) return NULL;
    const int32_t *rhs = &g->rhs[g->prods[p].rhs_start];
    if (!is_class_sym(rhs[0]) || !is_class_sym(rhs[2]) || rhs[1] < 0) return NULL;
    const gr_counted *rep = counted_of(g, rhs[1]);
    if (!rep || rep->sym == -1 || (rep->sym >= 0 && g->prod_first[rep->sym + 1] == g->prod_first[rep->sym]))
        return NULL;
    int was = use_pool(x, LX_POOL_STRING);
    gr_dfa *elem = NULL, *d = NULL;
    if (x->work < x->budget) elem = rep->sym >= 0 ? try_nt(x, rep->sym) : gr_dfa_byte_class(&g->classes[-rep->sym - 1]);
    if (!elem && rep->sym < 0 && x->work < x->budget) x->oom = 1;
    uint64_t room = LX_COUNTED_TOTAL - x->counted_total; /* the string pool bounds time, this memory */
    if (elem && room)
        d = gr_dfa_counted(elem, &g->classes[-rhs[0] - 1], &g->classes[-rhs[2] - 1], rep->min, rep->max,
                           room < x->counted_cap ? (uint32_t)room : x->counted_cap);
    gr_dfa_free(elem);
    if (d) {
        x->work += d->n_states;
        x->counted_total += d->n_states;
    }
    use_pool(x, was);
    return d;
}

static gr_dfa *try_nt_within(lexer_build *x, int32_t nt);

/* The DFA for nonterminal nt, or NULL when it does not qualify (or memory ran out: x->oom),
 * charged to the string pool for a string (or inside one: a counted string's element), else to
 * the general pool while it lasts, then to the small pool. */
static gr_dfa *try_nt(lexer_build *x, int32_t nt) {
    if (x->g->nullable[nt]) return NULL;
    int p = x->pool == LX_POOL_STRING || is_delimited(x->g, nt)                                  ? LX_POOL_STRING
            : (x->pool == LX_POOL_GENERAL ? x->work : x->pool_work[LX_POOL_GENERAL]) < LX_BUDGET ? LX_POOL_GENERAL
                                                                                                 : LX_POOL_SMALL;
    int was = use_pool(x, p);
    gr_dfa *d = try_nt_within(x, nt);
    use_pool(x, was);
    return d;
}

static gr_dfa *try_nt_within(lexer_build *x, int32_t nt) {
    if (x->work >= x->budget) return NULL;
    x->n_states = 0;
    x->n_edges = 0;
    x->work_start = x->work;
    x->work_limit = lx_pool[x->pool].candidate_work;
    if (x->memo_n) {
        if (x->memo_cap > 4096) { /* keep clearing cheap for the many small candidates */
            memo_slot *m = realloc(x->memo, 1024 * sizeof *m);
            if (!m) return x->oom = 1, NULL;
            x->memo = m;
            x->memo_cap = 1024;
        }
        for (uint32_t i = 0; i < x->memo_cap; i++) x->memo[i].nt = -1;
        x->memo_n = 0;
    }
    uint32_t start = new_state(x);
    int64_t end = frag_nt(x, nt, start);
    x->work += x->n_states;
    if (end < 0 || x->oom) return NULL;
    gr_dfa *d = determinize(x, (uint32_t)end);
    return d;
}

/* Top-down decision: dfa_of[nt] = DFA symbol, 0 = expand (not regular), -1 = not visited. */
static int decide(lexer_build *x, int32_t *dfa_of, int32_t root) {
    gr_cfg *g = x->g;
    int32_t *worklist = malloc((size_t)g->n_nts * sizeof *worklist);
    if (!worklist) return -1;
    uint32_t n = 0;
    worklist[n++] = root;
    dfa_of[root] = 0;
    while (n) {
        int32_t nt = worklist[--n];
        gr_dfa *d = try_counted(x, nt);
        if (!d && !x->oom) d = try_nt(x, nt);
        if (x->oom) break;
        if (d) {
            gr_dfa **ds = realloc(g->dfas, (g->n_dfas + 1) * sizeof *ds);
            if (!ds) {
                gr_dfa_free(d);
                x->oom = 1;
                break;
            }
            g->dfas = ds;
            g->dfas[g->n_dfas] = d;
            dfa_of[nt] = GR_DFA_SYM_BASE - (int32_t)g->n_dfas++;
            continue;
        }
        for (uint32_t p = g->prod_first[nt]; p < g->prod_first[nt + 1]; p++)
            for (uint32_t i = 0; i < g->prods[p].rhs_len; i++) {
                int32_t s = g->rhs[g->prods[p].rhs_start + i];
                if (s >= 0 && dfa_of[s] == -1) {
                    dfa_of[s] = 0;
                    worklist[n++] = s;
                }
            }
    }
    free(worklist);
    return x->oom ? -1 : 0;
}

static uint32_t bit_width(uint64_t n) {
    uint32_t bits = 0;
    while (bits < 64 && n >> bits) bits++;
    return bits;
}

static int32_t dfa_sym_of(const int32_t *dfa_of, int32_t s) { return s >= 0 && dfa_of[s] < -1 ? dfa_of[s] : 0; }

/* The sites (positions before a DFA terminal) the rewrite will make: DFA nonterminals in the
 * productions it keeps (nonterminals that stayed a CFG, and the start). */
static uint64_t count_sites(const gr_cfg *g, const int32_t *dfa_of) {
    uint64_t n = 0;
    for (uint32_t p = 0; p < g->n_prods; p++)
        if (dfa_of[g->prods[p].lhs] == 0 || g->prods[p].lhs == g->aug_start)
            for (uint32_t i = 0; i < g->prods[p].rhs_len; i++)
                n += dfa_sym_of(dfa_of, g->rhs[g->prods[p].rhs_start + i]) != 0;
    return n;
}

/* The state bits that leave room for n sites (site numbers below 2^(31 - bits) - 1). */
static uint32_t state_bits_for(uint64_t n_sites) { return 31 - bit_width(n_sites + 1); }

static uint32_t largest_counted(const gr_cfg *g) {
    uint32_t most = 0;
    for (uint32_t i = 0; i < g->n_dfas; i++)
        if (g->dfas[i]->count_k && g->dfas[i]->n_states > most) most = g->dfas[i]->n_states;
    return most;
}

static void drop_all(gr_cfg *g) {
    for (uint32_t i = 0; i < g->n_dfas; i++) gr_dfa_free(g->dfas[i]);
    g->n_dfas = 0;
}

/* Decides the lexemes so that every DFA's states fit the position encoding (cfg.h) beside the
 * sites: a decision whose largest counted DFA does not fit is redone with that room as the limit
 * (the room only shrinks, so this ends). Returns 1 when decided, 0 when no decision fits (no
 * lexemes then), -1 (memory). */
static int decide_fitting(lexer_build *x, int32_t *dfa_of) {
    gr_cfg *g = x->g;
    x->counted_cap = GR_COUNTED_MAX_STATES;
    for (;;) {
        for (uint32_t i = 0; i < g->n_nts; i++) dfa_of[i] = -1;
        memset(x->pool_work, 0, sizeof x->pool_work);
        x->counted_total = 0;
        x->work = 0;
        x->pool = LX_POOL_GENERAL;
        use_pool(x, LX_POOL_GENERAL);
        if (decide(x, dfa_of, g->start)) return -1;
        uint32_t bits = state_bits_for(count_sites(g, dfa_of));
        if (bits < GR_POS_MIN_STATE_BITS) {
            drop_all(g);
            return 0;
        }
        uint64_t room = ((uint64_t)1 << bits) - 1;
        if (largest_counted(g) <= room) return 1;
        drop_all(g);
        x->counted_cap = (uint32_t)room;
    }
}

/* Numbers the positions before a DFA terminal and fixes the state bits (cfg.h). 0 or -1. */
static int make_sites(gr_cfg *g) {
    uint32_t most = 2;
    for (uint32_t i = 0; i < g->n_dfas; i++)
        if (g->dfas[i]->n_states > most) most = g->dfas[i]->n_states;
    g->site_of = calloc(g->n_rhs ? g->n_rhs : 1, sizeof *g->site_of);
    if (!g->site_of) return -1;
    uint32_t n = 0;
    for (uint32_t p = 0; p < g->n_rhs; p++)
        if (gr_sym_is_dfa(g->rhs[p])) g->site_of[p] = n++;
    g->site_at = malloc((n ? n : 1) * sizeof *g->site_at);
    if (!g->site_at) return -1;
    for (uint32_t p = 0; p < g->n_rhs; p++)
        if (gr_sym_is_dfa(g->rhs[p])) g->site_at[g->site_of[p]] = p;
    g->n_sites = n;
    g->state_bits = bit_width(most) > GR_POS_MIN_STATE_BITS ? bit_width(most) : GR_POS_MIN_STATE_BITS;
    g->state_mask = (1u << g->state_bits) - 1;
    return 0;
}

int gr_cfg_lexify(gr_cfg *g) {
    if (g->n_rhs >= GR_POS_IN_LEXEME / 2) return 0; /* positions would not fit beside a DFA state */
    lexer_build x = {.g = g};
    int32_t *dfa_of = malloc((size_t)g->n_nts * sizeof *dfa_of);
    x.on_stack = calloc(g->n_nts, 1);
    x.memo_cap = 1024;
    x.memo = malloc(x.memo_cap * sizeof *x.memo);
    int rc = -1;
    if (dfa_of && x.on_stack && x.memo) {
        for (uint32_t i = 0; i < x.memo_cap; i++) x.memo[i].nt = -1;
        rc = decide_fitting(&x, dfa_of);
    }
    /* rewrite every production of a nonterminal that stayed a CFG (the others are unreachable) */
    if (rc == 1)
        for (uint32_t p = 0; p < g->n_prods; p++) {
            if (dfa_of[g->prods[p].lhs] != 0 && g->prods[p].lhs != g->aug_start) continue;
            for (uint32_t i = 0; i < g->prods[p].rhs_len; i++) {
                int32_t *s = &g->rhs[g->prods[p].rhs_start + i];
                if (dfa_sym_of(dfa_of, *s)) *s = dfa_of[*s];
            }
        }
    if (rc >= 0) rc = make_sites(g);
    free(dfa_of);
    free(x.on_stack);
    free(x.memo);
    free(x.edges);
    return rc;
}
