/* model_names.c - see model_names.h. */
#include "serve/model_names.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_BYTES 256

int serve_names_find(const serve_names *s, const char *name) {
    for (int i = 0; s && i < s->n; i++)
        if (!strcmp(s->v[i], name)) return i;
    return -1;
}

static int add_one(serve_names *s, const char *p, size_t len, char *msg, size_t cap) {
    if (len == 0) return snprintf(msg, cap, "a model name is empty"), -1;
    if (len > NAME_MAX_BYTES) return snprintf(msg, cap, "a model name is longer than %d bytes", NAME_MAX_BYTES), -1;
    char *name = strndup(p, len);
    if (!name) return snprintf(msg, cap, "out of memory"), -1;
    if (serve_names_find(s, name) >= 0) {
        snprintf(msg, cap, "model name '%s' is given twice", name);
        free(name);
        return -1;
    }
    char **v = realloc(s->v, (size_t)(s->n + 1) * sizeof *v);
    if (!v) {
        free(name);
        return snprintf(msg, cap, "out of memory"), -1;
    }
    v[s->n++] = name;
    s->v = v;
    return 0;
}

int serve_names_add(serve_names *s, const char *spec, char *msg, size_t cap) {
    for (const char *p = spec;;) {
        size_t len = strcspn(p, ",");
        if (add_one(s, p, len, msg, cap)) return -1;
        if (!p[len]) return 0;
        p += len + 1;
    }
}

const char *serve_names_pick(const serve_names *s, const char *requested) {
    if (!requested || !*requested) return s->n ? s->v[0] : NULL;
    int i = serve_names_find(s, requested);
    return i >= 0 ? s->v[i] : NULL;
}

char *serve_names_models_json(const serve_names *s, long long created, json_t *extra) {
    json_t *data = json_array(), *root = json_pack("{s:s}", "object", "list");
    char *out = NULL;
    bool ok = data && root;
    for (int i = 0; ok && i < s->n; i++) {
        json_t *m = json_pack("{s:s, s:s, s:I, s:s}", "id", s->v[i], "object", "model", "created", (json_int_t)created,
                              "owned_by", "cinfer");
        ok = m && (!extra || !json_object_update(m, extra));
        ok = !json_array_append_new(data, m) && ok;
    }
    if (ok && !json_object_set(root, "data", data)) out = json_dumps(root, JSON_COMPACT);
    json_decref(data);
    json_decref(root);
    return out;
}

void serve_names_join(const serve_names *s, char *buf, size_t cap) {
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < s->n && k < cap; i++) {
        int w = snprintf(buf + k, cap - k, "%s'%s'", i ? ", " : "", s->v[i]);
        if (w < 0) break;
        k += (size_t)w;
    }
}

void serve_names_free(serve_names *s) {
    for (int i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = 0;
}
