/* cfg.c - the byte-level CFG builder and its finalization (see cfg.h for the encoding).
 * Owns: class deduplication (a hash of the 32-byte set), the size/time limit checks done on
 * every production, and the tables gr_cfg_finalize computes (pos_prod, prod_first, nullable). */
#include "grammar/cfg.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timeutil.h"
#include "grammar/lexeme.h"

int gr_fail(cinfer_grammar_error *err, const char *keyword, long position, const char *fmt, ...) {
    if (!err) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    snprintf(err->keyword, sizeof err->keyword, "%s", keyword ? keyword : "");
    err->position = position;
    return -1;
}

cinfer_grammar_limits gr_limits_resolve(const cinfer_grammar_limits *limits) {
    cinfer_grammar_limits l = {0};
    if (limits) l = *limits;
    if (l.max_compile_ms <= 0) l.max_compile_ms = 2000;
    if (l.max_rules == 0) l.max_rules = 200000;
    if (l.max_spec_size == 0) l.max_spec_size = 4u << 20;
    if (l.max_depth == 0) l.max_depth = 64;
    if (l.max_set_items == 0) l.max_set_items = l.max_rules > UINT32_MAX / 4 ? UINT32_MAX : 4 * l.max_rules;
    return l;
}

gr_cfg *gr_cfg_new(const cinfer_grammar_limits *limits) {
    gr_cfg *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->max_rules = limits->max_rules;
    g->max_set_items = limits->max_set_items;
    g->deadline_ms = time_now() * 1000.0 + limits->max_compile_ms;
    g->class_hash_cap = 256;
    g->class_hash = calloc(g->class_hash_cap, sizeof *g->class_hash);
    if (!g->class_hash) {
        free(g);
        return NULL;
    }
    g->start = -1;
    /* Reserved: nonterminal 0 and class 0 (symbol -1), so a constructor's failure value (0 or -1)
     * is never a valid symbol. */
    g->n_nts = 1;
    gr_class empty = {{0}};
    if (gr_term(g, &empty) != -1) {
        gr_cfg_free(g);
        return NULL;
    }
    return g;
}

void gr_cfg_free(gr_cfg *g) {
    if (!g) return;
    free(g->classes);
    free(g->class_hash);
    free(g->prods);
    free(g->rhs);
    free(g->pos_prod);
    free(g->prod_first);
    free(g->nullable);
    for (uint32_t i = 0; i < g->n_dfas; i++) gr_dfa_free(g->dfas[i]);
    free(g->dfas);
    free(g->counted);
    free(g->site_at);
    free(g->site_of);
    free(g);
}

static const char *const failure_names[] = {"", "size", "time", "memory"};
enum { FAIL_NONE, FAIL_SIZE, FAIL_TIME, FAIL_MEMORY };

const char *gr_cfg_failure(const gr_cfg *g) { return failure_names[g->failed]; }

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem) {
    if (need <= *cap) return 0;
    uint32_t n = *cap ? *cap : 16;
    while (n < need) n *= 2;
    void *q = realloc(*p, (size_t)n * elem);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

int32_t gr_nt(gr_cfg *g) {
    if (g->failed) return -1;
    if (g->n_nts >= g->max_rules) {
        g->failed = FAIL_SIZE;
        return -1;
    }
    return (int32_t)g->n_nts++;
}

static uint32_t class_hash(const gr_class *c) {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 4; i++) h = (h ^ c->bits[i]) * 0xff51afd7ed558ccdull;
    return (uint32_t)(h ^ (h >> 32));
}

static int class_rehash(gr_cfg *g) {
    uint32_t cap = g->class_hash_cap * 2;
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t) return -1;
    for (uint32_t i = 0; i < g->n_classes; i++) {
        uint32_t h = class_hash(&g->classes[i]) & (cap - 1);
        while (t[h]) h = (h + 1) & (cap - 1);
        t[h] = i + 1;
    }
    free(g->class_hash);
    g->class_hash = t;
    g->class_hash_cap = cap;
    return 0;
}

