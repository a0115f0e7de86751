/* json_schema.c - JSON Schema (Draft 2020-12 subset) to CFG: keyword checking, boolean schemas,
 * $ref (local JSON pointers, memoized so recursion becomes recursive rules), allOf (by merging
 * keyword sets where that is exact), anyOf (a union), oneOf (a union where the branches are
 * provably disjoint), enum/const (literals, each checked against the sibling keywords by a
 * throw-away compile) and the type dispatch (json_types.c).
 * Every keyword is either compiled, known to be an annotation, or an error naming it: nothing is
 * silently ignored. */
#include "grammar/json_schema.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timeutil.h"
#include "grammar/earley.h"

void js_ctx_release(js_ctx *c) {
    for (uint32_t i = 0; i < c->n_refs; i++) free(c->refs[i].ptr);
    for (uint32_t i = 0; i < c->n_pats; i++) free(c->pats[i].ptr);
    free(c->refs);
    free(c->pats);
    c->refs = c->pats = NULL;
    c->n_refs = c->cap_refs = c->n_pats = c->cap_pats = 0;
}

int32_t js_fail(js_ctx *c, const char *keyword, const char *fmt, ...) {
    if (c->failed) return -1;
    c->failed = 1;
    if (c->g->failed) return gr_limit_fail(c->g, c->err);
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return gr_fail(c->err, keyword, -1, "%s at %s", msg, c->path[0] ? c->path : "/");
}

static const char *const annotations[] = {"$schema",          "$comment",    "title",       "description",
                                          "default",          "examples",    "deprecated",  "readOnly",
                                          "writeOnly",        "$defs",       "definitions", "contentEncoding",
                                          "contentMediaType", "$vocabulary", NULL};
static const char *const supported[] = {"type",
                                        "enum",
                                        "const",
                                        "properties",
                                        "required",
                                        "additionalProperties",
                                        "items",
                                        "prefixItems",
                                        "minItems",
                                        "maxItems",
                                        "uniqueItems",
                                        "minLength",
                                        "maxLength",
                                        "pattern",
                                        "format",
                                        "minimum",
                                        "maximum",
                                        "exclusiveMinimum",
                                        "exclusiveMaximum",
                                        "multipleOf",
                                        "minProperties",
                                        "maxProperties",
                                        "anyOf",
                                        "allOf",
                                        "oneOf",
                                        "$ref",
                                        "patternProperties",
                                        "$id",
                                        "additionalItems",
                                        NULL};

static int in_list(const char *const *list, const char *k) {
    for (; *list; list++)
        if (!strcmp(*list, k)) return 1;
    return 0;
}

/* Keywords of JSON Schema (Draft 4 to 2020-12) that constrain instances and are not compiled:
 * always an error. A keyword in none of the lists is not JSON Schema vocabulary (e.g. "x-..."
 * extensions): the specification says to ignore it, and so does the compiler. */
static const char *const unsupported[] = {"not",
                                          "if",
                                          "then",
                                          "else",
                                          "dependentRequired",
                                          "dependentSchemas",
                                          "dependencies",
                                          "contains",
                                          "minContains",
                                          "maxContains",
                                          "propertyNames",
                                          "unevaluatedProperties",
                                          "unevaluatedItems",
                                          "$dynamicRef",
                                          "$dynamicAnchor",
                                          "$recursiveRef",
                                          "$recursiveAnchor",
                                          "$anchor",
                                          "contentSchema",
                                          "disallow",
                                          "extends",
                                          "divisibleBy",
                                          NULL};

static int32_t check_keywords(js_ctx *c, const json_t *s, int is_root) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)s, k, v) {
        if (in_list(annotations, k)) continue;
        if (in_list(unsupported, k)) return js_fail(c, k, "unsupported keyword '%s'", k);
        if (!in_list(supported, k)) continue; /* not JSON Schema vocabulary: ignored, as the spec says */
        if (!strcmp(k, "uniqueItems") && json_is_true(v)) return js_fail(c, k, "unsupported keyword 'uniqueItems'");
        if (!strcmp(k, "patternProperties") && (!json_is_object(v) || json_object_size(v) > 1))
            return js_fail(c, k, "unsupported keyword 'patternProperties' (more than one pattern)");
        if (!strcmp(k, "$id") && !is_root) return js_fail(c, k, "unsupported keyword '$id' in a subschema");
    }
    return 0;
}

