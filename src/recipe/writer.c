/* writer.c - the two backends of the JSON writer (see writer.h). */
#include <stdio.h>
#include <stdlib.h>

#include "recipe/writer.h"

void rw_init_text(rw *w, recipe_buf *out) {
    memset(w, 0, sizeof *w);
    w->buf = out;
}

void rw_init_tree(rw *w) { memset(w, 0, sizeof *w); }

json_t *rw_finish(rw *w) {
    if (w->buf) return NULL;
    json_t *r = w->root;
    w->root = NULL;
    if (w->failed || w->depth != 0) {
        json_decref(r);
        while (w->depth > 0) json_decref(w->stack[--w->depth]);
        return NULL;
    }
    return r;
}

/* TEXT: room for `extra` more bytes (+ the NUL) in the buffer; false (and failed set) when out of memory */
static inline bool text_room(rw *w, size_t extra) {
    recipe_buf *b = w->buf;
    if (b->cap - b->len > extra) return true;
    if (rb_reserve(b, extra)) {
        w->failed = true;
        return false;
    }
    return true;
}

/* TEXT: one punctuation byte (the NUL after it is kept by the next write or rw_finish's caller) */
static inline void text_byte(rw *w, char c) {
    if (!text_room(w, 1)) return;
    recipe_buf *b = w->buf;
    b->data[b->len++] = c;
    b->data[b->len] = 0;
}

/* TEXT: separator and key before a value */
static inline void text_prefix(rw *w) {
    if (w->depth > 0) {
        bool sep = !w->first[w->depth - 1];
        w->first[w->depth - 1] = false;
        /* keys are ASCII literals from the encoders: no escaping needed */
        size_t kl = w->key ? w->keylen : 0;
        if (text_room(w, kl + 5)) {
            char *d = w->buf->data + w->buf->len;
            if (sep) *d++ = ',';
            if (w->key) {
                d[0] = '"';
                memcpy(d + 1, w->key, kl);
                d[kl + 1] = '"';
                d[kl + 2] = ':';
                d += kl + 3;
            }
            *d = 0;
            w->buf->len = (size_t)(d - w->buf->data);
        }
    }
    w->key = NULL;
}

/* TREE: attach a new value (stolen) to the open container or make it the root */
static void tree_put(rw *w, json_t *v) {
    if (!v) {
        w->failed = true;
        w->key = NULL;
        return;
    }
    if (w->depth == 0) {
        json_decref(w->root);
        w->root = v;
    } else {
        json_t *c = w->stack[w->depth - 1];
        if (json_is_object(c)) {
            if (json_object_set_new_nocheck(c, w->key ? w->key : "", v)) w->failed = true;
        } else if (json_array_append_new(c, v)) w->failed = true;
    }
    w->key = NULL;
}

static void open_container(rw *w, bool obj) {
    if (w->depth >= RW_MAX_DEPTH) {
        w->failed = true;
        return;
    }
    if (w->buf) {
        text_prefix(w);
        text_byte(w, obj ? '{' : '[');
        w->is_obj[w->depth] = obj;
        w->first[w->depth++] = true;
        return;
    }
    json_t *c = obj ? json_object() : json_array();
    if (!c) {
        w->failed = true;
        return;
    }
    json_incref(c);
    tree_put(w, c); /* the parent (or root) holds one reference, the stack another */
    w->stack[w->depth++] = c;
}

void rw_obj(rw *w) { open_container(w, true); }
void rw_arr(rw *w) { open_container(w, false); }

void rw_end(rw *w) {
    if (w->depth <= 0) {
        w->failed = true;
        return;
    }
    w->depth--;
    if (w->buf) {
        text_byte(w, w->is_obj[w->depth] ? '}' : ']');
        return;
    }
    json_decref(w->stack[w->depth]);
}