int32_t gr_term(gr_cfg *g, const gr_class *c) {
    if (g->failed) return 0;
    uint32_t mask = g->class_hash_cap - 1, h = class_hash(c) & mask;
    for (; g->class_hash[h]; h = (h + 1) & mask) {
        uint32_t idx = g->class_hash[h] - 1;
        if (!memcmp(&g->classes[idx], c, sizeof *c)) return -(int32_t)idx - 1;
    }
    if (grow((void **)&g->classes, &g->cap_classes, g->n_classes + 1, sizeof *g->classes)) {
        g->failed = FAIL_MEMORY;
        return 0;
    }
    g->classes[g->n_classes] = *c;
    g->class_hash[h] = g->n_classes + 1;
    int32_t sym = -(int32_t)g->n_classes - 1;
    g->n_classes++;
    if (g->n_classes * 2 > g->class_hash_cap && class_rehash(g)) {
        g->failed = FAIL_MEMORY;
        return 0;
    }
    return sym;
}

int32_t gr_term_byte(gr_cfg *g, uint8_t b) { return gr_term_range(g, b, b); }

int32_t gr_term_range(gr_cfg *g, uint8_t lo, uint8_t hi) {
    gr_class c = {{0}};
    gr_class_set_range(&c, lo, hi);
    return gr_term(g, &c);
}

int gr_prod_add(gr_cfg *g, int32_t lhs, const int32_t *rhs, uint32_t n) {
    if (g->failed) return -1;
    if (lhs < 0) return -1;
    for (uint32_t i = 0; i < n; i++)
        if (rhs[i] == 0 || rhs[i] == -1) { /* a failed constructor's result */
            if (!g->failed) g->failed = FAIL_MEMORY;
            return -1;
        }
    if (g->n_prods >= g->max_rules || g->n_rhs + n + 1 > g->max_rules * 8u) {
        g->failed = FAIL_SIZE;
        return -1;
    }
    if ((g->n_prods & 255) == 0 && time_now() * 1000.0 > g->deadline_ms) {
        g->failed = FAIL_TIME;
        return -1;
    }
    if (grow((void **)&g->prods, &g->cap_prods, g->n_prods + 1, sizeof *g->prods) ||
        grow((void **)&g->rhs, &g->cap_rhs, g->n_rhs + n + 1, sizeof *g->rhs)) {
        g->failed = FAIL_MEMORY;
        return -1;
    }
    g->prods[g->n_prods++] = (gr_prod){.lhs = lhs, .rhs_start = g->n_rhs, .rhs_len = n};
    if (n) memcpy(g->rhs + g->n_rhs, rhs, n * sizeof *rhs);
    g->n_rhs += n;
    g->rhs[g->n_rhs++] = GR_END;
    return 0;
}

int32_t gr_literal(gr_cfg *g, const uint8_t *bytes, size_t len) {
    int32_t nt = gr_nt(g);
    if (nt < 0) return -1;
    int32_t buf[64] = {0};
    int32_t *syms = len <= 64 ? buf : malloc(len * sizeof *syms);
    if (!syms) {
        g->failed = FAIL_MEMORY;
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; i < len && !rc; i++) {
        syms[i] = gr_term_byte(g, bytes[i]);
        if (!syms[i]) rc = -1;
    }
    if (!rc) rc = gr_prod_add(g, nt, syms, (uint32_t)len);
    if (syms != buf) free(syms);
    return rc ? -1 : nt;
}

int32_t gr_star(gr_cfg *g, int32_t sym) {
    int32_t nt = gr_nt(g);
    if (nt < 0) return -1;
    int32_t loop[2] = {nt, sym};
    if (gr_prod_add(g, nt, NULL, 0) || gr_prod_add(g, nt, loop, 2)) return -1;
    return nt;
}

int32_t gr_plus(gr_cfg *g, int32_t sym) {
    int32_t nt = gr_nt(g);
    if (nt < 0) return -1;
    int32_t loop[2] = {nt, sym};
    if (gr_prod_add(g, nt, &sym, 1) || gr_prod_add(g, nt, loop, 2)) return -1;
    return nt;
}

int32_t gr_opt(gr_cfg *g, int32_t sym) {
    int32_t nt = gr_nt(g);
    if (nt < 0) return -1;
    if (gr_prod_add(g, nt, NULL, 0) || gr_prod_add(g, nt, &sym, 1)) return -1;
    return nt;
}