/* Decodes one JSON pointer token (~0 ~1 and %XX) into out. */
static void pointer_token(const char *s, size_t n, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        char ch = s[i];
        if (ch == '~' && i + 1 < n) ch = s[++i] == '1' ? '/' : '~';
        else if (ch == '%' && i + 2 < n) {
            unsigned x;
            if (sscanf(s + i + 1, "%2x", &x) == 1) ch = (char)x, i += 2;
        }
        out[o++] = ch;
    }
    out[o] = 0;
}

static const json_t *resolve_pointer(const json_t *root, const char *ptr) {
    const json_t *cur = root;
    const char *p = ptr;
    char tok[256];
    while (*p == '/') {
        p++;
        size_t n = strcspn(p, "/");
        pointer_token(p, n, tok, sizeof tok);
        p += n;
        if (json_is_object(cur)) cur = json_object_get(cur, tok);
        else if (json_is_array(cur)) {
            char *end;
            unsigned long i = strtoul(tok, &end, 10);
            cur = *tok && !*end ? json_array_get(cur, i) : NULL;
        } else cur = NULL;
        if (!cur) return NULL;
    }
    return *p ? NULL : cur;
}

static int32_t compile_ref(js_ctx *c, const char *ref, uint32_t depth) {
    if (ref[0] != '#') return js_fail(c, "$ref", "unsupported $ref '%s' (only local '#...' references)", ref);
    for (uint32_t i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ptr, ref)) return c->refs[i].nt;
    const json_t *target = resolve_pointer(c->root, ref + 1);
    if (!target) return js_fail(c, "$ref", "unresolvable $ref '%s'", ref);
    if (c->n_refs == c->cap_refs) {
        uint32_t n = c->cap_refs ? c->cap_refs * 2 : 16;
        js_ref *p = realloc(c->refs, n * sizeof *p);
        if (!p) return js_fail(c, "$ref", "out of memory");
        c->refs = p;
        c->cap_refs = n;
    }
    int32_t nt = gr_nt(c->g);
    char *dup = strdup(ref);
    if (nt < 0 || !dup) {
        free(dup);
        return js_fail(c, "$ref", "grammar limit");
    }
    c->refs[c->n_refs++] = (js_ref){dup, nt};
    char saved[sizeof c->path];
    memcpy(saved, c->path, sizeof saved);
    snprintf(c->path, sizeof c->path, "%s", ref + 1);
    int32_t body = js_schema(c, target, depth);
    memcpy(c->path, saved, sizeof saved);
    if (body < 0 || gr_prod_add(c->g, nt, &body, 1)) return js_fail(c, "$ref", "grammar limit");
    return nt;
}