void rw_strn(rw *w, const char *s, size_t n) {
    if (w->buf) {
        text_prefix(w);
        w->failed |= rb_json_str(w->buf, s, n) != 0;
        return;
    }
    json_t *v = json_stringn(s, n); /* validates: invalid UTF-8 fails rather than corrupting */
    tree_put(w, v);
}

void rw_str(rw *w, const char *s) {
    if (!s) {
        rw_null(w);
        return;
    }
    size_t n = strlen(s);
    if (w->buf && rj_pool_clean(&w->clean, s)) { /* read without escapes: its JSON form is itself */
        text_prefix(w);
        if (!text_room(w, n + 2)) return;
        char *d = w->buf->data + w->buf->len;
        d[0] = '"';
        memcpy(d + 1, s, n);
        d[n + 1] = '"';
        d[n + 2] = 0;
        w->buf->len += n + 2;
        return;
    }
    rw_strn(w, s, n);
}

void rw_int(rw *w, int64_t v) {
    if (w->buf) {
        text_prefix(w);
        w->failed |= rb_int(w->buf, v) != 0;
        return;
    }
    tree_put(w, json_integer((json_int_t)v));
}

void rw_real(rw *w, double v) {
    if (v == (double)(int64_t)v && fabs(v) < 1e15) {
        rw_int(w, (int64_t)v);
        return;
    }
    if (w->buf) {
        text_prefix(w);
        /* common case: at most 6 decimals, |v| < 1e9; scaled / 1e6 is correctly rounded, so it
         * equals v exactly iff the short decimal text reads back as v */
        double sc = v * 1e6, r = nearbyint(sc);
        if (fabs(v) < 1e9 && r / 1e6 == v) {
            int64_t iv = (int64_t)r, ip = (iv < 0 ? -iv : iv) / 1000000, fp = (iv < 0 ? -iv : iv) % 1000000;
            char tmp[40], *d = tmp, num[24], *e = num + sizeof num, *q = e;
            if (iv < 0) *d++ = '-';
            do *--q = (char)('0' + ip % 10), ip /= 10;
            while (ip);
            memcpy(d, q, (size_t)(e - q));
            d += e - q;
            *d++ = '.';
            int digits = 6;
            while (digits > 1 && fp % 10 == 0) fp /= 10, digits--;
            for (int k = digits - 1; k >= 0; k--) d[k] = (char)('0' + fp % 10), fp /= 10;
            d += digits;
            w->failed |= rb_put(w->buf, tmp, (size_t)(d - tmp)) != 0;
            return;
        }
        w->failed |= rb_real(w->buf, v) != 0;
        return;
    }
    tree_put(w, json_real(v));
}

void rw_bool(rw *w, bool v) {
    if (w->buf) {
        text_prefix(w);
        w->failed |= rb_puts(w->buf, v ? "true" : "false") != 0;
        return;
    }
    tree_put(w, json_boolean(v));
}

void rw_null(rw *w) {
    if (w->buf) {
        text_prefix(w);
        w->failed |= rb_puts(w->buf, "null") != 0;
        return;
    }
    tree_put(w, json_null());
}

void rw_raw(rw *w, const char *json_text) {
    if (!json_text) {
        rw_null(w);
        return;
    }
    if (w->buf) {
        text_prefix(w);
        w->failed |= rb_puts(w->buf, json_text) != 0;
        return;
    }
    json_t *v = raw_json(json_text);
    if (!v) {
        w->failed = true;
        return;
    }
    tree_put(w, v);
}

void rw_args_object(rw *w, const char *args) {
    size_t n = args ? strlen(args) : 0;
    if (w->buf && args && rj_text_is_object(args, n)) {
        text_prefix(w);
        w->failed |= rb_put(w->buf, args, n) != 0;
        return;
    }
    json_t *o = args_to_object(args);
    if (w->buf) {
        text_prefix(w);
        w->failed |= rb_json(w->buf, o) != 0;
        json_decref(o);
        return;
    }
    tree_put(w, o);
}
