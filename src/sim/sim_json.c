/* sim_json.c - see sim_json.h. */
#include "sim/sim_json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include "base/log.h"

static const char *dot(const sim_jctx *c) { return c->section[0] ? "." : ""; }

static int bad(const sim_jctx *c, const char *field, cf_err *err, const char *why) {
    return cf_fail(err, "%s: %s%s%s: %s", c->file, c->section, dot(c), field, why);
}

static int get_value(const sim_jctx *c, json_t *obj, const char *field, json_t **out, cf_err *err) {
    json_t *v = json_object_get(obj, field);
    *out = NULL;
    if (!v) return 0;
    if (json_is_object(v)) {
        json_t *src = json_object_get(v, "source");
        if (!json_is_string(src) || !json_string_length(src))
            return bad(c, field, err, "needs \"source\" (where the value comes from) next to \"value\"");
        v = json_object_get(v, "value");
        if (!v) return bad(c, field, err, "has no \"value\"");
    } else if (c->need_source) {
        return bad(c, field, err,
                   "must be {\"value\": ..., \"source\": \"...\"} (every profile value cites its source)");
    }
    *out = v;
    return 0;
}

int sim_jnum_opt(const sim_jctx *c, json_t *obj, const char *field, double lo, double hi, double dflt, double *out,
                 cf_err *err) {
    json_t *v;
    if (get_value(c, obj, field, &v, err)) return -1;
    if (!v) {
        *out = dflt;
        return 0;
    }
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    if (!json_is_number(v) || !isfinite(x) || x < lo || x > hi) {
        char why[160];
        snprintf(why, sizeof why, "must be a number in [%g, %g]", lo, hi);
        return bad(c, field, err, why);
    }
    *out = x;
    return 0;
}

int sim_jnum(const sim_jctx *c, json_t *obj, const char *field, double lo, double hi, double *out, cf_err *err) {
    if (!json_object_get(obj, field)) return bad(c, field, err, "missing");
    return sim_jnum_opt(c, obj, field, lo, hi, 0, out, err);
}

int sim_jint_opt(const sim_jctx *c, json_t *obj, const char *field, long lo, long hi, long dflt, long *out,
                 cf_err *err) {
    double x = 0;
    if (sim_jnum_opt(c, obj, field, (double)lo, (double)hi, (double)dflt, &x, err)) return -1;
    if (x != floor(x)) return bad(c, field, err, "must be a whole number");
    *out = (long)x;
    return 0;
}

int sim_jint(const sim_jctx *c, json_t *obj, const char *field, long lo, long hi, long *out, cf_err *err) {
    if (!json_object_get(obj, field)) return bad(c, field, err, "missing");
    return sim_jint_opt(c, obj, field, lo, hi, 0, out, err);
}

int sim_jstr_opt(const sim_jctx *c, json_t *obj, const char *field, const char *dflt, char *out, size_t cap,
                 cf_err *err) {
    json_t *v = json_object_get(obj, field);
    const char *s = dflt;
    if (v) {
        if (!json_is_string(v)) return bad(c, field, err, "must be a string");
        s = json_string_value(v);
        if (strlen(s) == 0 || strlen(s) >= cap || strlen(s) != json_string_length(v))
            return bad(c, field, err, "must be a non-empty string without NUL bytes, shorter than its limit");
    }
    snprintf(out, cap, "%s", s ? s : "");
    return 0;
}

int sim_jstr(const sim_jctx *c, json_t *obj, const char *field, char *out, size_t cap, cf_err *err) {
    if (!json_object_get(obj, field)) return bad(c, field, err, "missing");
    return sim_jstr_opt(c, obj, field, "", out, cap, err);
}

int sim_jobj(const sim_jctx *c, json_t *obj, const char *field, bool required, json_t **out, cf_err *err) {
    json_t *v = json_object_get(obj, field);
    *out = NULL;
    if (!v) return required ? bad(c, field, err, "missing") : 0;
    if (!json_is_object(v)) return bad(c, field, err, "must be an object");
    *out = v;
    return 0;
}

int sim_jknown(const sim_jctx *c, json_t *obj, const char *const *known, cf_err *err) {
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) {
        bool ok = false;
        for (size_t i = 0; known[i] && !ok; i++) ok = !strcmp(k, known[i]);
        if (!ok) {
            char shown[64];
            size_t j = 0;
            for (const char *p = k; *p && j < sizeof shown - 1; p++) shown[j++] = (*p >= 32 && *p < 127) ? *p : '?';
            shown[j] = 0;
            return bad(c, shown, err, "unknown field");
        }
    }
    return 0;
}

json_t *sim_jparse(const char *file, const char *text, size_t len, cf_err *err) {
    json_error_t je;
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!j) {
        char why[2 * JSON_ERROR_TEXT_LENGTH]; /* jansson quotes the input near the error: escaped, one line */
        cf_fail(err, "%s: line %d column %d: %s", file, je.line, je.column,
                cf_log_escape_str(why, sizeof why, je.text));
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        cf_fail(err, "%s: must be a JSON object", file);
        return NULL;
    }
    return j;
}

char *sim_jread(const char *path, size_t *len, cf_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        cf_fail(err, "%s: cannot open", path);
        return NULL;
    }
    static const size_t max = 4u << 20;
    char *buf = malloc(max);
    size_t n = buf ? fread(buf, 1, max, f) : 0;
    int more = buf && n == max && fgetc(f) != EOF;
    fclose(f);
    if (!buf || more) {
        cf_fail(err, buf ? "%s: larger than 4 MiB" : "%s: out of memory", path);
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

json_t *sim_jload(const char *path, cf_err *err) {
    size_t n;
    char *buf = sim_jread(path, &n, err);
    if (!buf) return NULL;
    json_t *j = sim_jparse(path, buf, n, err);
    free(buf);
    return j;
}
