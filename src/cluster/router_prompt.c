/* router_prompt.c - the canonical prompt of a request, for the router's
 * estimates only (prompt tokens, prefix index, affinity key); the body the
 * worker gets is never changed. The canonical form concatenates the
 * prompt-bearing fields in the order a chat template renders them (tools,
 * system/instructions, then the conversation), each serialized compactly with
 * sorted keys, so a later turn of a conversation shares the earlier turn's
 * bytes as a prefix. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "cluster/router_internal.h"

static int add_field(strbuf *b, json_t *root, const char *key) {
    json_t *v = json_object_get(root, key);
    if (!v) return 0;
    if (json_is_string(v)) return strbuf_append(b, json_string_value(v), json_string_length(v));
    char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    if (!s) return -1;
    int rc = strbuf_append(b, s, strlen(s));
    free(s);
    return rc;
}

void router_prompt_from_body(const char *path, const char *body, size_t len, router_prompt *out) {
    memset(out, 0, sizeof *out);
    json_t *root = len ? json_loadb(body, len, 0, NULL) : NULL;
    if (!json_is_object(root)) {
        json_decref(root);
        return;
    }
    static const char *const chat[] = {"tools", "messages", NULL};
    static const char *const cmpl[] = {"prompt", NULL};
    static const char *const msgs[] = {"tools", "system", "messages", NULL};
    static const char *const resp[] = {"instructions", "tools", "input", NULL};
    const char *const *fields = !strcmp(path, "/v1/chat/completions") ? chat
                                : !strcmp(path, "/v1/completions")    ? cmpl
                                : !strcmp(path, "/v1/messages")       ? msgs
                                : !strcmp(path, "/v1/responses")      ? resp
                                                                      : NULL;
    strbuf b = {0};
    int rc = 0;
    for (int i = 0; fields && fields[i]; i++) rc |= add_field(&b, root, fields[i]);
    if (!rc && b.len) {
        out->text = b.p;
        out->len = b.len;
    } else free(b.p);
    const char *mt[] = {"max_tokens", "max_completion_tokens", "max_output_tokens"};
    for (int i = 0; i < 3; i++) {
        json_t *v = json_object_get(root, mt[i]);
        if (json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) < (1 << 30))
            out->max_tokens = (int32_t)json_integer_value(v);
    }
    out->stream = json_is_true(json_object_get(root, "stream"));
    const char *prev = json_string_value(json_object_get(root, "previous_response_id"));
    if (prev && !strcmp(path, "/v1/responses") && strlen(prev) < sizeof out->prev_response)
        snprintf(out->prev_response, sizeof out->prev_response, "%s", prev);
    json_decref(root);
}

void router_prompt_free(router_prompt *p) {
    free(p->text);
    p->text = NULL;
    p->len = 0;
}
