/* grammar.c - cinfer_grammar_compile and the grammar's refcount: resolves the limits, checks
 * the spec size, dispatches to the front end of the spec kind, and finalizes the CFG. */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"

int gr_limit_fail(const gr_cfg *g, cinfer_grammar_error *err) {
    const char *why = gr_cfg_failure(g);
    if (!strcmp(why, "size"))
        return gr_fail(err, "", -1, "grammar too large: more than %u rules (compile size limit)", g->max_rules);
    if (!strcmp(why, "time")) return gr_fail(err, "", -1, "grammar compile time limit exceeded");
    return gr_fail(err, "", -1, "out of memory while compiling the grammar");
}

static int32_t json_object_start(gr_cfg *g, cinfer_grammar_error *err) {
    static const char schema[] = "{\"type\":\"object\"}";
    return gr_json_schema_compile(g, schema, sizeof schema - 1, 0, 8, err);
}

cinfer_grammar *cinfer_grammar_compile(const cinfer_grammar_spec *spec, const cinfer_grammar_limits *limits,
                                       cinfer_grammar_error *err) {
    if (err) memset(err, 0, sizeof *err), err->position = -1;
    if (!spec) return gr_fail(err, "", -1, "no grammar spec"), NULL;
    cinfer_grammar_limits lim = gr_limits_resolve(limits);
    if (spec->kind != CINFER_GRAMMAR_JSON_OBJECT && !spec->text)
        return gr_fail(err, "", -1, "grammar spec has no text"), NULL;
    if (spec->len > lim.max_spec_size)
        return gr_fail(err, "", -1, "grammar spec too large: %zu bytes (limit %u)", spec->len, lim.max_spec_size), NULL;
    gr_cfg *g = gr_cfg_new(&lim);
    if (!g) return gr_fail(err, "", -1, "out of memory"), NULL;
    int32_t start = -1;
    switch (spec->kind) {
    case CINFER_GRAMMAR_JSON_SCHEMA:
        start = gr_json_schema_compile(g, spec->text, spec->len, spec->flags, lim.max_depth, err);
        break;
    case CINFER_GRAMMAR_JSON_OBJECT: start = json_object_start(g, err); break;
    case CINFER_GRAMMAR_REGEX: start = gr_regex_compile(g, spec->text, spec->len, GR_RX_RAW, lim.max_depth, err); break;
    case CINFER_GRAMMAR_GBNF: start = gr_gbnf_compile(g, spec->text, spec->len, lim.max_depth, err); break;
    case CINFER_GRAMMAR_CHOICE: start = gr_choice_compile(g, spec->text, spec->len, err); break;
    default: gr_fail(err, "", -1, "unknown grammar kind %d", (int)spec->kind);
    }
    if (start < 0) {
        if (g->failed) gr_limit_fail(g, err);
        gr_cfg_free(g);
        return NULL;
    }
    if (gr_cfg_finalize(g, start)) {
        gr_limit_fail(g, err);
        gr_cfg_free(g);
        return NULL;
    }
    if (gr_cfg_matches_nothing(g)) {
        gr_cfg_free(g);
        return gr_fail(err, "", -1, "the grammar matches no output at all"), NULL;
    }
    gr_chart first; /* the start set must fit the matching limit, or no matcher could begin */
    if (gr_chart_init(&first, g)) {
        gr_cfg_free(g);
        return gr_fail(err, "", -1,
                       "grammar too ambiguous: its start needs more than %u Earley items (matching limit; or out of "
                       "memory)",
                       lim.max_set_items),
               NULL;
    }
    gr_chart_free(&first);
    cinfer_grammar *out = calloc(1, sizeof *out);
    if (!out) {
        gr_cfg_free(g);
        return gr_fail(err, "", -1, "out of memory"), NULL;
    }
    atomic_init(&out->refs, 1);
    atomic_init(&out->limit_hit, 0);
    out->cfg = g;
    if (pthread_mutex_init(&out->caches_mu, NULL)) {
        gr_cfg_free(g);
        free(out);
        return gr_fail(err, "", -1, "out of resources"), NULL;
    }
    return out;
}

cinfer_grammar *cinfer_grammar_retain(cinfer_grammar *g) {
    if (g) atomic_fetch_add(&g->refs, 1);
    return g;
}

void cinfer_grammar_release(cinfer_grammar *g) {
    if (!g || atomic_fetch_sub(&g->refs, 1) != 1) return;
    for (uint32_t i = 0; i < g->n_caches; i++) gr_mask_cache_free(g->caches[i]);
    pthread_mutex_destroy(&g->caches_mu);
    gr_cfg_free(g->cfg);
    free(g);
}

size_t cinfer_grammar_size(const cinfer_grammar *g) { return g ? g->cfg->n_prods : 0; }

/* Up to 256 MiB of cached masks per (grammar, vocabulary). */
#define GR_MASK_CACHE_BYTES ((size_t)256 << 20)

gr_mask_cache *gr_grammar_mask_cache(cinfer_grammar *g, const cinfer_grammar_vocab *v) {
    gr_mask_cache *out = NULL;
    pthread_mutex_lock(&g->caches_mu);
    for (uint32_t i = 0; i < g->n_caches && !out; i++)
        if (gr_mask_cache_vocab(g->caches[i]) == v->content_hash) out = g->caches[i];
    if (!out && g->n_caches < GR_MAX_MASK_CACHES && (out = gr_mask_cache_new(v->content_hash, GR_MASK_CACHE_BYTES)))
        g->caches[g->n_caches++] = out;
    pthread_mutex_unlock(&g->caches_mu);
    return out;
}
