/* json_types.c - the rules for one JSON type under its type-specific keywords: strings
 * (minLength/maxLength, pattern, format), integers (minimum/maximum/exclusive*, multipleOf),
 * numbers (the same where exact), arrays (prefixItems, items, minItems/maxItems) and objects
 * (properties in schema order, required, additionalProperties, min/maxProperties).
 * Combinations that a context-free grammar over this construction cannot express exactly (e.g.
 * length limits with a general pattern, a non-integer bound on a number) are errors naming the
 * keyword; length limits with a pattern that is one repeated character class are rewritten into a
 * bounded regex (json_pattern_len.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/timeutil.h"
#include "grammar/earley.h"
#include "grammar/json_schema.h"

static int get_count(js_ctx *c, const json_t *s, const char *k, int64_t *out) {
    const json_t *v = json_object_get(s, k);
    if (!v) return 0;
    double d = json_number_value(v);
    if (!json_is_number(v) || d < 0 || d != floor(d) || d > 1e9)
        return js_fail(c, k, "'%s' must be a non-negative integer", k);
    *out = (int64_t)d;
    return 1;
}

/* The rule for a JSON string whose content matches regex re (keyword kw names it in errors): one
 * nonterminal per distinct regex in a schema, so that a pattern repeated across properties is
 * compiled, and lexed into a DFA (lexeme.c), once. Returns the nonterminal or -1. */
static int32_t regex_string(js_ctx *c, const char *re, const char *kw) {
    for (uint32_t i = 0; i < c->n_pats; i++)
        if (!strcmp(c->pats[i].ptr, re)) return c->pats[i].nt;
    int32_t body = gr_regex_compile(c->g, re, strlen(re), GR_RX_JSON_STRING, c->limits.max_depth, c->err);
    if (body < 0) {
        c->failed = 1;
        if (c->err) snprintf(c->err->keyword, sizeof c->err->keyword, "%s", kw);
        return -1;
    }
    int32_t q = gr_term_byte(c->g, '"');
    int32_t syms[3] = {q, body, q};
    int32_t nt = gr_seq(c->g, syms, 3);
    if (nt < 0) return -1;
    if (c->n_pats == c->cap_pats) {
        uint32_t n = c->cap_pats ? c->cap_pats * 2 : 8;
        js_ref *p = realloc(c->pats, n * sizeof *p);
        if (!p) return js_fail(c, kw, "out of memory");
        c->pats = p;
        c->cap_pats = n;
    }
    char *dup = strdup(re);
    if (!dup) return js_fail(c, kw, "out of memory");
    c->pats[c->n_pats++] = (js_ref){dup, nt};
    return nt;
}

int32_t js_type_string(js_ctx *c, const json_t *s) {
    int64_t min = 0, max = -1;
    int has_min = get_count(c, s, "minLength", &min), has_max = get_count(c, s, "maxLength", &max);
    if (has_min < 0 || has_max < 0) return -1;
    const json_t *pat = json_object_get(s, "pattern"), *fmt = json_object_get(s, "format");
    if (fmt && (c->flags & CINFER_GRAMMAR_FORMAT_ANNOTATION)) fmt = NULL;
    const char *re = NULL;
    const char *kw = NULL;
    if (fmt) {
        if (!json_is_string(fmt)) return js_fail(c, "format", "'format' must be a string");
        re = js_format_regex(json_string_value(fmt));
        if (!re) return js_fail(c, "format", "unsupported format '%s'", json_string_value(fmt));
        kw = "format";
    }
    if (pat) {
        if (!json_is_string(pat)) return js_fail(c, "pattern", "'pattern' must be a string");
        if (re) return js_fail(c, "pattern", "'pattern' together with 'format' is not supported");
        re = json_string_value(pat);
        kw = "pattern";
    }
    if (!re) return has_min || has_max ? js_string_len(&c->r, (uint32_t)min, max) : js_string(&c->r);
    char *bounded = NULL;
    if (has_min || has_max) {
        int any = 0;
        if (pat && !fmt && !js_class_run_with_length(json_string_value(pat), min, max, &bounded, &any)) {
            if (any) return js_string_len(&c->r, (uint32_t)min, max);
            if (!bounded) return js_fail(c, "pattern", "out of memory");
            re = bounded;
        } else if (fmt) {
            return js_fail(c, has_min ? "minLength" : "maxLength",
                           "length limits together with 'format' are not supported");
        } else {
            return js_fail(c, has_min ? "minLength" : "maxLength",
                           "length limits together with 'pattern' are supported only for a pattern that is one "
                           "character class repeated (such as ^[a-z]+$)");
        }
    }
    int32_t nt = regex_string(c, re, kw);
    free(bounded);
    return nt;
}