int32_t gr_repeat(gr_cfg *g, int32_t sym, uint32_t min, int64_t max) {
    if (max >= 0 && (int64_t)min > max) return gr_nt(g); /* no productions: matches nothing */
    /* left-linear counters, so the Earley items of the i-th copy all start where the repetition
     * does: exact[i] = sym{i}; exact[i] -> exact[i-1] sym */
    int64_t top = max >= 0 ? max : min;
    int32_t prev = gr_nt(g);
    if (prev < 0 || gr_prod_add(g, prev, NULL, 0)) return -1;
    int32_t out = gr_nt(g);
    if (out < 0) return -1;
    if (min == 0 && gr_prod_add(g, out, &prev, 1)) return -1;
    for (int64_t i = 1; i <= top; i++) {
        int32_t cur = gr_nt(g);
        int32_t pair[2] = {prev, sym};
        if (cur < 0 || gr_prod_add(g, cur, pair, 2)) return -1;
        if (i >= min && max >= 0 && gr_prod_add(g, out, &cur, 1)) return -1;
        prev = cur;
    }
    if (max < 0) { /* sym{min} sym* */
        int32_t pair[2] = {prev, gr_star(g, sym)};
        if (pair[1] < 0 || gr_prod_add(g, out, pair, 2)) return -1;
    }
    if (g->n_counted == g->cap_counted) {
        uint32_t cap = g->cap_counted ? g->cap_counted * 2 : 16;
        gr_counted *c = realloc(g->counted, cap * sizeof *c);
        if (!c) return -1;
        g->counted = c;
        g->cap_counted = cap;
    }
    g->counted[g->n_counted++] = (gr_counted){out, sym, min, max};
    return out;
}

int32_t gr_alt(gr_cfg *g, const int32_t *syms, uint32_t n) {
    int32_t nt = gr_nt(g);
    if (nt < 0) return -1;
    for (uint32_t i = 0; i < n; i++)
        if (gr_prod_add(g, nt, &syms[i], 1)) return -1;
    return nt;
}

int32_t gr_seq(gr_cfg *g, const int32_t *syms, uint32_t n) {
    int32_t nt = gr_nt(g);
    if (nt < 0 || gr_prod_add(g, nt, syms, n)) return -1;
    return nt;
}

static int cmp_prod(const void *a, const void *b) {
    const gr_prod *x = a, *y = b;
    if (x->lhs != y->lhs) return x->lhs < y->lhs ? -1 : 1;
    return x->rhs_start < y->rhs_start ? -1 : (x->rhs_start > y->rhs_start);
}

/* Which nonterminals derive something under a rule for terminals: flag[nt] = 1 when some
 * production of nt has only flagged nonterminals and, for nullable, no terminal at all (for
 * productive, no empty class). A worklist over the occurrences of each nonterminal in right-hand
 * sides, so a long chain (a counted repetition) costs its length, not its length squared.
 * Returns 0 or -1 (memory). */
