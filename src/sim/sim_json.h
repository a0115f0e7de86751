/* sim_json.h - field readers for the simulator's JSON files (hardware and
 * model profiles, cluster configs, price tables). Every error is one line
 * naming the file and the field: "<file>: <section>.<field>: <why>".
 * A numeric field is a number or {"value": number, "source": "..."}; with
 * `need_source` the object form with a non-empty source is required (the
 * profiles cite where every value comes from). Readers never keep a
 * reference to the JSON. */
#ifndef CINFER_SIM_SIM_JSON_H
#define CINFER_SIM_SIM_JSON_H

#include <jansson.h>
#include <stdbool.h>

#include "base/error.h"

typedef struct sim_jctx {
    const char *file, *section; /* for messages; section may be "" */
    bool need_source;
} sim_jctx;

/* Required number in [lo, hi]. */
int sim_jnum(const sim_jctx *c, json_t *obj, const char *field, double lo, double hi, double *out, cf_err *err);
/* Optional number (dflt when absent). */
int sim_jnum_opt(const sim_jctx *c, json_t *obj, const char *field, double lo, double hi, double dflt, double *out,
                 cf_err *err);
/* Integers (a number with no fraction) in [lo, hi]. */
int sim_jint(const sim_jctx *c, json_t *obj, const char *field, long lo, long hi, long *out, cf_err *err);
int sim_jint_opt(const sim_jctx *c, json_t *obj, const char *field, long lo, long hi, long dflt, long *out,
                 cf_err *err);
/* String into out[cap]; optional variant copies dflt when absent. */
int sim_jstr(const sim_jctx *c, json_t *obj, const char *field, char *out, size_t cap, cf_err *err);
int sim_jstr_opt(const sim_jctx *c, json_t *obj, const char *field, const char *dflt, char *out, size_t cap,
                 cf_err *err);
/* A sub-object (required / optional: NULL when absent). */
int sim_jobj(const sim_jctx *c, json_t *obj, const char *field, bool required, json_t **out, cf_err *err);
/* Fails when obj has a key not in known[] (a misspelt field is an error, not a silent default). */
int sim_jknown(const sim_jctx *c, json_t *obj, const char *const *known, cf_err *err);
/* Parses text as one JSON object; errors name the file, line and column. */
json_t *sim_jparse(const char *file, const char *text, size_t len, cf_err *err);
/* Reads a file (at most 4 MiB; caller frees), and reads and parses one. */
char *sim_jread(const char *path, size_t *len, cf_err *err);
json_t *sim_jload(const char *path, cf_err *err);

#endif