/* The bound keyword i (0 minimum, 1 exclusiveMinimum, 2 maximum, 3 exclusiveMaximum) as a number,
 * with Draft 4's boolean exclusiveMinimum/exclusiveMaximum (a flag on minimum/maximum) mapped to
 * the Draft 6+ form. NULL when absent. */
static const json_t *bound(const json_t *s, int i) {
    static const char *const keys[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    const json_t *v = json_object_get(s, keys[i]);
    const json_t *flag = json_object_get(s, keys[i < 2 ? 1 : 3]);
    if (json_is_boolean(flag)) {
        if (i == 1 || i == 3) return json_is_true(flag) ? json_object_get(s, keys[i - 1]) : NULL;
        return json_is_true(flag) ? NULL : v;
    }
    return v;
}

/* Integer bounds from minimum/maximum/exclusive*: lo/hi, each present or not. */
static int int_bounds(js_ctx *c, const json_t *s, int *has_lo, int64_t *lo, int *has_hi, int64_t *hi) {
    static const char *const keys[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    *has_lo = *has_hi = 0;
    for (int i = 0; i < 4; i++) {
        const json_t *v = bound(s, i);
        if (!v) continue;
        if (!json_is_number(v)) return js_fail(c, keys[i], "'%s' must be a number", keys[i]);
        double d = json_number_value(v);
        if (fabs(d) > 9e18) return js_fail(c, keys[i], "'%s' out of the supported integer range", keys[i]);
        int64_t b = i == 0   ? (int64_t)ceil(d)
                    : i == 1 ? (int64_t)floor(d) + 1
                    : i == 2 ? (int64_t)floor(d)
                             : (int64_t)ceil(d) - 1;
        if (i < 2) {
            if (!*has_lo || b > *lo) *lo = b;
            *has_lo = 1;
        } else {
            if (!*has_hi || b < *hi) *hi = b;
            *has_hi = 1;
        }
    }
    return 0;
}

int32_t js_type_integer(js_ctx *c, const json_t *s) {
    int has_lo, has_hi;
    int64_t lo = 0, hi = 0;
    if (int_bounds(c, s, &has_lo, &lo, &has_hi, &hi)) return -1;
    const json_t *mo = json_object_get(s, "multipleOf");
    if (mo) {
        double k = json_number_value(mo);
        if (!json_is_number(mo) || k <= 0) return js_fail(c, "multipleOf", "'multipleOf' must be a positive number");
        if (k != floor(k) || k > 100000)
            return js_fail(c, "multipleOf", "'multipleOf' is supported for integers up to 100000 only");
        if (has_lo || has_hi) return js_fail(c, "multipleOf", "'multipleOf' together with bounds is not supported");
        return js_int_multiple(&c->r, (uint64_t)k);
    }
    return js_int_range(&c->r, has_lo, lo, has_hi, hi);
}

/* A bound on a number: present, integer value, inclusive or not. */
typedef struct num_bound {
    int has, incl;
    int64_t v;
} num_bound;

/* Magnitudes m = I.F (no sign, no exponent) with lo <= m <= hi under the bounds' inclusiveness,
 * added as productions of nt: I in [A, B] with any fraction, plus I == lo with a non-zero fraction
 * (exclusive lo), plus I == hi with a zero fraction (inclusive hi). lo.v >= 0. */
static int add_magnitudes(js_ctx *c, int32_t nt, num_bound lo, num_bound hi) {
    gr_cfg *g = c->g;
    static const char frac_any[] = "(\\.[0-9]+)?", frac_zero[] = "(\\.0+)?", frac_nonzero[] = "\\.[0-9]*[1-9][0-9]*";
    int64_t a = lo.incl ? lo.v : lo.v + 1;
    int have_range = !hi.has || a <= hi.v - 1;
    struct {
        int on;
        int64_t ilo, ihi;
        int ihas;
        const char *frac;
    } parts[3] = {
        {have_range, a, hi.has ? hi.v - 1 : 0, hi.has, frac_any},
        {!lo.incl && (!hi.has || lo.v < hi.v), lo.v, lo.v, 1, frac_nonzero},
        {hi.has && hi.incl && (lo.incl ? hi.v >= lo.v : hi.v > lo.v), hi.has ? hi.v : 0, hi.has ? hi.v : 0, 1,
         frac_zero},
    };
    for (int i = 0; i < 3; i++) {
        if (!parts[i].on) continue;
        int32_t ip = js_int_range(&c->r, 1, parts[i].ilo, parts[i].ihas, parts[i].ihi);
        int32_t fp = gr_regex_compile(g, parts[i].frac, strlen(parts[i].frac), GR_RX_RAW, 8, c->err);
        int32_t syms[2] = {ip, fp};
        if (ip < 0 || fp < 0 || gr_prod_add(g, nt, syms, 2)) return -1;
    }
    return 0;
}

int32_t js_type_number(js_ctx *c, const json_t *s) {
    if (json_object_get(s, "multipleOf")) return js_type_integer(c, s); /* integer k: only integers qualify */
    static const char *const keys[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    num_bound L = {0}, H = {0};
    for (int i = 0; i < 4; i++) {
        const json_t *v = bound(s, i);
        if (!v) continue;
        double d = json_number_value(v);
        if (!json_is_number(v) || d != floor(d) || fabs(d) > 1e15)
            return js_fail(c, keys[i], "'%s' on a number is supported for integer bounds only", keys[i]);
        num_bound b = {1, i == 0 || i == 2, (int64_t)d};
        num_bound *dst = i < 2 ? &L : &H;
        /* keep the tighter bound */
        int tighter = !dst->has || (i < 2 ? (b.v > dst->v || (b.v == dst->v && !b.incl))
                                          : (b.v < dst->v || (b.v == dst->v && !b.incl)));
        if (tighter) *dst = b;
    }
    if (!L.has && !H.has) return js_number(&c->r);
    /* bounded numbers are written without an exponent */
    int32_t nt = gr_nt(c->g);
    if (nt < 0) return -1;
    /* x >= 0 part: magnitudes in [max(L, 0), H] */
    if (!H.has || H.v > 0 || (H.v == 0 && H.incl)) {
        num_bound lo = L.has && L.v >= 0 ? L : (num_bound){1, 1, 0};
        if (add_magnitudes(c, nt, lo, H)) return js_fail(c, "minimum", "grammar limit");
    }
    /* x < 0 part: "-" magnitude m with m > 0, m in [-H, -L] (inclusiveness carried over) */
    if (!L.has || L.v < 0) {
        num_bound lo = {1, 0, 0}, hi = {0};
        if (H.has && -H.v > 0) lo = (num_bound){1, H.incl, -H.v};
        if (L.has) hi = (num_bound){1, L.incl, -L.v};
        int32_t mag = gr_nt(c->g);
        int32_t syms[2] = {gr_term_byte(c->g, '-'), mag};
        if (mag < 0 || add_magnitudes(c, mag, lo, hi) || gr_prod_add(c->g, nt, syms, 2))
            return js_fail(c, "maximum", "grammar limit");
    }
    return nt;
}

static int32_t sep_rule(js_ctx *c) {
    int32_t ws = js_ws(&c->r);
    int32_t syms[3] = {ws, gr_term_byte(c->g, ','), ws};
    return gr_seq(c->g, syms, 3);
}

static int32_t with_path(js_ctx *c, const json_t *sub, const char *seg, uint32_t depth) {
    size_t n = strlen(c->path);
    if (n + strlen(seg) + 2 < sizeof c->path) snprintf(c->path + n, sizeof c->path - n, "/%s", seg);
    int32_t nt = js_schema(c, sub, depth);
    c->path[n] = 0;
    return nt;
}

int32_t js_type_array(js_ctx *c, const json_t *s, uint32_t depth) {
    gr_cfg *g = c->g;
    int64_t min = 0, max = -1;
    if (get_count(c, s, "minItems", &min) < 0 || get_count(c, s, "maxItems", &max) < 0) return -1;
    const json_t *prefix = json_object_get(s, "prefixItems"), *items = json_object_get(s, "items");
    if (prefix && !json_is_array(prefix)) return js_fail(c, "prefixItems", "'prefixItems' must be an array");
    if (json_is_array(items)) { /* Draft 4-2019: items as an array is prefixItems, then additionalItems */
        if (prefix) return js_fail(c, "items", "'items' as an array together with 'prefixItems'");
        prefix = items;
        items = json_object_get(s, "additionalItems");
    }
    size_t np = prefix ? json_array_size(prefix) : 0;
    if (max >= 0 && (size_t)max < np) np = (size_t)max;
    int32_t sep = sep_rule(c), ws = js_ws(&c->r);
    /* tail: the items after the prefix, with the remaining count bounds */
    int32_t item = items ? with_path(c, items, "items", depth) : js_any(&c->r);
    if (item < 0) return js_fail(c, "items", "grammar limit");
    int64_t rmin = min > (int64_t)np ? min - (int64_t)np : 0, rmax = max < 0 ? -1 : max - (int64_t)np;
    int32_t tail;
    int32_t sep_item_syms[2] = {sep, item};
    int32_t sep_item = gr_seq(g, sep_item_syms, 2);
    if (np > 0) {
        tail = gr_repeat(g, sep_item, (uint32_t)rmin, rmax);
    } else { /* the first item has no comma */
        tail = gr_nt(g);
        if (rmin == 0 && gr_prod_add(g, tail, NULL, 0)) return js_fail(c, "items", "grammar limit");
        if (rmax != 0) {
            int32_t more = gr_repeat(g, sep_item, rmin > 0 ? (uint32_t)rmin - 1 : 0, rmax < 0 ? -1 : rmax - 1);
            int32_t syms[2] = {item, more};
            if (more < 0 || gr_prod_add(g, tail, syms, 2)) return js_fail(c, "items", "grammar limit");
        }
    }
    /* prefix chain, built from the back: E_k = (k >= min ? "" : nothing) | sep_k P_k E_{k+1} */
    int32_t next = tail;
    for (size_t k = np; k-- > 0;) {
        char seg[48];
        snprintf(seg, sizeof seg, "prefixItems/%zu", k);
        int32_t pk = with_path(c, json_array_get(prefix, k), seg, depth);
        int32_t e = gr_nt(g);
        if (pk < 0 || e < 0) return js_fail(c, "prefixItems", "grammar limit");
        if ((int64_t)k >= min && gr_prod_add(g, e, NULL, 0)) return -1;
        int32_t with_sep[3] = {sep, pk, next};
        if (gr_prod_add(g, e, k ? with_sep : with_sep + 1, k ? 3 : 2))
            return js_fail(c, "prefixItems", "grammar limit");
        next = e;
    }
    int32_t syms[5] = {gr_term_byte(g, '['), ws, next, ws, gr_term_byte(g, ']')};
    return gr_seq(g, syms, 5);
}

typedef struct obj_prop {
    const char *name;
    int32_t pair; /* "name" ws : ws value */
    int required;
} obj_prop;

static int32_t pair_rule(js_ctx *c, int32_t key, int32_t value) {
    int32_t ws = js_ws(&c->r);
    int32_t syms[5] = {key, ws, gr_term_byte(c->g, ':'), ws, value};
    return gr_seq(c->g, syms, 5);
}

static int is_required(const json_t *req, const char *name) {
    size_t i;
    json_t *v;
    json_array_foreach(req, i, v) if (json_is_string(v) && !strcmp(json_string_value(v), name)) return 1;
    return 0;
}

/* The property list: `properties` in order, then required names only `additionalProperties`
 * can supply. Returns the count, or -1. */
static int32_t prop_value(js_ctx *c, const json_t *sub, const json_t *pschema, const char *seg, uint32_t depth) {
    if (!pschema) return with_path(c, sub, seg, depth);
    json_t *both = json_pack("{s:[O,O]}", "allOf", (json_t *)sub, (json_t *)pschema);
    int32_t nt = both ? with_path(c, both, seg, depth) : js_fail(c, "patternProperties", "out of memory");
    json_decref(both);
    return nt;
}

/* pschema: the schema of a patternProperties pattern every declared name matches, or NULL. */
static int collect_props(js_ctx *c, const json_t *s, const json_t *additional, const json_t *pschema, obj_prop *out,
                         uint32_t depth) {
    const json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    if (props && !json_is_object(props)) return js_fail(c, "properties", "'properties' must be an object");
    if (req && !json_is_array(req)) return js_fail(c, "required", "'required' must be an array");
    int n = 0;
    const char *name;
    json_t *sub;
    if (props) json_object_foreach((json_t *)props, name, sub) {
            char seg[96];
            snprintf(seg, sizeof seg, "properties/%.80s", name);
            int32_t key = js_string_value(&c->r, name, strlen(name)), value = prop_value(c, sub, pschema, seg, depth);
            out[n] =
                (obj_prop){name, key < 0 || value < 0 ? -1 : pair_rule(c, key, value), req && is_required(req, name)};
            if (out[n++].pair < 0) return js_fail(c, "properties", "grammar limit");
        }
    size_t i;
    json_t *r;
    if (req) json_array_foreach((json_t *)req, i, r) {
            if (!json_is_string(r)) return js_fail(c, "required", "'required' entries must be strings");
            const char *rn = json_string_value(r);
            if (props && json_object_get(props, rn)) continue;
            int dup = 0;
            for (int j = 0; j < n; j++) dup |= !strcmp(out[j].name, rn);
            if (dup) continue;
            int32_t key = js_string_value(&c->r, rn, strlen(rn));
            int32_t value = with_path(c, additional ? additional : json_true(), "additionalProperties", depth);
            out[n] = (obj_prop){rn, key < 0 || value < 0 ? -1 : pair_rule(c, key, value), 1};
            if (out[n++].pair < 0) return js_fail(c, "required", "grammar limit");
        }
    return n;
}

/* The key rule of a pattern: a JSON string literal whose value the pattern matches (search). */
static int32_t pattern_key(gr_cfg *g, const char *pat, uint32_t depth, cinfer_grammar_error *err) {
    int32_t body = gr_regex_compile(g, pat, strlen(pat), GR_RX_JSON_STRING, depth, err);
    int32_t q = gr_term_byte(g, '"');
    int32_t syms[3] = {q, body, q};
    return body < 0 ? -1 : gr_seq(g, syms, 3);
}

/* 1 if pattern matches name, 0 if not, -1 on error. */
static int pattern_matches(js_ctx *c, const char *pat, const char *name) {
    cinfer_grammar_limits lim = c->limits;
    lim.max_compile_ms = c->g->deadline_ms - time_now() * 1000.0;
    if (lim.max_compile_ms < 1) return js_fail(c, "", "grammar compile time limit exceeded");
    gr_cfg *t = gr_cfg_new(&lim);
    json_t *js = json_string(name);
    char *text = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
    int32_t key = t ? pattern_key(t, pat, c->limits.max_depth, c->err) : -1;
    int ok = -1;
    gr_chart ch;
    if (key >= 0 && text && !gr_cfg_finalize(t, key)) {
        ok = 0;
        if (!gr_cfg_matches_nothing(t) && !gr_chart_init(&ch, t)) {
            ok = 1;
            for (const char *p = text; *p && ok; p++) ok = gr_chart_scan(&ch, (uint8_t)*p) == 1;
            ok = ok && gr_chart_accepting(&ch);
            gr_chart_free(&ch);
        }
    }
    if (ok < 0) js_fail(c, "patternProperties", "bad pattern");
    free(text);
    json_decref(js);
    gr_cfg_free(t);
    return ok;
}

static int is_universal_pattern(const char *p) {
    static const char *const all[] = {"", ".*", "^.*$", "^.*", ".*$", ".+", "^.+$", "^.+", ".+$", "^(.*)$", NULL};
    for (int i = 0; all[i]; i++)
        if (!strcmp(p, all[i])) return 1;
    return 0;
}

int32_t js_type_object(js_ctx *c, const json_t *s, uint32_t depth) {
    gr_cfg *g = c->g;
    int64_t minp = 0, maxp = -1;
    if (get_count(c, s, "minProperties", &minp) < 0 || get_count(c, s, "maxProperties", &maxp) < 0) return -1;
    const json_t *additional = json_object_get(s, "additionalProperties");
    const json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    size_t cap_props = (props ? json_object_size(props) : 0) + (json_is_array(req) ? json_array_size(req) : 0) + 2;
    obj_prop *list = calloc(cap_props, sizeof *list);
    const char **names = calloc(cap_props, sizeof *names);
    int32_t *st = NULL, out = -1;
    char *complement = NULL; /* the names a patternProperties pattern does not match, when typed */
    if (!list || !names) goto done;
    /* patternProperties (one pattern): either it matches every non-empty name (then it applies to
     * the declared properties too, and to every other name, whatever additionalProperties says),
     * or additionalProperties is false and it matches no declared name (then it types the only
     * other names allowed), or it is one repeated character class and nothing is declared (then
     * it types the names it matches and additionalProperties the others, json_pattern_len.c).
     * Anything else is refused. */
    const json_t *pp = json_object_get(s, "patternProperties");
    const char *pat = NULL;
    const json_t *pschema = NULL;
    int universal = 0;
    if (json_is_object(pp) && json_object_size(pp) == 1) {
        void *it = json_object_iter((json_t *)pp);
        pat = json_object_iter_key(it);
        pschema = json_object_iter_value(it);
        universal = is_universal_pattern(pat) || js_class_run_universal(pat);
        if (!universal && !json_is_false(additional)) {
            if (js_class_run_complement(pat, &complement)) {
                js_fail(c, "patternProperties",
                        "'patternProperties' is supported with 'additionalProperties': false, a pattern matching "
                        "every name, or a pattern that is one repeated character class");
                goto done;
            }
            if (!complement) goto done; /* out of memory */
            if (json_object_size(json_object_get(s, "properties")) || json_array_size(req)) {
                js_fail(c, "patternProperties",
                        "'patternProperties' with 'additionalProperties' is supported without declared properties");
                goto done;
            }
        }
    }
    int n = collect_props(c, s, universal ? pschema : additional, universal ? pschema : NULL, list, depth);
    if (n < 0) goto done;
    int32_t extra = -1;
    if (pat && !universal) {
        for (int i = 0; i < n; i++) {
            int m = pattern_matches(c, pat, list[i].name);
            if (m != 0) {
                if (m > 0) js_fail(c, "patternProperties", "pattern matches the declared property '%s'", list[i].name);
                goto done;
            }
        }
        int32_t key = pattern_key(g, pat, c->limits.max_depth, c->err);
        int32_t value = key < 0 ? -1 : with_path(c, pschema, "patternProperties", depth);
        extra = value < 0 ? -1 : pair_rule(c, key, value);
        if (extra >= 0 && complement) { /* or a name pat does not match, typed by additionalProperties */
            int32_t other = pattern_key(g, complement, c->limits.max_depth, c->err);
            int32_t ovalue = other < 0    ? -1
                             : additional ? with_path(c, additional, "additionalProperties", depth)
                                          : js_any(&c->r);
            int32_t opair = ovalue < 0 ? -1 : pair_rule(c, other, ovalue);
            int32_t alt = opair < 0 ? -1 : gr_nt(g);
            if (alt < 0 || gr_prod_add(g, alt, &extra, 1) || gr_prod_add(g, alt, &opair, 1)) extra = -1;
            else extra = alt;
        }
        if (extra < 0) {
            if (!c->failed) js_fail(c, "patternProperties", "bad pattern");
            c->failed = 1;
            goto done;
        }
    } else if (pat) { /* universal: every other non-empty name, typed by the pattern's schema */
        for (int i = 0; i < n; i++) names[i] = list[i].name;
        names[n] = "";
        int32_t key = js_string_except(&c->r, names, (uint32_t)n + 1);
        int32_t value = with_path(c, pschema, "patternProperties", depth);
        extra = key < 0 || value < 0 ? -1 : pair_rule(c, key, value);
        if (extra < 0) {
            js_fail(c, "patternProperties", "grammar limit");
            goto done;
        }
    } else if (!json_is_false(additional)) {
        for (int i = 0; i < n; i++) names[i] = list[i].name;
        int32_t key = js_string_except(&c->r, names, (uint32_t)n);
        int32_t value = additional ? with_path(c, additional, "additionalProperties", depth) : js_any(&c->r);
        extra = key < 0 || value < 0 ? -1 : pair_rule(c, key, value);
        if (extra < 0) {
            js_fail(c, "additionalProperties", "grammar limit");
            goto done;
        }
    }
    int64_t cap = maxp >= 0 ? maxp : minp;
    if (cap < 1) cap = 1;
    if ((int64_t)(n + 1) * (cap + 1) > (int64_t)g->max_rules) {
        js_fail(c, "maxProperties", "object too large for the grammar size limit");
        goto done;
    }
    size_t width = (size_t)cap + 1;
    st = malloc((size_t)(n + 1) * width * sizeof *st); /* st[i * width + k]: props i.. with k emitted */
    if (!st) goto done;
    for (size_t i = 0; i < (size_t)(n + 1) * width; i++)
        if ((st[i] = gr_nt(g)) < 0) goto limit;
    int32_t sep = sep_rule(c);
    for (int64_t k = 0; k <= cap; k++) {
        int64_t k1 = k + 1 > cap ? cap : k + 1;
        int can_add = maxp < 0 || k < maxp;
        for (int i = 0; i < n; i++) {
            int32_t here = st[i * width + k], skip = st[(i + 1) * width + k], next = st[(i + 1) * width + k1];
            if (!list[i].required && gr_prod_add(g, here, &skip, 1)) goto limit;
            int32_t syms[3] = {sep, list[i].pair, next};
            if (can_add && gr_prod_add(g, here, k ? syms : syms + 1, k ? 3 : 2)) goto limit;
        }
        int32_t a = st[n * width + k], a1 = st[n * width + k1];
        if (k >= minp && gr_prod_add(g, a, NULL, 0)) goto limit;
        int32_t syms[3] = {sep, extra, a1};
        if (extra >= 0 && can_add && gr_prod_add(g, a, k ? syms : syms + 1, k ? 3 : 2)) goto limit;
    }
    int32_t ws = js_ws(&c->r);
    int32_t obj[5] = {gr_term_byte(g, '{'), ws, st[0], ws, gr_term_byte(g, '}')};
    out = gr_seq(g, obj, 5);
    if (out < 0) goto limit;
    goto done;
limit:
    out = js_fail(c, "properties", "grammar limit");
done:
    if (out < 0 && !c->failed) js_fail(c, "properties", "out of memory");
    free(complement);
    free(st);
    free(list);
    free(names);
    return out;
}