static int derive_fixpoint(const gr_cfg *g, uint8_t *flag, int nullable) {
    uint32_t n_nts = g->n_nts, n_prods = g->n_prods;
    uint32_t *occ_first = calloc(n_nts + 1, sizeof *occ_first);
    uint32_t *missing = malloc((n_prods ? n_prods : 1) * sizeof *missing);
    int32_t *queue = malloc((n_nts ? n_nts : 1) * sizeof *queue);
    uint32_t *occ = NULL;
    int rc = -1;
    if (!occ_first || !missing || !queue) goto out;
    for (uint32_t p = 0; p < n_prods; p++)
        for (uint32_t i = 0; i < g->prods[p].rhs_len; i++) {
            int32_t s = g->rhs[g->prods[p].rhs_start + i];
            if (s >= 0) occ_first[s + 1]++;
        }
    for (uint32_t n = 0; n < n_nts; n++) occ_first[n + 1] += occ_first[n];
    occ = malloc((occ_first[n_nts] ? occ_first[n_nts] : 1) * sizeof *occ);
    if (!occ) goto out;
    uint32_t n_queue = 0;
    for (uint32_t p = 0; p < n_prods; p++) {
        const gr_prod *pr = &g->prods[p];
        uint32_t need = 0;
        for (uint32_t i = 0; i < pr->rhs_len; i++) {
            int32_t s = g->rhs[pr->rhs_start + i];
            if (s >= 0) need++;
            else if (nullable || s == -1) need = UINT32_MAX; /* can never derive under the rule */
            if (need == UINT32_MAX) break;
        }
        missing[p] = need; /* UINT32_MAX never counts down to 0 */
        for (uint32_t i = 0; i < pr->rhs_len; i++) {
            int32_t s = g->rhs[pr->rhs_start + i];
            if (s >= 0) occ[occ_first[s]++] = p;
        }
        if (!need && !flag[pr->lhs]) {
            flag[pr->lhs] = 1;
            queue[n_queue++] = pr->lhs;
        }
    }
    /* occ_first[n] now ends n's run: shift back to starts */
    for (uint32_t n = n_nts; n > 0; n--) occ_first[n] = occ_first[n - 1];
    occ_first[0] = 0;
    while (n_queue) {
        int32_t nt = queue[--n_queue];
        for (uint32_t j = occ_first[nt]; j < occ_first[nt + 1]; j++) {
            uint32_t p = occ[j];
            int32_t lhs = g->prods[p].lhs;
            if (--missing[p] == 0 && !flag[lhs]) {
                flag[lhs] = 1;
                queue[n_queue++] = lhs;
            }
        }
    }
    rc = 0;
out:
    free(occ_first);
    free(missing);
    free(queue);
    free(occ);
    return rc;
}

/* Drops every production that uses an unproductive nonterminal (one deriving no string) or the
 * empty class, so that every Earley item left can still reach a complete parse. */
static int drop_unproductive(gr_cfg *g) {
    uint8_t *productive = calloc(g->n_nts ? g->n_nts : 1, 1);
    if (!productive || derive_fixpoint(g, productive, 0)) {
        free(productive);
        return -1;
    }
    uint32_t kept = 0;
    for (uint32_t p = 0; p < g->n_prods; p++) {
        const gr_prod *pr = &g->prods[p];
        int ok = productive[pr->lhs];
        for (uint32_t i = 0; ok && i < pr->rhs_len; i++) {
            int32_t s = g->rhs[pr->rhs_start + i];
            if (s == -1 || (s >= 0 && !productive[s])) ok = 0;
        }
        if (ok) g->prods[kept++] = *pr;
    }
    g->n_prods = kept;
    free(productive);
    return 0;
}

int gr_cfg_finalize(gr_cfg *g, int32_t start) {
    g->start = start;
    int32_t aug = gr_nt(g);
    if (aug < 0 || gr_prod_add(g, aug, &start, 1)) return -1;
    g->aug_start = aug;
    g->aug_pos = g->prods[g->n_prods - 1].rhs_start;
    g->accept_pos = g->aug_pos + 1;
    if (drop_unproductive(g)) return -1;
    qsort(g->prods, g->n_prods, sizeof *g->prods, cmp_prod);
    g->pos_prod = calloc(g->n_rhs ? g->n_rhs : 1, sizeof *g->pos_prod);
    g->prod_first = calloc(g->n_nts + 1, sizeof *g->prod_first);
    g->nullable = calloc(g->n_nts ? g->n_nts : 1, 1);
    if (!g->pos_prod || !g->prod_first || !g->nullable) return -1;
    for (uint32_t p = 0; p < g->n_prods; p++) {
        const gr_prod *pr = &g->prods[p];
        for (uint32_t i = 0; i <= pr->rhs_len; i++) g->pos_prod[pr->rhs_start + i] = p;
        g->prod_first[pr->lhs + 1]++;
    }
    for (uint32_t n = 0; n < g->n_nts; n++) g->prod_first[n + 1] += g->prod_first[n];
    if (derive_fixpoint(g, g->nullable, 1)) return -1;
    return gr_cfg_lexify(g);
}

int gr_cfg_matches_nothing(const gr_cfg *g) { return g->prod_first[g->aug_start + 1] == g->prod_first[g->aug_start]; }
