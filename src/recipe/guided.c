/* guided.c - vLLM's structured-output request fields, accepted by every API (top level or through the
 * SDKs' extra_body), read into recipe_request.guided_*:
 *
 *   guided_json      a JSON Schema: an object, or a string holding one (vLLM accepts both)
 *   guided_regex     a regular expression (string)
 *   guided_choice    a non-empty array of strings
 *   guided_grammar   a grammar (string; GBNF)
 *   structured_outputs {json | regex | choice | grammar | json_object: true}, the same with the newer
 *                    vLLM spelling, plus disable_fallback (this server never falls back to unconstrained
 *                    decoding, so either value is honoured); any other member is a 400 naming it, never
 *                    ignored.
 *
 * At most one constraint may be given: two guided_* fields, or one with structured_outputs, is a 400
 * naming the second. Whether the constraint compiles (supported schema keywords, regex syntax, limits)
 * is decided by the server's grammar compiler, not here. The encoders re-emit the field as it came
 * (write_guided), so a request read and written again keeps its constraint. */
#include <stdio.h>
#include <string.h>

#include "recipe/recipe_internal.h"
#include "recipe/writer.h"

static const char *const guided_names[] = {"guided_json", "guided_regex", "guided_choice", "guided_grammar"};
static const recipe_guided guided_kinds[] = {RECIPE_GUIDED_JSON, RECIPE_GUIDED_REGEX, RECIPE_GUIDED_CHOICE,
                                             RECIPE_GUIDED_GRAMMAR};

/* A JSON Schema value: an object (its compact text) or a string that holds one object. */
static int schema_value(recipe_request *r, const rj *v, const char *field, recipe_error *err) {
    if (rj_is_object(v)) {
        r->guided_text = RAW(r, v);
    } else if (rj_is_string(v) && rj_text_is_object(rj_str(v), rj_strlen(v))) {
        r->guided_text = rj_str(v);
    } else {
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, field,
                           "'%s' must be a JSON Schema (an object, or a string holding one)", field);
    }
    if (!r->guided_text) return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
    return 0;
}

static int choice_value(recipe_request *r, const rj *v, const char *field, recipe_error *err) {
    size_t n = rj_size(v);
    if (!rj_is_array(v) || n == 0)
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, field, "'%s' must be a non-empty array of strings", field);
    const char **c = ra_alloc(&r->arena, n * sizeof *c);
    if (!c) return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (!rj_is_string(rj_at(v, i)))
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, field, "'%s[%zu]' must be a string", field, i);
        c[i] = rj_str(rj_at(v, i));
    }
    r->guided_choices = c;
    r->n_guided_choices = n;
    return 0;
}

/* Sets r->guided_* for one constraint of `kind` found at `field` (value v); 400 when one was set. */
static int set_guided(recipe_request *r, recipe_guided kind, const char *field, const rj *v, recipe_error *err) {
    if (r->guided_kind != RECIPE_GUIDED_NONE)
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, field,
                           "'%s' and '%s' both ask for structured output; give only one", r->guided_field, field);
    r->guided_kind = kind;
    r->guided_field = field;
    switch (kind) {
    case RECIPE_GUIDED_JSON: return schema_value(r, v, field, err);
    case RECIPE_GUIDED_CHOICE: return choice_value(r, v, field, err);
    case RECIPE_GUIDED_REGEX:
    case RECIPE_GUIDED_GRAMMAR:
        if (!rj_is_string(v) || rj_strlen(v) == 0)
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, field, "'%s' must be a non-empty string", field);
        r->guided_text = rj_str(v);
        return 0;
    case RECIPE_GUIDED_JSON_OBJECT:
        if (!rj_is_boolean(v))
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, field, "'%s' must be a boolean", field);
        if (!rj_is_true(v)) { /* json_object: false asks for nothing */
            r->guided_kind = RECIPE_GUIDED_NONE;
            r->guided_field = NULL;
        }
        return 0;
    default: return 0;
    }
}

/* structured_outputs: one constraint member, disable_fallback, nothing else. */
static int parse_structured(recipe_request *r, const rj *so, recipe_error *err) {
    static const struct {
        const char *key, *field;
        recipe_guided kind;
    } members[] = {
        {"json", "structured_outputs.json", RECIPE_GUIDED_JSON},
        {"regex", "structured_outputs.regex", RECIPE_GUIDED_REGEX},
        {"choice", "structured_outputs.choice", RECIPE_GUIDED_CHOICE},
        {"grammar", "structured_outputs.grammar", RECIPE_GUIDED_GRAMMAR},
        {"json_object", "structured_outputs.json_object", RECIPE_GUIDED_JSON_OBJECT},
    };
    if (!rj_is_object(so))
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "structured_outputs",
                           "'structured_outputs' must be an object");
    rj **items = rj_items(so);
    for (size_t i = 0; i < so->n; i++) {
        const rj *m = items[i];
        if (rj_is_null(m)) continue;
        size_t k = 0;
        while (k < sizeof members / sizeof *members && strcmp(m->key, members[k].key)) k++;
        if (k < sizeof members / sizeof *members) {
            if (set_guided(r, members[k].kind, members[k].field, m, err)) return -1;
        } else if (!strcmp(m->key, "disable_fallback")) {
            if (!rj_is_boolean(m))
                return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "structured_outputs.disable_fallback",
                                   "'structured_outputs.disable_fallback' must be a boolean");
        } else {
            char path[RECIPE_PATH];
            snprintf(path, sizeof path, "structured_outputs.%s", m->key);
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path,
                               "'%s' is not supported (this server takes json, regex, choice, grammar or json_object)",
                               path);
        }
    }
    return 0;
}

int parse_guided(recipe_request *r, rj *const *v, recipe_error *err) {
    for (int i = 0; i < 4; i++) {
        const rj *x = v[X_GUIDED_JSON + i];
        if (rj_is_absent(x)) continue;
        if (set_guided(r, guided_kinds[i], guided_names[i], x, err)) return -1;
        if (!(r->guided = RAW(r, x))) return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
    }
    const rj *so = v[X_STRUCTURED];
    if (rj_is_absent(so)) return 0;
    if (parse_structured(r, so, err)) return -1;
    if (r->guided_field && !strncmp(r->guided_field, "structured_outputs", 18) && !(r->guided = RAW(r, so)))
        return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
    return 0;
}

void write_guided(struct rw *w, const recipe_request *r) {
    if (r->guided_kind == RECIPE_GUIDED_NONE || !r->guided_field) return;
    if (!strncmp(r->guided_field, "structured_outputs", 18)) {
        if (r->guided) rw_kraw(w, "structured_outputs", r->guided);
        else if (r->guided_kind == RECIPE_GUIDED_JSON_OBJECT) { /* built by hand */ rw_kobj(w, "structured_outputs");
            rw_key(w, "json_object");
            rw_bool(w, true);
            rw_end(w);
        }
        return;
    }
    if (r->guided) rw_kraw(w, r->guided_field, r->guided);
}