/* A keyword both schemas have: merge where the intersection is itself a keyword value. */
static int merge_keyword(json_t *acc, const char *k, json_t *a, json_t *b) {
    if (json_equal(a, b)) return 0;
    if (!strcmp(k, "required") && json_is_array(a) && json_is_array(b)) {
        json_t *u = json_deep_copy(a);
        size_t i;
        json_t *x;
        json_array_foreach(b, i, x) json_array_append(u, x);
        return json_object_set_new(acc, k, u);
    }
    if (!strcmp(k, "properties") && json_is_object(a) && json_is_object(b)) {
        json_t *u = json_deep_copy(a);
        const char *name;
        json_t *sb;
        json_object_foreach(b, name, sb) {
            json_t *sa = json_object_get(u, name);
            if (!sa) json_object_set(u, name, sb);
            else json_object_set_new(u, name, json_pack("{s:[O,O]}", "allOf", sa, sb));
        }
        return json_object_set_new(acc, k, u);
    }
    double x = json_number_value(a), y = json_number_value(b);
    if (json_is_number(a) && json_is_number(b)) {
        if (!strcmp(k, "minimum") || !strcmp(k, "exclusiveMinimum") || !strcmp(k, "minLength") ||
            !strcmp(k, "minItems") || !strcmp(k, "minProperties"))
            return json_object_set(acc, k, x > y ? a : b);
        if (!strcmp(k, "maximum") || !strcmp(k, "exclusiveMaximum") || !strcmp(k, "maxLength") ||
            !strcmp(k, "maxItems") || !strcmp(k, "maxProperties"))
            return json_object_set(acc, k, x < y ? a : b);
    }
    if (!strcmp(k, "allOf") && json_is_array(a) && json_is_array(b)) {
        json_t *u = json_deep_copy(a);
        json_array_extend(u, b);
        return json_object_set_new(acc, k, u);
    }
    if (in_list(annotations, k)) return 0;
    return -1;
}

static const json_t *deref_pure(js_ctx *c, const json_t *s, uint32_t hops) {
    while (json_is_object(s) && json_object_size(s) == 1 && json_is_string(json_object_get(s, "$ref")) && hops--) {
        const char *ref = json_string_value(json_object_get(s, "$ref"));
        if (ref[0] != '#') return s;
        const json_t *t = resolve_pointer(c->root, ref + 1);
        if (!t) return s;
        s = t;
    }
    return s;
}

/* additionalProperties (items) in a merge changes meaning unless both sides list the same
 * properties (prefixItems). */
static int merge_changes_additional(const json_t *a, const json_t *b) {
    const json_t *ia = json_object_get(a, "items"), *ib = json_object_get(b, "items");
    const json_t *xa = json_object_get(a, "prefixItems"), *xb = json_object_get(b, "prefixItems");
    if ((ia && xb && !json_equal(xa, xb)) || (ib && xa && !json_equal(xa, xb))) return 1;
    int aa = json_object_get(a, "additionalProperties") != NULL,
        ba = json_object_get(b, "additionalProperties") != NULL;
    if (!aa && !ba) return 0;
    json_t *pa = json_object_get(a, "properties"), *pb = json_object_get(b, "properties");
    const char *k;
    json_t *v;
    if (aa && pb) json_object_foreach(pb, k, v) if (!pa || !json_object_get(pa, k)) return 1;
    if (ba && pa) json_object_foreach(pa, k, v) if (!pb || !json_object_get(pb, k)) return 1;
    return 0;
}

/* acc := acc AND part. Returns 0; 1 if part is `false` (empty intersection); -1 with the keyword
 * that cannot be intersected exactly in *bad. */
static int merge_into(js_ctx *c, json_t *acc, const json_t *part, const char **bad) {
    part = deref_pure(c, part, 16);
    if (json_is_true(part)) return 0;
    if (json_is_false(part)) return 1; /* the intersection is empty */
    if (!json_is_object(part)) {
        *bad = "allOf";
        return -1;
    }
    if (merge_changes_additional(acc, part)) {
        *bad = "additionalProperties";
        return -1;
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)part, k, v) {
        json_t *old = json_object_get(acc, k);
        if (!old) {
            json_object_set(acc, k, v);
            continue;
        }
        if (merge_keyword(acc, k, old, v)) {
            *bad = k;
            return -1;
        }
    }
    return 0;
}

