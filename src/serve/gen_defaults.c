/* gen_defaults.c - reading, applying and showing the model's sampling defaults
 * (see gen_defaults.h). Keys: general.sampling.temp, .top_p, .top_k, .min_p,
 * .penalty_repeat (llama.cpp's names). */
#include "serve/gen_defaults.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct def_key {
    const char *key, *field; /* GGUF key, OpenAI field */
    unsigned bit;
    double lo, hi; /* allowed range */
    bool lo_open; /* lo itself not allowed */
} def_key;

static const def_key KEYS[] = {
    {"general.sampling.temp", "temperature", GEN_DEF_TEMPERATURE, 0, 1e6, false},
    {"general.sampling.top_p", "top_p", GEN_DEF_TOP_P, 0, 1, true},
    {"general.sampling.top_k", "top_k", GEN_DEF_TOP_K, 0, 1e9, false},
    {"general.sampling.min_p", "min_p", GEN_DEF_MIN_P, 0, 1, false},
    {"general.sampling.penalty_repeat", "repetition_penalty", GEN_DEF_REPETITION_PENALTY, 0, 1e6, true},
};
#define N_KEYS (sizeof KEYS / sizeof KEYS[0])

static double field_value(const gen_defaults *d, unsigned bit) {
    switch (bit) {
    case GEN_DEF_TEMPERATURE: return d->temperature;
    case GEN_DEF_TOP_P: return d->top_p;
    case GEN_DEF_TOP_K: return d->top_k;
    case GEN_DEF_MIN_P: return d->min_p;
    default: return d->repetition_penalty;
    }
}

static void set_field(gen_defaults *d, unsigned bit, double v) {
    switch (bit) {
    case GEN_DEF_TEMPERATURE: d->temperature = (float)v; break;
    case GEN_DEF_TOP_P: d->top_p = (float)v; break;
    case GEN_DEF_TOP_K: d->top_k = (int32_t)v; break;
    case GEN_DEF_MIN_P: d->min_p = (float)v; break;
    default: d->repetition_penalty = (float)v; break;
    }
    d->set |= bit;
}

int gen_defaults_read(const gguf_file *f, gen_defaults *d, cf_err *err) {
    *d = (gen_defaults){0};
    for (size_t i = 0; i < N_KEYS; i++) {
        const def_key *k = &KEYS[i];
        double v;
        int64_t iv;
        int rc = k->bit == GEN_DEF_TOP_K ? gguf_get_int(f, k->key, &iv, err) : gguf_get_float(f, k->key, &v, err);
        if (rc < 0) return -1;
        if (rc > 0) continue;
        if (k->bit == GEN_DEF_TOP_K) v = (double)iv;
        if (!isfinite(v) || v < k->lo || v > k->hi || (k->lo_open && v == k->lo))
            return cf_fail(err, "%s: %s = %g is out of range for %s", gguf_path(f), k->key, v, k->field);
        set_field(d, k->bit, v);
    }
    return 0;
}

void gen_defaults_apply(const gen_defaults *d, cinfer_sampling *s) {
    if (d->set & GEN_DEF_TEMPERATURE) s->temperature = d->temperature;
    if (d->set & GEN_DEF_TOP_P) s->top_p = d->top_p;
    if (d->set & GEN_DEF_TOP_K) s->top_k = d->top_k;
    if (d->set & GEN_DEF_MIN_P) s->min_p = d->min_p;
    if (d->set & GEN_DEF_REPETITION_PENALTY) s->repetition_penalty = d->repetition_penalty;
}

json_t *gen_defaults_json(const gen_defaults *d) {
    json_t *o = json_object();
    for (size_t i = 0; o && i < N_KEYS; i++) {
        if (!(d->set & KEYS[i].bit)) continue;
        double v = field_value(d, KEYS[i].bit);
        char shortest[32]; /* the float as written (0.6, not 0.60000002) */
        snprintf(shortest, sizeof shortest, "%.7g", v);
        json_t *jv = KEYS[i].bit == GEN_DEF_TOP_K ? json_integer((json_int_t)v) : json_real(strtod(shortest, NULL));
        if (json_object_set_new(o, KEYS[i].field, jv)) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

json_t *gen_defaults_model_fields(const gen_defaults *d) {
    json_t *j = gen_defaults_json(d);
    return j ? json_pack("{s:o}", "sampling_defaults", j) : NULL;
}

void gen_defaults_describe(const gen_defaults *d, char *buf, size_t cap) {
    size_t k = 0;
    buf[0] = 0;
    for (size_t i = 0; i < N_KEYS && k < cap; i++) {
        if (!(d->set & KEYS[i].bit)) continue;
        int w = snprintf(buf + k, cap - k, "%s%s=%g", k ? " " : "", KEYS[i].field, field_value(d, KEYS[i].bit));
        if (w < 0) break;
        k += (size_t)w;
    }
    if (!d->set) snprintf(buf, cap, "none");
}
