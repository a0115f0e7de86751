/* trace.c - see trace.h. Lines are parsed with jansson; the hit bound uses an
 * open-addressing set of 64-bit chain keys (key_i = mix(key_{i-1}, id_i)),
 * so block i can only hit when its whole prefix was seen. */
#include "benchserve/trace.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "benchserve/textgen.h"

static int get_num(json_t *o, const char *k, double *v) {
    json_t *x = json_object_get(o, k);
    if (!json_is_number(x)) return -1;
    *v = json_number_value(x);
    return *v < 0 ? -1 : 0;
}

static int parse_line(const char *line, size_t lineno, bs_trace *t, size_t *pool_n, size_t *pool_cap, cf_err *err) {
    json_error_t je;
    json_t *o = json_loads(line, 0, &je);
    if (!json_is_object(o)) {
        json_decref(o);
        char why[2 * JSON_ERROR_TEXT_LENGTH]; /* jansson quotes the input near the error: escaped */
        return cf_fail(err, "line %zu: not a JSON object (%s)", lineno, cf_log_escape_str(why, sizeof why, je.text));
    }
    bs_trace_req r = {0};
    double in = 0, out = 0;
    json_t *ids = json_object_get(o, "hash_ids");
    int rc = 0;
    if (get_num(o, "timestamp", &r.t_ms) || get_num(o, "input_length", &in) || get_num(o, "output_length", &out) ||
        !json_is_array(ids))
        rc = cf_fail(err, "line %zu: needs timestamp, input_length, output_length (numbers >= 0) and hash_ids", lineno);
    size_t n = rc ? 0 : json_array_size(ids);
    if (!rc && (in < 1 || in > (double)n * BS_TRACE_BLOCK || in <= (double)(n - 1) * BS_TRACE_BLOCK))
        rc = cf_fail(err, "line %zu: input_length %.0f does not fit %zu blocks of %d tokens", lineno, in, n,
                     BS_TRACE_BLOCK);
    if (!rc && t->n && r.t_ms < t->reqs[t->n - 1].t_ms)
        rc = cf_fail(err, "line %zu: timestamp goes back in time", lineno);
    if (!rc && *pool_n + n > *pool_cap) {
        size_t cap = *pool_cap ? *pool_cap : 1024;
        while (cap < *pool_n + n) cap *= 2;
        uint64_t *p = realloc(t->pool, cap * sizeof *p);
        if (!p) rc = cf_fail(err, "out of memory");
        else t->pool = p, *pool_cap = cap;
    }
    for (size_t i = 0; !rc && i < n; i++) {
        json_t *x = json_array_get(ids, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0) {
            rc = cf_fail(err, "line %zu: hash_ids[%zu] is not an integer >= 0", lineno, i);
            break;
        }
        t->pool[*pool_n + i] = (uint64_t)json_integer_value(x);
    }
    json_decref(o);
    if (rc) return rc;
    r.input_len = (long)in;
    r.output_len = (long)out;
    r.n_hash = n;
    r.hash = (const uint64_t *)(uintptr_t)*pool_n; /* an offset until the pool stops moving */
    *pool_n += n;
    bs_trace_req *q = realloc(t->reqs, (t->n + 1) * sizeof *q);
    if (!q) return cf_fail(err, "out of memory");
    t->reqs = q;
    t->reqs[t->n++] = r;
    return 0;
}

int bs_trace_read(FILE *f, const char *name, size_t max_requests, bs_trace *out, cf_err *err) {
    *out = (bs_trace){0};
    char *line = NULL;
    size_t cap = 0, lineno = 0, pool_n = 0, pool_cap = 0;
    ssize_t len;
    int rc = 0;
    while ((max_requests == 0 || out->n < max_requests) && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (len == 0 || line[strspn(line, " \t\r\n")] == 0) continue;
        if ((rc = parse_line(line, lineno, out, &pool_n, &pool_cap, err))) break;
    }
    free(line);
    if (!rc && out->n == 0) rc = cf_fail(err, "no requests");
    if (rc) {
        cf_prefix(err, "%s", name);
        bs_trace_free(out);
        return -1;
    }
    for (size_t i = 0; i < out->n; i++) out->reqs[i].hash = out->pool + (uintptr_t)out->reqs[i].hash;
    return 0;
}

