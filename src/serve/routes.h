/* routes.h - (routes.c) the server's small endpoints and HTTP helpers, kept out of server.c:
 * POST /tokenize, /detokenize and /v1/messages/count_tokens as pure functions of the body and
 * the model (an answer body or a serve_error; server.c sends it), the served-model check, and
 * the evhttp helpers server.c uses (method names, socket peeks, SSE framing, path ids).
 * Called on the HTTP loop thread; nothing here keeps state. */
#ifndef CINFER_SERVE_ROUTES_H
#define CINFER_SERVE_ROUTES_H

#include <event2/buffer.h>
#include <event2/http.h>
#include <stdbool.h>
#include <stddef.h>

#include "serve/api.h"
#include "serve/gen.h"
#include "serve/model_names.h"
#include "serve/traffic.h"

typedef enum route_kind { ROUTE_TOKENIZE = 0, ROUTE_DETOKENIZE, ROUTE_COUNT_TOKENS } route_kind;

typedef struct route_ctx {
    const gen_model *gm;
    const serve_names *names; /* the served model names */
    api_ctx actx; /* count_tokens: the Messages parse */
} route_ctx;

/* The answer of route k for body[0..len): 0 and *out (malloc'd JSON), or -1 and *e. */
int route_run(const route_ctx *c, route_kind k, const char *body, size_t len, char **out, serve_error *e);
/* 400 for an empty name, 404 for a name that is not served; 0 for NULL (absent) or a match. */
int route_check_model(const serve_names *served, const char *model, serve_error *e);

/* GET /v1/models (one entry) or /v1/models/{id} (one = true): OpenAI's shapes, malloc'd or NULL. */
char *route_models_json(const char *model, long long created, bool one, json_t *extra);

const char *http_method_name(struct evhttp_request *req);
/* Authorization: Bearer KEY, or Anthropic's x-api-key: KEY, against the key table `keys` (when it
 * has keys) or the single `api_key` (NULL: no key required); constant-time comparison.
 * *key_cls: the matched key's default traffic class (TRAFFIC_UNSET if none). */
/* The one log line of a request (client strings escaped by the logger): ids, status, token counts
 * when g has choices, TTFT and duration, an optional note. */
void http_log_request(const char *id, const char *method, const char *path, int status, const gen_job *g, double ttft,
                      double dur, const char *note);
bool http_authorized(const char *api_key, const traffic_keys *keys, struct evhttp_request *req, int *key_cls);
/* 0 if the peer is still there (or unknown), -1 if it closed its side (a MSG_PEEK). */
int http_peer_closed(struct evhttp_connection *evcon);
/* Bytes still in the connection's libevent output buffer. */
size_t http_conn_unsent(struct evhttp_connection *evcon);
/* "data: <json>\n\n"; sse_add takes json (malloc'd, freed here; NULL -> -1). */
void http_sse_put(struct evbuffer *b, const char *json, size_t len);
int http_sse_add(struct evbuffer *b, char *json);
/* A percent-decoded path segment (malloc'd, NULL when out of memory); *cut when it held an
 * encoded NUL (%00), which would end the C string early and make "id%00junk" look like "id". */
char *http_path_id(const char *seg, bool *cut);

#endif
