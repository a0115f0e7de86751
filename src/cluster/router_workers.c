/* router_workers.c - the router's worker table: parsing worker specs (flags
 * and --workers-file), the health / load probe, the policy view, /workers.
 *
 * Probe: every health_interval_s, GET <worker>/load on each worker that has
 * no probe in flight. The probe's connection is the router's, never
 * libevent's (no free-on-completion): libevent 2.1.12 frees an auto-free
 * connection on some failure paths and keeps it on others (a connect failure
 * with errno ECONNREFUSED, or a connect timeout, calls back with the request
 * and code 0 and keeps it; other errors call the error callback, free it,
 * and call back with NULL), so guessing which would leak or double-free it.
 * The next poll round frees it (never inside its own callback). A probe whose
 * callback has not come within its timeout + PROBE_MARGIN_S is abandoned (its
 * connection freed, which drops the request without a callback), counted,
 * and a new one is started: a lost callback cannot freeze a worker's health.
 * A 200 with the load JSON (running, waiting, kv_tokens,
 * kv_capacity_tokens, max_seqs, draining) marks it healthy and updates the
 * report; any other HTTP answer marks it healthy but not accepting (a 503
 * while it drains); no answer (refused, reset, timeout) marks it unhealthy.
 * A request that fails to reach a worker marks it unhealthy at once (the
 * next good probe restores it). A worker that comes back after being down
 * lost its memory cache: its prefix index entries are cleared.
 *
 * View for a pick: running = max(router's own in-flight count, reported
 * running); queued compute = the router's estimate for its requests not yet
 * answered; KV = max(reported, router's estimate); cached_tokens = the prefix
 * index match times the chunk size times the learned tokens per byte. With a
 * shared store (--store-shared) the index has one more slot, the store: every
 * prefix a worker computed is written there (complete blocks), so a worker's
 * cached estimate is the longer of its own match and the store's (store-aware
 * placement: no strict cache affinity; the store load is counted as free,
 * which overstates a cold worker's hit by the load time). */
#include <event2/buffer.h>
#include <event2/http.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "cluster/router_internal.h"

static const char *const role_names[] = {"both", "prefill", "decode"};

int router_worker_parse(const char *arg, router_worker_spec *out, cf_err *err) {
    memset(out, 0, sizeof *out);
    const char *at = strrchr(arg, '@');
    size_t ulen = at ? (size_t)(at - arg) : strlen(arg);
    out->role = ROUTER_ROLE_BOTH;
    if (at) {
        int found = -1;
        for (int i = 0; i < 3; i++)
            if (!strcmp(at + 1, role_names[i])) found = i;
        if (found < 0) return cf_fail(err, "worker '%.200s': role '%.40s' is not both, prefill or decode", arg, at + 1);
        out->role = (router_role)found;
    }
    while (ulen && arg[ulen - 1] == '/') ulen--;
    if (ulen < 8 || strncmp(arg, "http://", 7) || ulen > 200)
        return cf_fail(err, "worker '%.200s': expected http://HOST:PORT[@role]", arg);
    out->url = strndup(arg, ulen);
    if (!out->url) return cf_fail(err, "out of memory");
    struct evhttp_uri *u = evhttp_uri_parse(out->url);
    int port = u ? evhttp_uri_get_port(u) : -1;
    const char *host = u ? evhttp_uri_get_host(u) : NULL;
    const char *path = u ? evhttp_uri_get_path(u) : NULL;
    bool ok = host && *host && port > 0 && port < 65536 && (!path || !*path);
    if (u) evhttp_uri_free(u);
    if (!ok) {
        free(out->url);
        out->url = NULL;
        return cf_fail(err, "worker '%.200s': expected http://HOST:PORT[@role] (explicit port, no path)", arg);
    }
    return 0;
}