static int32_t compile_all_of(js_ctx *c, const json_t *s, uint32_t depth) {
    json_t *acc = json_deep_copy(s);
    const json_t *all = json_object_get(s, "allOf");
    json_object_del(acc, "allOf");
    const char *bad = NULL;
    if (all && !json_is_array(all)) bad = "allOf";
    size_t i;
    json_t *part;
    int empty = 0;
    if (all) json_array_foreach(all, i, part) {
            int rc = bad ? -1 : merge_into(c, acc, part, &bad);
            if (rc == 1) empty = 1;
            if (rc < 0) break;
        }
    if (empty && !bad) {
        json_decref(acc);
        return gr_nt(c->g); /* no productions: matches nothing */
    }
    const json_t *ref = json_object_get(acc, "$ref");
    if (!bad && ref) { /* $ref with siblings: the target AND the siblings */
        json_t *r = json_incref((json_t *)ref);
        json_object_del(acc, "$ref");
        json_t *wrapper = json_pack("{s:O}", "$ref", r);
        int rc = merge_into(c, acc, wrapper, &bad);
        if (rc == 1) empty = 1;
        else if (rc == 0 && json_object_get(acc, "$ref")) bad = "$ref";
        json_decref(wrapper);
        json_decref(r);
    }
    int32_t nt = bad     ? js_fail(c, bad, "cannot intersect '%s' in allOf/$ref siblings", bad)
                 : empty ? gr_nt(c->g)
                         : js_schema(c, acc, depth);
    json_decref(acc);
    return nt;
}

/* The JSON types a schema can produce, as a bit set (1 null, 2 boolean, 4 integer, 8 non-integer
 * number, 16 string, 32 array, 64 object); 127 when unknown. */
static unsigned type_bits_of_value(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_NULL: return 1;
    case JSON_TRUE:
    case JSON_FALSE: return 2;
    case JSON_INTEGER: return 4;
    case JSON_REAL: return 8;
    case JSON_STRING: return 16;
    case JSON_ARRAY: return 32;
    default: return 64;
    }
}

static unsigned type_bits(js_ctx *c, const json_t *s) {
    s = deref_pure(c, s, 16);
    if (json_is_false(s)) return 0;
    if (!json_is_object(s)) return 127;
    const json_t *cv = json_object_get(s, "const"), *ev = json_object_get(s, "enum"), *t = json_object_get(s, "type");
    if (cv) return type_bits_of_value(cv);
    if (json_is_array(ev)) {
        unsigned b = 0;
        size_t i;
        json_t *x;
        json_array_foreach(ev, i, x) b |= type_bits_of_value(x);
        return b;
    }
    static const char *const names[] = {"null", "boolean", "integer", "number", "string", "array", "object"};
    static const unsigned bits[] = {1, 2, 4, 12, 16, 32, 64};
    if (!t) return 127;
    unsigned b = 0;
    for (size_t n = 0; n < (json_is_array(t) ? json_array_size(t) : 1); n++) {
        const json_t *x = json_is_array(t) ? json_array_get(t, n) : t;
        for (int i = 0; i < 7; i++)
            if (json_is_string(x) && !strcmp(json_string_value(x), names[i])) b |= bits[i];
    }
    return b;
}

/* The values a property schema allows when it is a const or an enum, as a JSON array (new
 * reference), or NULL. */
static json_t *literal_values(js_ctx *c, const json_t *prop) {
    prop = deref_pure(c, prop, 16);
    const json_t *cv = json_object_get(prop, "const"), *ev = json_object_get(prop, "enum");
    if (cv) return json_pack("[O]", cv);
    if (json_is_array(ev)) return json_incref((json_t *)ev);
    return NULL;
}

static int values_disjoint(const json_t *a, const json_t *b) {
    size_t i, j;
    json_t *x, *y;
    json_array_foreach(a, i, x) json_array_foreach(b, j, y) if (json_equal(x, y)) return 0;
    return 1;
}

