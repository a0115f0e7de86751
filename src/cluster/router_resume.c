/* router_resume.c - the relayed-stream record and resume body of router_resume.h.
 *
 * Events are cut at the first blank line ("\n\n"; workers write LF only). A comment event is one
 * line `: cinfer {json}`; its "n" says how many ids came before its "t", so the kept ids are cut
 * to n before t is appended (a resumed worker may regenerate ids the client never got text for). */
#include "cluster/router_resume.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMMENT_PREFIX ": cinfer "

int router_resume_init(router_resume *s) {
    memset(s, 0, sizeof *s);
    s->raw = evbuffer_new();
    s->held = evbuffer_new();
    return s->raw && s->held ? 0 : -1;
}

void router_resume_free(router_resume *s) {
    if (s->raw) evbuffer_free(s->raw);
    if (s->held) evbuffer_free(s->held);
    free(s->ids);
    memset(s, 0, sizeof *s);
}

static int commit(router_resume *s, const char *json, size_t len, struct evbuffer *out) {
    json_t *o = json_loadb(json, len, 0, NULL);
    json_t *n = json_object_get(o, "n"), *t = json_object_get(o, "t"), *b = json_object_get(o, "b");
    json_t *id = json_object_get(o, "id"), *cr = json_object_get(o, "created");
    int rc = -1;
    if (!json_is_integer(n) || !json_is_array(t) || !json_is_integer(b) || json_integer_value(b) < 0 ||
        json_integer_value(n) < 0 || json_integer_value(n) > s->n_ids)
        goto done;
    size_t nt = json_array_size(t);
    int64_t need = json_integer_value(n) + (int64_t)nt;
    if (need > (1 << 24)) goto done;
    if (need > s->cap_ids) {
        int32_t cap = s->cap_ids ? s->cap_ids : 256;
        while (cap < need) cap *= 2;
        int32_t *p = realloc(s->ids, (size_t)cap * sizeof *p);
        if (!p) goto done;
        s->ids = p;
        s->cap_ids = cap;
    }
    s->n_ids = (int32_t)json_integer_value(n);
    for (size_t i = 0; i < nt; i++) {
        json_t *v = json_array_get(t, i);
        if (!json_is_integer(v)) goto done;
        s->ids[s->n_ids++] = (int32_t)json_integer_value(v);
    }
    s->text_bytes = json_integer_value(b);
    if (json_is_string(id)) snprintf(s->id, sizeof s->id, "%s", json_string_value(id));
    if (json_is_integer(cr)) s->created = json_integer_value(cr);
    evbuffer_add_buffer(out, s->held);
    s->seq = s->seq_held;
    s->commented = true;
    rc = 0;
done:
    json_decref(o);
    return rc;
}

/* Appends one data event to held, renumbering its sequence_number on a resumed Responses stream. */
static int hold_event(router_resume *s, const char *ev, size_t len, bool responses) {
    static const char key[] = "\"sequence_number\":";
    const char *k = responses ? memmem(ev, len, key, sizeof key - 1) : NULL;
    if (!k) return evbuffer_add(s->held, ev, len);
    const char *num = k + sizeof key - 1, *end = num;
    while (end < ev + len && *end >= '0' && *end <= '9') end++;
    if (!s->renumber) {
        s->seq_held = strtoll(num, NULL, 10);
        s->seq_seen = true;
        return evbuffer_add(s->held, ev, len);
    }
    s->seq_held = s->seq_seen ? s->seq_held + 1 : 0;
    s->seq_seen = true;
    return evbuffer_add(s->held, ev, (size_t)(num - ev)) ||
                   evbuffer_add_printf(s->held, "%lld", (long long)s->seq_held) < 0 ||
                   evbuffer_add(s->held, end, (size_t)(ev + len - end))
               ? -1
               : 0;
}

int router_resume_feed(router_resume *s, struct evbuffer *in, struct evbuffer *out, bool responses) {
    evbuffer_add_buffer(s->raw, in);
    for (;;) {
        struct evbuffer_ptr at = evbuffer_search(s->raw, "\n\n", 2, NULL);
        if (at.pos < 0) return 0;
        size_t len = (size_t)at.pos + 2;
        const char *ev = (const char *)evbuffer_pullup(s->raw, (ssize_t)len);
        if (!ev) return -1;
        size_t pl = sizeof COMMENT_PREFIX - 1;
        int rc = len > pl && !memcmp(ev, COMMENT_PREFIX, pl) ? commit(s, ev + pl, len - pl - 2, out)
                                                             : hold_event(s, ev, len, responses);
        evbuffer_drain(s->raw, len);
        if (rc) return -1;
    }
}

void router_resume_flush(router_resume *s, struct evbuffer *out) {
    evbuffer_add_buffer(out, s->held);
    evbuffer_add_buffer(out, s->raw);
    s->seq = s->seq_held;
}

void router_resume_rewind(router_resume *s) {
    evbuffer_drain(s->held, evbuffer_get_length(s->held));
    evbuffer_drain(s->raw, evbuffer_get_length(s->raw));
    s->seq_held = s->seq;
    s->renumber = true;
    s->resumes++;
}

char *router_resume_body(const router_resume *s, const char *body, size_t len, size_t *out_len) {
    json_t *root = json_loadb(body, len, 0, NULL), *ids = json_array();
    char *txt = NULL;
    if (!json_is_object(root) || !ids) goto done;
    for (int32_t i = 0; i < s->n_ids; i++)
        if (json_array_append_new(ids, json_integer(s->ids[i]))) goto done;
    json_t *c = json_object_get(root, "cinfer");
    if (!json_is_object(c)) {
        c = json_object();
        if (!c || json_object_set_new(root, "cinfer", c)) goto done;
    }
    json_t *r = json_pack("{s:O, s:I}", "tokens", ids, "text_bytes", (json_int_t)s->text_bytes);
    if (r && s->id[0]) json_object_set_new(r, "id", json_string(s->id));
    if (r && s->created > 0) json_object_set_new(r, "created", json_integer(s->created));
    if (!r || json_object_set_new(c, "resume", r)) goto done;
    txt = json_dumps(root, JSON_COMPACT);
    if (txt) *out_len = strlen(txt);
done:
    json_decref(ids);
    json_decref(root);
    return txt;
}
