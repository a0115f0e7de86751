/* routes.c - see routes.h. The tokenize endpoints follow vLLM's shapes: /tokenize answers
 * {"count","max_model_len","tokens"} (messages go through the chat template exactly as a chat
 * request); /detokenize {"prompt": text} (a leading BOS is not rendered); count_tokens answers
 * Anthropic's {"input_tokens": N}. Every allocation is checked; a failure is a 500 serve_error.
 * Also the small HTTP helpers of server.c (method names, peer checks, API-key authorization). */
#include "serve/routes.h"

#include <errno.h>
#include <event2/bufferevent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "base/log.h"

static int oom(serve_error *e) { return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory"); }

int route_check_model(const serve_names *served, const char *model, serve_error *e) {
    if (model && !*model) return serve_bad(e, "model", "'model' must not be empty");
    if (model && !serve_names_pick(served, model)) {
        char all[512];
        serve_names_join(served, all, sizeof all);
        return serve_fail(e, 404, "invalid_request_error", "model_not_found", "model",
                          "The model '%.200s' does not exist (this server serves %s).", model, all);
    }
    return 0;
}

static int tokenize(const route_ctx *c, const char *body, size_t len, char **out, serve_error *e) {
    char *prompt, *model;
    size_t plen = 0;
    recipe_request req;
    bool add;
    int32_t *ids = NULL, n = 0;
    recipe_request_init(&req);
    if (api_tokenize_parse(body, len, &prompt, &plen, &req, &add, &model, e)) {
        recipe_request_free(&req);
        return -1;
    }
    int rc = route_check_model(c->names, model, e) || (prompt ? gen_text_prompt(c->gm, prompt, plen, add, &ids, &n, e)
                                                              : gen_req_prompt(c->gm, &req, add, &ids, &n, e));
    json_t *arr = rc ? NULL : json_array();
    for (int32_t i = 0; arr && i < n; i++)
        if (json_array_append_new(arr, json_integer(ids[i]))) json_decref(arr), arr = NULL;
    json_t *o = arr ? json_pack("{s:i, s:i, s:o}", "count", n, "max_model_len", c->gm->ctx, "tokens", arr) : NULL;
    if (!rc && !(*out = o ? json_dumps(o, JSON_COMPACT) : NULL)) rc = oom(e);
    if (o) json_decref(o);
    free(prompt);
    free(model);
    recipe_request_free(&req);
    free(ids);
    return rc ? -1 : 0;
}

static int detokenize(const route_ctx *c, const char *body, size_t len, char **out, serve_error *e) {
    int32_t *ids, n;
    char *model;
    const tokenizer *tok = c->gm->tok;
    if (api_detokenize_parse(body, len, tokenizer_n_vocab(tok), &ids, &n, &model, e)) return -1;
    int rc = route_check_model(c->names, model, e);
    detok_stream d;
    detok_init(&d, tok, n > 0 && ids[0] == tokenizer_bos(tok), false);
    size_t piece_cap = 64 + tokenizer_max_token_len(tok);
    struct evbuffer *text = rc ? NULL : evbuffer_new();
    char *piece = rc ? NULL : malloc(piece_cap);
    if (!rc && text && piece) {
        for (int32_t i = 0; i < n; i++) evbuffer_add(text, piece, detok_push(&d, ids[i], piece, piece_cap));
        evbuffer_add(text, piece, detok_flush(&d, piece, piece_cap));
        size_t tl = evbuffer_get_length(text);
        const char *tp = (const char *)evbuffer_pullup(text, -1);
        json_t *o = json_pack("{s:s%}", "prompt", tp ? tp : "", tp ? tl : 0);
        *out = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (o) json_decref(o);
    }
    if (!rc && !*out) rc = oom(e);
    if (text) evbuffer_free(text);
    free(piece);
    free(ids);
    free(model);
    return rc ? -1 : 0;
}

static int count_tokens(const route_ctx *c, const char *body, size_t len, char **out, serve_error *e) {
    gen_params p;
    api_job a;
    int32_t *ids = NULL, n = 0;
    memset(&a, 0, sizeof a);
    int rc = api_count_tokens_parse(&a, body, len, &c->actx, &p, e) || route_check_model(c->names, p.model, e) ||
             gen_req_prompt(c->gm, p.req, true, &ids, &n, e);
    gen_params_free(&p);
    api_job_free(&a);
    free(ids);
    if (rc) return -1;
    if (!(*out = malloc(48))) return oom(e);
    snprintf(*out, 48, "{\"input_tokens\":%d}", n);
    return 0;
}

int route_run(const route_ctx *c, route_kind k, const char *body, size_t len, char **out, serve_error *e) {
    *out = NULL;
    switch (k) {
    case ROUTE_TOKENIZE: return tokenize(c, body, len, out, e);
    case ROUTE_DETOKENIZE: return detokenize(c, body, len, out, e);
    default: return count_tokens(c, body, len, out, e);
    }
}

char *route_models_json(const char *model, long long created, bool one, json_t *extra) {
    json_t *m = json_pack("{s:s, s:s, s:I, s:s}", "id", model, "object", "model", "created", (json_int_t)created,
                          "owned_by", "cinfer");
    if (m && extra && json_object_update(m, extra)) {
        json_decref(m);
        m = NULL;
    }
    json_t *o = one || !m ? m : json_pack("{s:s, s:[o]}", "object", "list", "data", m);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (o) json_decref(o);
    return s;
}

/* ---- HTTP helpers ---- */

const char *http_method_name(struct evhttp_request *req) {
    switch (evhttp_request_get_command(req)) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    case EVHTTP_REQ_TRACE: return "TRACE";
    case EVHTTP_REQ_CONNECT: return "CONNECT";
    case EVHTTP_REQ_PATCH: return "PATCH";
    default: return "OTHER";
    }
}