/* Two object schemas that both require a property whose const/enum values are disjoint. */
static int discriminated(js_ctx *c, const json_t *a, const json_t *b) {
    a = deref_pure(c, a, 16);
    b = deref_pure(c, b, 16);
    const json_t *pa = json_object_get(a, "properties"), *pb = json_object_get(b, "properties");
    const json_t *ra = json_object_get(a, "required"), *rb = json_object_get(b, "required");
    if (!json_is_object(pa) || !json_is_object(pb) || !json_is_array(ra) || !json_is_array(rb)) return 0;
    size_t i;
    json_t *name;
    json_array_foreach(ra, i, name) {
        if (!json_is_string(name)) continue;
        const char *n = json_string_value(name);
        int in_b = 0;
        size_t j;
        json_t *nb;
        json_array_foreach(rb, j, nb) in_b |= json_is_string(nb) && !strcmp(json_string_value(nb), n);
        if (!in_b) continue;
        json_t *va = literal_values(c, json_object_get(pa, n)), *vb = literal_values(c, json_object_get(pb, n));
        int disjoint = va && vb && values_disjoint(va, vb);
        json_decref(va);
        json_decref(vb);
        if (disjoint) return 1;
    }
    return 0;
}

/* Object schema a requires a property that object schema b forbids (additionalProperties false,
 * no patternProperties, the name not among b's properties). */
static int required_forbidden(js_ctx *c, const json_t *a, const json_t *b) {
    a = deref_pure(c, a, 16);
    b = deref_pure(c, b, 16);
    const json_t *ra = json_object_get(a, "required"), *pb = json_object_get(b, "properties");
    if (!json_is_array(ra) || !json_is_false(json_object_get(b, "additionalProperties")) ||
        json_object_get(b, "patternProperties") || (pb && !json_is_object(pb)))
        return 0;
    size_t i;
    json_t *name;
    json_array_foreach(ra, i, name) if (json_is_string(name) && !json_object_get(pb, json_string_value(name))) return 1;
    return 0;
}

/* anyOf / oneOf: each branch merged with the siblings, as alternatives. */
static int32_t compile_union(js_ctx *c, const json_t *s, const char *kw, uint32_t depth) {
    const json_t *branches = json_object_get(s, kw);
    if (!json_is_array(branches) || !json_array_size(branches))
        return js_fail(c, kw, "'%s' must be a non-empty array", kw);
    json_t *rest = json_deep_copy(s);
    json_object_del(rest, kw);
    int32_t nt = gr_nt(c->g);
    size_t n = json_array_size(branches);
    if (!strcmp(kw, "oneOf"))
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++) {
                const json_t *a = json_array_get(branches, i), *b = json_array_get(branches, j);
                /* the types both branches and the siblings allow; object keywords separate the
                 * branches only when objects are all of them */
                unsigned shared = type_bits(c, a) & type_bits(c, b) & type_bits(c, rest);
                int by_object = shared == 64 &&
                                (discriminated(c, a, b) || required_forbidden(c, a, b) || required_forbidden(c, b, a));
                if (shared && !by_object) {
                    json_decref(rest);
                    return js_fail(c, "oneOf",
                                   "oneOf branches %zu and %zu may overlap (only disjoint oneOf is supported)", i, j);
                }
            }
    for (size_t i = 0; i < n && nt >= 0; i++) {
        json_t *branch = json_deep_copy(rest);
        const char *bad = NULL;
        int rc = merge_into(c, branch, json_array_get(branches, i), &bad);
        if (rc == 1) { /* a false branch adds nothing */
            json_decref(branch);
            continue;
        }
        int32_t alt = rc ? js_fail(c, bad, "cannot intersect '%s' with the %s branch's siblings", bad, kw)
                         : js_schema(c, branch, depth);
        json_decref(branch);
        if (alt < 0 || gr_prod_add(c->g, nt, &alt, 1)) nt = js_fail(c, kw, "grammar limit");
    }
    json_decref(rest);
    return nt;
}

static int only_annotations(const json_t *s) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)s, k, v) if (in_list(supported, k) && strcmp(k, "$id")) return 0;
    return 1;
}

