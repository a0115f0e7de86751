/* traffic.h - traffic classes for the persistent KV store (docs/store.md,
 * docs/serve.md "Traffic classes"): which class a request belongs to, and the
 * API key table that carries per-key default classes.
 *
 * A request's class decides how long the store keeps the KV blocks it
 * computes (default 1 d, chat 7 d, agent 3 d; `--retention`). Precedence:
 * the request field `cinfer.traffic_class` (a JSON object "cinfer" with
 * "traffic_class": "agent" | "chat" | "default" or 0..2), then the header
 * `X-Cinfer-Traffic-Class`, then the API key's class (`--api-key KEY:agent`,
 * `--api-key-class KEY=agent`), else default. An unknown class name in the
 * field or header is a 400 (param "cinfer.traffic_class"), never a guess.
 *
 * Pure functions plus a small immutable table built once by cmd_serve.c and
 * borrowed by the server (read on the HTTP loop thread only). Called by
 * server.c (every generation route, whatever its request format) and
 * api_request.c (the field, as recipe keeps it: traffic_class_from_text). */
#ifndef CINFER_SERVE_TRAFFIC_H
#define CINFER_SERVE_TRAFFIC_H

#include <jansson.h>
#include <stdbool.h>

#include "serve/serve_error.h"

#define TRAFFIC_UNSET (-1)
#define TRAFFIC_HEADER "X-Cinfer-Traffic-Class"

/* Text ("agent", "chat", "default", case-insensitive, or "0".."2") -> class,
 * -1 when unknown. */
int traffic_class_from_text(const char *s);

/* Reads `cinfer.traffic_class` from a request object: *cls = the class or
 * TRAFFIC_UNSET when absent/null. 400 on a wrong type or unknown class. */
int traffic_class_from_json(const json_t *request, int *cls, serve_error *err);

/* Header value (may be NULL: unset). 400 on an unknown class. */
int traffic_class_from_header(const char *value, int *cls, serve_error *err);

/* The class a request runs with (see precedence above). */
int traffic_class_resolve(int field, int header, int key_class);

/* ---- API keys ---- */

typedef struct traffic_key {
    char *key;
    int cls; /* TRAFFIC_UNSET: no default class */
} traffic_key;

typedef struct traffic_keys {
    traffic_key *keys; /* owned */
    int n;
} traffic_keys;

/* `--api-key KEY[:class]`: the suffix is a class only when it names one
 * (else the whole text is the key). A key given twice keeps one entry; a
 * later class wins. Returns -1 (message in msg) for an empty key or OOM. */
int traffic_keys_add(traffic_keys *t, const char *spec, char *msg, size_t msg_len);
/* `--api-key-class KEY=class`: sets (or adds) KEY's class; unknown class -> -1. */
int traffic_keys_set_class(traffic_keys *t, const char *spec, char *msg, size_t msg_len);
/* Constant-time per key: true when `bearer` is one of the keys; *cls gets its
 * class. */
bool traffic_keys_match(const traffic_keys *t, const char *bearer, int *cls);
void traffic_keys_free(traffic_keys *t);

#endif