int router_workers_file(const char *path, router_worker_spec **specs, int32_t *n, cf_err *err) {
    FILE *f = fopen(path, "r");
    if (!f) return cf_fail(err, "--workers-file %.300s: cannot open", path);
    char line[512];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *s = line;
        char *hash = strchr(s, '#');
        if (hash) *hash = 0;
        while (*s == ' ' || *s == '\t') s++;
        size_t l = strlen(s);
        while (l && (s[l - 1] == '\n' || s[l - 1] == '\r' || s[l - 1] == ' ' || s[l - 1] == '\t')) s[--l] = 0;
        if (!l) continue;
        router_worker_spec one;
        if (router_worker_parse(s, &one, err)) {
            cf_prefix(err, "%.300s:%d", path, lineno);
            rc = -1;
            break;
        }
        router_worker_spec *g = realloc(*specs, (size_t)(*n + 1) * sizeof *g);
        if (!g) {
            free(one.url);
            rc = cf_fail(err, "out of memory");
            break;
        }
        *specs = g;
        g[(*n)++] = one;
    }
    fclose(f);
    return rc;
}

void router_worker_specs_free(router_worker_spec *specs, int32_t n) {
    for (int32_t i = 0; i < n; i++) free(specs[i].url);
    free(specs);
}

int router_workers_init(router *r, cf_err *err) {
    const router_config *c = r->cfg;
    if (c->n_workers < 1 || c->n_workers > 64)
        return cf_fail(err, "between 1 and 64 workers are needed (got %d)", c->n_workers);
    r->w = calloc((size_t)c->n_workers, sizeof *r->w);
    r->scratch = calloc((size_t)c->n_workers, sizeof *r->scratch);
    if (!r->w || !r->scratch) return cf_fail(err, "out of memory");
    r->n_w = c->n_workers;
    for (int32_t i = 0; i < r->n_w; i++) {
        router_worker *w = &r->w[i];
        snprintf(w->url, sizeof w->url, "%s", c->workers[i].url);
        for (int32_t j = 0; j < i; j++)
            if (!strcmp(r->w[j].url, w->url)) return cf_fail(err, "worker %s is given twice", w->url);
        struct evhttp_uri *u = evhttp_uri_parse(w->url);
        if (!u) return cf_fail(err, "worker '%s': bad URL", w->url);
        snprintf(w->host, sizeof w->host, "%s", evhttp_uri_get_host(u));
        w->port = evhttp_uri_get_port(u);
        evhttp_uri_free(u);
        w->role = c->workers[i].role;
        w->owner = r;
        w->index = i;
        w->view.id = prefix_hash_bytes(0x5eed, w->url, strlen(w->url));
        w->rep_running = w->rep_waiting = -1;
        w->rep_kv_tokens = -1;
        w->view.healthy = false; /* until the first probe answers */
        w->view.accepting = true;
    }
    if (prefix_index_init(&r->ix, r->n_w + 1, 1 << 16)) /* + the shared store's slot (n_w) */
        return cf_fail(err, "out of memory (prefix index)");
    return 0;
}

void router_workers_free(router *r) {
    for (int32_t i = 0; i < r->n_w; i++)
        if (r->w[i].probe_conn) evhttp_connection_free(r->w[i].probe_conn);
    prefix_index_free(&r->ix);
    free(r->w);
    free(r->scratch);
    r->w = NULL;
    r->scratch = NULL;
}