/* 1 if the literal serialization of v is accepted by the schema `rest`, 0 if not, -1 on error. */
static int literal_valid(js_ctx *c, const json_t *rest, const json_t *v, uint32_t depth) {
    if (only_annotations(rest)) return 1;
    js_ctx t = {.root = c->root, .flags = c->flags, .limits = c->limits, .err = c->err};
    memcpy(t.path, c->path, sizeof t.path);
    t.limits.max_compile_ms = c->g->deadline_ms - time_now() * 1000.0; /* what is left of the outer budget */
    if (t.limits.max_compile_ms < 1) return js_fail(c, "", "grammar compile time limit exceeded");
    t.g = gr_cfg_new(&t.limits);
    if (!t.g) return js_fail(c, "enum", "out of memory");
    js_rules_init(&t.r, t.g, 1);
    int32_t nt = js_schema(&t, rest, depth);
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    int ok = -1;
    gr_chart ch;
    if (nt >= 0 && text && !gr_cfg_finalize(t.g, nt) && !gr_cfg_matches_nothing(t.g) && !gr_chart_init(&ch, t.g)) {
        ok = 1;
        for (const char *p = text; *p && ok == 1; p++)
            if (gr_chart_scan(&ch, (uint8_t)*p) != 1) ok = 0;
        if (ok == 1) ok = gr_chart_accepting(&ch);
        gr_chart_free(&ch);
    } else if (nt >= 0 && text) {
        ok = 0; /* the rest matches nothing */
    }
    free(text);
    js_ctx_release(&t);
    gr_cfg_free(t.g);
    if (ok < 0) c->failed = 1; /* t filled err */
    return ok;
}

static int32_t compile_enum(js_ctx *c, const json_t *s, uint32_t depth) {
    const json_t *cv = json_object_get(s, "const"), *ev = json_object_get(s, "enum");
    if (ev && !json_is_array(ev)) return js_fail(c, "enum", "'enum' must be an array");
    json_t *rest = json_deep_copy(s);
    json_object_del(rest, "const");
    json_object_del(rest, "enum");
    int32_t nt = gr_nt(c->g);
    size_t n = cv ? 1 : json_array_size(ev);
    for (size_t i = 0; i < n && nt >= 0; i++) {
        const json_t *v = cv ? cv : json_array_get(ev, i);
        if (cv && ev) { /* const and enum: v must also be one of enum's values */
            int found = 0;
            size_t j;
            json_t *e;
            json_array_foreach(ev, j, e) found |= json_equal(e, v);
            if (!found) continue;
        }
        int ok = literal_valid(c, rest, v, depth);
        if (ok < 0) nt = -1;
        if (ok <= 0) continue;
        int32_t lit = js_value_literal(&c->r, v);
        if (lit < 0 || gr_prod_add(c->g, nt, &lit, 1)) nt = js_fail(c, cv ? "const" : "enum", "grammar limit");
    }
    json_decref(rest);
    return nt;
}

static int32_t compile_types(js_ctx *c, const json_t *s, uint32_t depth) {
    const json_t *t = json_object_get(s, "type");
    unsigned want = 0;
    static const char *const names[] = {"null", "boolean", "integer", "number", "string", "array", "object"};
    if (!t) want = 127;
    for (size_t n = 0; t && n < (json_is_array(t) ? json_array_size(t) : 1); n++) {
        const json_t *x = json_is_array(t) ? json_array_get(t, n) : t;
        int found = 0;
        for (int i = 0; i < 7; i++)
            if (json_is_string(x) && !strcmp(json_string_value(x), names[i])) want |= 1u << i, found = 1;
        if (!found) return js_fail(c, "type", "unknown type in 'type'");
    }
    if (want & 8) want &= ~4u; /* number covers integer */
    int32_t nt = gr_nt(c->g);
    for (int i = 0; i < 7 && nt >= 0; i++) {
        if (!(want & (1u << i))) continue;
        int32_t alt;
        switch (i) {
        case 0: alt = js_lit(&c->r, "null"); break;
        case 1: {
            int32_t tf[2] = {js_lit(&c->r, "true"), js_lit(&c->r, "false")};
            alt = gr_alt(c->g, tf, 2);
            break;
        }
        case 2: alt = js_type_integer(c, s); break;
        case 3: alt = js_type_number(c, s); break;
        case 4: alt = js_type_string(c, s); break;
        case 5: alt = js_type_array(c, s, depth); break;
        default: alt = js_type_object(c, s, depth); break;
        }
        if (alt < 0 || gr_prod_add(c->g, nt, &alt, 1)) nt = js_fail(c, "type", "grammar limit");
    }
    return nt;
}

