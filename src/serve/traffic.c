/* traffic.c - traffic class parsing and the API key table (see traffic.h). */
#include "serve/traffic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cinfer/engine.h"

int traffic_class_from_text(const char *s) {
    if (!s) return -1;
    if (!strcasecmp(s, "default")) return CINFER_TRAFFIC_DEFAULT;
    if (!strcasecmp(s, "chat")) return CINFER_TRAFFIC_CHAT;
    if (!strcasecmp(s, "agent")) return CINFER_TRAFFIC_AGENT;
    if (s[0] >= '0' && s[0] < '0' + CINFER_TRAFFIC_N && !s[1]) return s[0] - '0';
    return -1;
}

static int bad_class(serve_error *err, const char *what, const char *v) {
    return serve_bad(err, "cinfer.traffic_class", "%s '%.60s' is not a traffic class (agent, chat or default)", what,
                     v);
}

int traffic_class_from_json(const json_t *request, int *cls, serve_error *err) {
    *cls = TRAFFIC_UNSET;
    const json_t *c = json_object_get(request, "cinfer");
    if (!c || json_is_null(c)) return 0;
    if (!json_is_object(c)) return serve_bad(err, "cinfer", "'cinfer' must be an object");
    const json_t *tc = json_object_get(c, "traffic_class");
    if (!tc || json_is_null(tc)) return 0;
    if (json_is_integer(tc)) {
        json_int_t v = json_integer_value(tc);
        if (v < 0 || v >= CINFER_TRAFFIC_N)
            return serve_bad(err, "cinfer.traffic_class", "'cinfer.traffic_class' %lld is not 0, 1 or 2", (long long)v);
        *cls = (int)v;
        return 0;
    }
    if (!json_is_string(tc))
        return serve_bad(err, "cinfer.traffic_class", "'cinfer.traffic_class' must be a string or an integer");
    int v = traffic_class_from_text(json_string_value(tc));
    if (v < 0) return bad_class(err, "'cinfer.traffic_class'", json_string_value(tc));
    *cls = v;
    return 0;
}

int traffic_class_from_header(const char *value, int *cls, serve_error *err) {
    *cls = TRAFFIC_UNSET;
    if (!value || !*value) return 0;
    int v = traffic_class_from_text(value);
    if (v < 0) return bad_class(err, "the header " TRAFFIC_HEADER " value", value);
    *cls = v;
    return 0;
}

int traffic_class_resolve(int field, int header, int key_class) {
    if (field >= 0) return field;
    if (header >= 0) return header;
    if (key_class >= 0) return key_class;
    return CINFER_TRAFFIC_DEFAULT;
}

static traffic_key *find(traffic_keys *t, const char *key, size_t len) {
    for (int i = 0; i < t->n; i++)
        if (strlen(t->keys[i].key) == len && !memcmp(t->keys[i].key, key, len)) return &t->keys[i];
    return NULL;
}

static int put(traffic_keys *t, const char *key, size_t len, int cls, bool set_cls, char *msg, size_t ml) {
    if (len == 0) {
        snprintf(msg, ml, "an API key must not be empty");
        return -1;
    }
    traffic_key *k = find(t, key, len);
    if (!k) {
        traffic_key *nk = realloc(t->keys, (size_t)(t->n + 1) * sizeof *nk);
        if (!nk) goto oom;
        t->keys = nk;
        k = &t->keys[t->n];
        if (!(k->key = strndup(key, len))) goto oom;
        k->cls = TRAFFIC_UNSET;
        t->n++;
    }
    if (set_cls) k->cls = cls;
    return 0;
oom:
    snprintf(msg, ml, "out of memory");
    return -1;
}

int traffic_keys_add(traffic_keys *t, const char *spec, char *msg, size_t msg_len) {
    const char *colon = strrchr(spec, ':');
    int cls = colon ? traffic_class_from_text(colon + 1) : -1;
    if (colon && cls >= 0) return put(t, spec, (size_t)(colon - spec), cls, true, msg, msg_len);
    return put(t, spec, strlen(spec), TRAFFIC_UNSET, false, msg, msg_len);
}

int traffic_keys_set_class(traffic_keys *t, const char *spec, char *msg, size_t msg_len) {
    const char *eq = strrchr(spec, '=');
    if (!eq) {
        snprintf(msg, msg_len, "'%.60s' is not KEY=CLASS", spec);
        return -1;
    }
    int cls = traffic_class_from_text(eq + 1);
    if (cls < 0) {
        snprintf(msg, msg_len, "'%.60s' is not a traffic class (agent, chat or default)", eq + 1);
        return -1;
    }
    return put(t, spec, (size_t)(eq - spec), cls, true, msg, msg_len);
}

bool traffic_keys_match(const traffic_keys *t, const char *bearer, int *cls) {
    bool found = false;
    *cls = TRAFFIC_UNSET;
    size_t bl = strlen(bearer);
    for (int i = 0; i < t->n; i++) { /* every key compared in full: time does not depend on which matched */
        const char *want = t->keys[i].key;
        size_t wl = strlen(want);
        unsigned diff = (unsigned)(bl ^ wl);
        for (size_t j = 0; j < wl; j++) diff |= (unsigned char)want[j] ^ (unsigned char)(j < bl ? bearer[j] : 0);
        if (diff == 0 && !found) {
            found = true;
            *cls = t->keys[i].cls;
        }
    }
    return found;
}

void traffic_keys_free(traffic_keys *t) {
    for (int i = 0; i < t->n; i++) free(t->keys[i].key);
    free(t->keys);
    t->keys = NULL;
    t->n = 0;
}