int bs_trace_load(const char *path, size_t max_requests, bs_trace *out, cf_err *err) {
    *out = (bs_trace){0};
    FILE *f = fopen(path, "r");
    if (!f) return cf_fail(err, "%s: cannot open", path);
    int rc = bs_trace_read(f, path, max_requests, out, err);
    fclose(f);
    return rc;
}

void bs_trace_free(bs_trace *t) {
    free(t->reqs);
    free(t->pool);
    *t = (bs_trace){0};
}

long bs_trace_scaled_input(const bs_trace_req *r, long block) {
    long n = (long)r->n_hash;
    long v = (long)(((long long)r->input_len * block + BS_TRACE_BLOCK - 1) / BS_TRACE_BLOCK);
    if (v > n * block) v = n * block;
    if (v < (n - 1) * block + 1) v = (n - 1) * block + 1;
    return v;
}

/* Open-addressing set of nonzero 64-bit keys. */
typedef struct keyset {
    uint64_t *k;
    size_t cap, n;
} keyset;

static int keyset_grow(keyset *s) {
    size_t cap = s->cap ? s->cap * 2 : 1 << 16;
    uint64_t *k = calloc(cap, sizeof *k);
    if (!k) return -1;
    for (size_t i = 0; i < s->cap; i++) {
        if (!s->k[i]) continue;
        size_t j = s->k[i] & (cap - 1);
        while (k[j]) j = (j + 1) & (cap - 1);
        k[j] = s->k[i];
    }
    free(s->k);
    s->k = k;
    s->cap = cap;
    return 0;
}

/* Returns 1 if key was present, 0 if inserted now, -1 on no memory. */
static int keyset_add(keyset *s, uint64_t key) {
    if ((s->n + 1) * 2 > s->cap && keyset_grow(s)) return -1;
    size_t j = key & (s->cap - 1);
    while (s->k[j]) {
        if (s->k[j] == key) return 1;
        j = (j + 1) & (s->cap - 1);
    }
    s->k[j] = key;
    s->n++;
    return 0;
}

int bs_trace_stats_compute(const bs_trace *t, long block, bs_trace_stats *o, cf_err *err) {
    *o = (bs_trace_stats){.requests = t->n};
    if (block < 1) return cf_fail(err, "block size must be >= 1");
    keyset chains = {0}, ids = {0};
    int rc = 0;
    for (size_t i = 0; i < t->n && !rc; i++) {
        const bs_trace_req *r = &t->reqs[i];
        long in = bs_trace_scaled_input(r, block);
        o->input_tokens += in;
        o->output_tokens += r->output_len;
        o->blocks += (long long)r->n_hash;
        uint64_t key = 0x636861696eull;
        long hits = 0;
        int chain_alive = 1;
        for (size_t b = 0; b < r->n_hash; b++) {
            key = bs_rng_mix(key, r->hash[b]);
            if (!key) key = 1;
            int seen = keyset_add(&chains, key);
            int seen_id = keyset_add(&ids, r->hash[b] + 1);
            if (seen < 0 || seen_id < 0) {
                rc = cf_fail(err, "out of memory");
                break;
            }
            if (!seen_id) o->unique_blocks++;
            if (chain_alive && seen == 1) hits++;
            else chain_alive = 0;
        }
        long long h = (long long)hits * block;
        o->hit_tokens += h < in ? h : in;
    }
    free(chains.k);
    free(ids.k);
    if (t->n) o->duration_s = (t->reqs[t->n - 1].t_ms - t->reqs[0].t_ms) / 1000.0;
    o->hit_ratio = o->input_tokens ? (double)o->hit_tokens / (double)o->input_tokens : 0;
    return rc;
}