static int has_ref_siblings(const json_t *s) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)s, k, v) if (strcmp(k, "$ref") && strcmp(k, "$id") && in_list(supported, k)) return 1;
    return 0;
}

int32_t js_schema(js_ctx *c, const json_t *s, uint32_t depth) {
    if (c->failed) return -1;
    if (depth == 0) return js_fail(c, "", "schema nesting deeper than the depth limit");
    depth--;
    if (json_is_true(s)) return js_any(&c->r) < 0 ? js_fail(c, "", "grammar limit") : c->r.any;
    if (json_is_false(s)) {
        int32_t nt = gr_nt(c->g); /* no productions: matches nothing */
        return nt < 0 ? js_fail(c, "", "grammar limit") : nt;
    }
    if (!json_is_object(s)) return js_fail(c, "", "a schema must be an object or a boolean");
    if (check_keywords(c, s, s == c->root)) return -1;
    const json_t *ref = json_object_get(s, "$ref");
    if (ref && !json_is_string(ref)) return js_fail(c, "$ref", "'$ref' must be a string");
    if (json_object_get(s, "allOf") || (ref && has_ref_siblings(s))) return compile_all_of(c, s, depth);
    if (ref) return compile_ref(c, json_string_value(ref), depth);
    if (json_object_get(s, "anyOf")) return compile_union(c, s, "anyOf", depth);
    if (json_object_get(s, "oneOf")) return compile_union(c, s, "oneOf", depth);
    if (json_object_get(s, "enum") || json_object_get(s, "const")) return compile_enum(c, s, depth);
    return compile_types(c, s, depth);
}

int32_t gr_json_schema_compile(gr_cfg *g, const char *text, size_t len, uint32_t flags, uint32_t depth,
                               cinfer_grammar_error *err) {
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_DECODE_ANY, &jerr);
    if (!root)
        return gr_fail(err, "", jerr.position, "schema is not valid JSON: %s (offset %d)", jerr.text, jerr.position);
    js_ctx c = {.g = g, .root = root, .flags = flags, .err = err};
    c.limits = (cinfer_grammar_limits){.max_rules = g->max_rules, .max_depth = depth, .max_spec_size = 1u << 30};
    c.limits.max_compile_ms = 2000; /* a nested check compile; the outer deadline still applies below */
    js_rules_init(&c.r, g, (flags & CINFER_GRAMMAR_JSON_COMPACT) != 0);
    int32_t nt = js_schema(&c, root, depth);
    if (nt >= 0) { /* optional (bounded) whitespace around the value, as tokenizers often lead with a space */
        int32_t ws = js_ws(&c.r);
        int32_t syms[3] = {ws, nt, ws};
        nt = ws < 0 ? -1 : gr_seq(g, syms, 3);
    }
    js_ctx_release(&c);
    json_decref(root);
    return nt;
}

int32_t gr_choice_compile(gr_cfg *g, const char *text, size_t len, cinfer_grammar_error *err) {
    json_error_t jerr;
    json_t *arr = json_loadb(text, len, JSON_DECODE_ANY, &jerr);
    if (!json_is_array(arr) || !json_array_size(arr)) {
        json_decref(arr);
        return gr_fail(err, "", arr ? -1 : jerr.position, "choice list must be a non-empty JSON array of strings");
    }
    int32_t nt = gr_nt(g);
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if (!json_is_string(v)) {
            nt = gr_fail(err, "", -1, "choice %zu is not a string", i);
            break;
        }
        int32_t lit = gr_literal(g, (const uint8_t *)json_string_value(v), json_string_length(v));
        if (lit < 0 || gr_prod_add(g, nt, &lit, 1)) {
            nt = gr_limit_fail(g, err);
            break;
        }
    }
    json_decref(arr);
    return nt;
}
