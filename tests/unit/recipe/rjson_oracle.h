/* rjson_oracle.h - jansson as the oracle for the recipe JSON reader (src/recipe/rjson.c),
 * shared by test_rjson.c and fuzz_rjson.c: the reader must accept exactly the
 * object/array texts json_loads (flags 0) accepts, build the same value, and
 * give raw text that parses back to the same value. Header-only (two users). */
#ifndef CINFER_TEST_RJSON_ORACLE_H
#define CINFER_TEST_RJSON_ORACLE_H

#include <jansson.h>
#include <string.h>

#include "recipe/recipe_internal.h"
#include "recipe/rjson.h"

/* rj tree -> jansson value (new reference; NULL on a bug) */
static json_t *rj_to_jansson(const rj *v) {
    switch (v->type) {
    case RJ_NULL: return json_null();
    case RJ_TRUE: return json_true();
    case RJ_FALSE: return json_false();
    case RJ_INT: return json_integer(v->u.i);
    case RJ_REAL: return json_real(v->u.d);
    case RJ_STRING:
        if (strlen(v->u.s) != v->n) return NULL; /* no NUL inside */
        return json_stringn(v->u.s, v->n);
    case RJ_ARRAY: {
        json_t *a = json_array();
        for (size_t i = 0; i < rj_size(v); i++) json_array_append_new(a, rj_to_jansson(rj_at(v, i)));
        return a;
    }
    case RJ_OBJECT: {
        json_t *o = json_object();
        rj **items = rj_items(v);
        for (size_t i = 0; i < v->n; i++) {
            json_t *m = rj_to_jansson(items[i]);
            if (!m || !items[i]->key || json_object_setn_new(o, items[i]->key, items[i]->klen, m)) {
                json_decref(o);
                return NULL;
            }
        }
        return o;
    }
    }
    return NULL;
}

/* 0 when rj agrees with jansson on text[0..len); else a short reason.
 * One known jansson quirk is excluded: its reader uses NUL as a buffer sentinel, so a
 * NUL byte right after a number or literal is skipped and the text accepted. A NUL is
 * invalid anywhere in JSON text (RFC 8259), and rj must reject any text containing one. */
static const char *rjson_check(const char *text, size_t len) {
    recipe_arena a = {0};
    char why[96];
    rj *got = rj_parse(&a, text, len, why, sizeof why);
    if (memchr(text, 0, len)) {
        bool ok = !got && !rj_text_is_object(text, len);
        ra_free(&a);
        return ok ? NULL : "rj accepted text with a NUL byte";
    }
    json_t *want = json_loadb(text, len, 0, NULL);
    const char *bad = NULL;
    if (!want != !got) bad = want ? "rj rejected what jansson accepts" : "rj accepted what jansson rejects";
    else if (got) {
        json_t *g = rj_to_jansson(got);
        if (!json_equal(g, want)) bad = "different value";
        const char *raw = rj_raw(&a, got);
        json_t *back = raw ? json_loads(raw, 0, NULL) : NULL;
        if (!json_equal(back, want)) bad = "raw text differs";
        if (raw && strpbrk(raw, "\n\r\t") && !bad) {
            /* raw is compact: whitespace may only appear inside strings, escaped */
            bad = "raw text has unescaped whitespace";
        }
        if (rj_text_is_object(text, len) != json_is_object(want)) bad = "rj_text_is_object disagrees";
        json_decref(back);
        json_decref(g);
    } else if (rj_text_is_object(text, len)) bad = "rj_text_is_object accepted invalid text";
    json_decref(want);
    ra_free(&a);
    return bad;
}

#endif
