/* spec_opts.c - see spec_opts.h. */
#include "serve/spec_opts.h"

#include <jansson.h>
#include <string.h>

static int spec_bad(serve_error *err, const char *msg) { return serve_bad(err, "cinfer.speculative", "%s", msg); }

static int spec_obj(const json_t *s, cinfer_speculative *out, serve_error *err) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v) {
        if (!strcmp(key, "drafter")) {
            int32_t d = json_is_string(v) ? cinfer_spec_drafter_parse(json_string_value(v)) : -1;
            if (d < 0)
                return spec_bad(
                    err, "'cinfer.speculative.drafter' must be \"ngram\", \"draft\", \"mtp\", \"dspark\", \"off\" or "
                         "\"default\"");
            out->drafter = d;
        } else if (!strcmp(key, "k")) {
            if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > CINFER_SPEC_MAX_K)
                return spec_bad(err, "'cinfer.speculative.k' must be an integer from 1 to 16");
            out->k = (int32_t)json_integer_value(v);
        } else if (!strcmp(key, "off")) {
            if (!json_is_boolean(v)) return spec_bad(err, "'cinfer.speculative.off' must be a boolean");
            if (json_is_true(v)) out->drafter = CINFER_SPEC_OFF;
        } else return spec_bad(err, "unknown field in 'cinfer.speculative' (drafter, k, off)");
    }
    return 0;
}

int spec_opts_parse(const char *cinfer_json, cinfer_speculative *out, serve_error *err) {
    memset(out, 0, sizeof *out);
    if (!cinfer_json) return 0;
    json_t *c = json_loads(cinfer_json, 0, NULL);
    if (!c) return serve_bad(err, "cinfer", "'cinfer' is not valid JSON");
    int rc = 0;
    const json_t *s = json_is_object(c) ? json_object_get(c, "speculative") : NULL;
    if (!s || json_is_null(s)) rc = 0;
    else if (json_is_boolean(s)) out->drafter = json_is_true(s) ? CINFER_SPEC_NGRAM : CINFER_SPEC_OFF;
    else if (json_is_string(s)) {
        int32_t d = cinfer_spec_drafter_parse(json_string_value(s));
        rc = d < 0 ? spec_bad(err, "'cinfer.speculative' must be an object, a boolean or a drafter name") : 0;
        if (d >= 0) out->drafter = d;
    } else if (json_is_object(s)) rc = spec_obj(s, out, err);
    else rc = spec_bad(err, "'cinfer.speculative' must be an object, a boolean or a drafter name");
    json_decref(c);
    return rc;
}