int http_peer_closed(struct evhttp_connection *evcon) {
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    if (fd < 0) return 0;
    char c;
    ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0) return -1;
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
    return 0;
}

size_t http_conn_unsent(struct evhttp_connection *evcon) {
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
    return bev ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

void http_sse_put(struct evbuffer *b, const char *json, size_t len) {
    evbuffer_add(b, "data: ", 6);
    evbuffer_add(b, json, len);
    evbuffer_add(b, "\n\n", 2);
}

int http_sse_add(struct evbuffer *b, char *json) {
    if (!json) return -1;
    int rc = evbuffer_add_printf(b, "data: %s\n\n", json) < 0 ? -1 : 0;
    free(json);
    return rc;
}

char *http_path_id(const char *seg, bool *cut) {
    size_t n = 0;
    char *d = evhttp_uridecode(seg, 0, &n);
    *cut = d && strlen(d) != n;
    return d;
}

static bool key_matches(const char *k, const char *want) {
    size_t kl = strlen(k), wl = strlen(want);
    unsigned diff = (unsigned)(kl ^ wl);
    for (size_t i = 0; i < wl; i++) diff |= (unsigned char)want[i] ^ (unsigned char)(i < kl ? k[i] : 0);
    return diff == 0;
}

bool http_authorized(const char *api_key, const traffic_keys *keys, struct evhttp_request *req, int *key_cls) {
    *key_cls = TRAFFIC_UNSET;
    bool table = keys && keys->n > 0;
    if (!table && !api_key) return true;
    struct evkeyvalq *hdr = evhttp_request_get_input_headers(req);
    const char *k = evhttp_find_header(hdr, "x-api-key");
    if (!k) {
        const char *h = evhttp_find_header(hdr, "Authorization");
        if (!h || strncasecmp(h, "Bearer ", 7)) return false;
        k = h + 7;
    }
    if (table) return traffic_keys_match(keys, k, key_cls);
    return key_matches(k, api_key);
}

void http_log_request(const char *id, const char *method, const char *path, int status, const gen_job *g, double ttft,
                      double dur, const char *note) {
    if (g && g->choices)
        LOG_INFO("request %s %s %s status=%d prompt_tokens=%d cached_tokens=%d completion_tokens=%d ttft=%.3fs "
                 "duration=%.3fs%s%s",
                 id, method, path, status, g->usage.prompt_tokens, g->usage.cached_tokens, g->usage.completion_tokens,
                 ttft, dur, note ? " " : "", note ? note : "");
    else
        LOG_INFO("request %s %s %s status=%d duration=%.3fs%s%s", id, method, path, status, dur, note ? " " : "",
                 note ? note : "");
}