static int64_t json_int(json_t *o, const char *k, int64_t dflt) {
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

static void worker_set_health(router *r, int32_t i, bool up) {
    router_worker *w = &r->w[i];
    if (up && !w->view.healthy && w->last_ok > 0) {
        LOG_INFO("router: worker %s is back; forgetting its cached prefixes", w->url);
        prefix_index_clear_worker(&r->ix, i);
    } else if (!up && w->view.healthy) LOG_WARN("router: worker %s is unreachable", w->url);
    w->view.healthy = up;
    if (up) {
        w->consecutive_fails = 0;
        w->last_ok = time_now();
    } else w->consecutive_fails++;
}

static void on_probe_done(struct evhttp_request *req, void *arg) {
    router_worker *w = arg;
    router *r = w->owner;
    int32_t idx = w->index;
    int status = req ? evhttp_request_get_response_code(req) : 0;
    w->probing = false; /* w->probe_conn stays: the next poll round frees it */
    if (status == 0) { /* refused, reset, timed out */
        worker_set_health(r, idx, false);
        return;
    }
    worker_set_health(r, idx, true);
    json_t *root = NULL;
    if (status == 200) {
        struct evbuffer *b = evhttp_request_get_input_buffer(req);
        size_t n = evbuffer_get_length(b);
        root = json_loadb((const char *)evbuffer_pullup(b, -1), n, 0, NULL);
    }
    if (json_is_object(root)) {
        w->rep_running = (int32_t)json_int(root, "running", 0);
        w->rep_waiting = (int32_t)json_int(root, "waiting", 0);
        w->rep_kv_tokens = json_int(root, "kv_tokens", 0);
        w->view.kv_capacity = json_int(root, "kv_capacity_tokens", 0);
        w->view.max_seqs = (int32_t)json_int(root, "max_seqs", 0);
        w->rep_draining = json_is_true(json_object_get(root, "draining"));
        int64_t inflight = json_int(root, "inflight", 0), max_inflight = json_int(root, "max_inflight", 0);
        w->view.accepting = !w->rep_draining && (max_inflight <= 0 || inflight < max_inflight);
    } else {
        w->view.accepting = status < 500; /* alive but no load report (503: draining) */
        w->rep_draining = status == 503;
    }
    json_decref(root);
}

/* The probe's connection timeout (whole seconds, as libevent takes it). */
static int probe_timeout_s(const router *r) {
    double t = r->cfg->health_interval_s * 2;
    return t < 2 ? 2 : (int)t;
}

#define PROBE_MARGIN_S 2.0

void router_workers_poll(router *r) {
    double now = time_now();
    double limit = probe_timeout_s(r) + PROBE_MARGIN_S;
    for (int32_t i = 0; i < r->n_w; i++) {
        router_worker *w = &r->w[i];
        if (w->probing) {
            if (now - w->probe_started < limit) continue;
            LOG_WARN("router: the probe of %s got no answer or error in %.1f s (timeout %d s); abandoning it", w->url,
                     now - w->probe_started, probe_timeout_s(r));
            w->n_probes_abandoned++;
            w->probing = false;
            worker_set_health(r, i, false);
        }
        if (w->probe_conn) { /* its callback ran, or it was abandoned just above: ours to free */
            evhttp_connection_free(w->probe_conn);
            w->probe_conn = NULL;
        }
        struct evhttp_connection *c = evhttp_connection_base_new(r->base, NULL, w->host, (unsigned short)w->port);
        struct evhttp_request *req = c ? evhttp_request_new(on_probe_done, w) : NULL;
        if (!req) {
            if (c) evhttp_connection_free(c);
            LOG_WARN("router: out of memory starting a probe of %s", w->url);
            continue;
        }
        evhttp_connection_set_timeout(c, probe_timeout_s(r));
        char host[256];
        snprintf(host, sizeof host, "%s:%d", w->host, w->port);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Host", host);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
        w->probing = true; /* before the request: a connect that fails at once calls back inside it */
        w->probe_started = now;
        w->probe_conn = c;
        if (evhttp_make_request(c, req, EVHTTP_REQ_GET, "/load")) { /* nothing was called back */
            LOG_WARN("router: cannot start a probe of %s", w->url);
            w->probing = false;
            worker_set_health(r, i, false);
        }
    }
}

void router_workers_view(router *r, router_role role, uint64_t exclude, const uint64_t *chain, int32_t n_chain,
                         int32_t prompt_tokens) {
    for (int32_t i = 0; i < r->n_w; i++) {
        router_worker *w = &r->w[i];
        route_worker *v = &r->scratch[i];
        *v = w->view;
        bool excluded = i < 64 && (exclude >> i & 1);
        v->accepting = w->view.accepting && w->role == role && !excluded;
        v->running = w->rep_running > w->inflight ? w->rep_running : w->inflight;
        v->waiting = w->rep_waiting > 0 ? w->rep_waiting : 0;
        v->queued_cost = w->inflight_cost;
        v->kv_tokens = w->rep_kv_tokens > w->inflight_kv ? w->rep_kv_tokens : w->inflight_kv;
        int32_t chunks = prefix_index_match(&r->ix, i, chain, n_chain);
        if (r->cfg->store_shared) {
            int32_t in_store = prefix_index_match(&r->ix, r->n_w, chain, n_chain);
            if (in_store > chunks) chunks = in_store;
        }
        double cached = (double)chunks * PREFIX_CHUNK_BYTES * r->tokens_per_byte;
        v->cached_tokens = cached >= prompt_tokens ? prompt_tokens : (int32_t)cached;
    }
}

void router_note_prefix(router *r, int32_t i, const uint64_t *chain, int32_t n, bool computed) {
    if (n <= 0) return;
    prefix_index_insert(&r->ix, i, chain, n);
    if (computed && r->cfg->store_shared) prefix_index_insert(&r->ix, r->n_w, chain, n);
}

void router_worker_failed(router *r, int32_t i) { worker_set_health(r, i, false); }

char *router_workers_json(const router *r) {
    json_t *arr = json_array();
    for (int32_t i = 0; arr && i < r->n_w; i++) {
        const router_worker *w = &r->w[i];
        json_t *dec = json_object();
        for (int k = 0; dec && k < ROUTE_POLICY_COUNT; k++)
            json_object_set_new(dec, route_policy_name((route_policy_kind)k),
                                json_integer((json_int_t)w->decisions[k]));
        json_t *o = json_pack(
            "{s:s, s:s, s:b, s:b, s:i, s:f, s:I, s:i, s:i, s:I, s:I, s:i, s:b, s:f, s:I, s:I, s:I, "
            "s:I, s:I, s:i, s:f, s:o*}",
            "url", w->url, "role", role_names[w->role], "healthy", w->view.healthy, "accepting", w->view.accepting,
            "inflight", w->inflight, "queued_cost", w->inflight_cost, "inflight_kv_tokens", (json_int_t)w->inflight_kv,
            "running", w->rep_running, "waiting", w->rep_waiting, "kv_tokens", (json_int_t)w->rep_kv_tokens,
            "kv_capacity_tokens", (json_int_t)w->view.kv_capacity, "max_seqs", w->view.max_seqs, "draining",
            w->rep_draining, "seconds_since_ok", w->last_ok > 0 ? time_now() - w->last_ok : -1.0, "requests",
            (json_int_t)w->n_requests, "errors", (json_int_t)w->n_errors, "full", (json_int_t)w->n_full,
            "retried_elsewhere", (json_int_t)w->n_retries_from, "probes_abandoned", (json_int_t)w->n_probes_abandoned,
            "consecutive_fails", w->consecutive_fails, "probe_in_flight_s",
            w->probing ? time_now() - w->probe_started : -1.0, "decisions", dec);
        if (!o || json_array_append_new(arr, o)) {
            json_decref(arr);
            arr = NULL;
        }
    }
    json_t *root =
        arr ? json_pack("{s:o, s:s, s:s, s:s, s:f}", "workers", arr, "policy", route_policy_name(r->cfg->policy),
                        "prefill_policy", route_policy_name(r->cfg->prefill_policy), "decode_policy",
                        route_policy_name(r->cfg->decode_policy), "tokens_per_byte", r->tokens_per_byte)
            : NULL;
    char *s = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    return s;
}
