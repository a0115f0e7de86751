/* jsonv.c - a strict JSON validator that accepts exactly what jansson's json_loads
 * (flags 0) accepts: RFC 8259 syntax, valid UTF-8, no \u0000, paired surrogate
 * escapes, integers within int64, finite reals, nesting <= 2048. Used by the
 * text encoders to copy tool-call argument text verbatim instead of parsing and
 * re-serializing it (recipe_internal.h: json_text_is_object). */
#include <errno.h>
#include <stdlib.h>

#include "recipe/recipe_internal.h"

typedef struct {
    const unsigned char *p, *e;
    int depth;
} jv;

static void ws(jv *v) {
    while (v->p < v->e && (*v->p == ' ' || *v->p == '\t' || *v->p == '\n' || *v->p == '\r')) v->p++;
}

static int hex4(const unsigned char *p) {
    int x = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i], d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        x = x * 16 + d;
    }
    return x;
}

static bool str(jv *v) {
    v->p++; /* opening quote */
    while (v->p < v->e) {
        unsigned c = *v->p;
        if (c == '"') {
            v->p++;
            return true;
        }
        if (c < 0x20) return false;
        if (c == '\\') {
            if (v->e - v->p < 2) return false;
            unsigned d = v->p[1];
            if (d == 'u') {
                if (v->e - v->p < 6) return false;
                int u = hex4(v->p + 2);
                if (u <= 0) return false; /* invalid hex or \u0000 */
                v->p += 6;
                if (u >= 0xDC00 && u <= 0xDFFF) return false;
                if (u >= 0xD800 && u <= 0xDBFF) {
                    if (v->e - v->p < 6 || v->p[0] != '\\' || v->p[1] != 'u') return false;
                    int l = hex4(v->p + 2);
                    if (l < 0xDC00 || l > 0xDFFF) return false;
                    v->p += 6;
                }
                continue;
            }
            if (!strchr("\"\\/bfnrt", (int)d) || d == 0) return false;
            v->p += 2;
            continue;
        }
        if (c < 0x80) {
            v->p++;
            continue;
        }
        /* UTF-8 sequence */
        size_t len;
        unsigned min, cp;
        if (c >= 0xC2 && c <= 0xDF) len = 2, min = 0x80;
        else if (c >= 0xE0 && c <= 0xEF) len = 3, min = 0x800;
        else if (c >= 0xF0 && c <= 0xF4) len = 4, min = 0x10000;
        else return false;
        if ((size_t)(v->e - v->p) < len) return false;
        cp = c & (0x3F >> (len - 1));
        for (size_t i = 1; i < len; i++) {
            if ((v->p[i] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (v->p[i] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        v->p += len;
    }
    return false;
}

static bool num(jv *v) {
    const unsigned char *s = v->p;
    bool real = false;
    if (v->p < v->e && *v->p == '-') v->p++;
    if (v->p >= v->e) return false;
    if (*v->p == '0') v->p++;
    else if (*v->p >= '1' && *v->p <= '9')
        while (v->p < v->e && *v->p >= '0' && *v->p <= '9') v->p++;
    else return false;
    if (v->p < v->e && *v->p == '.') {
        real = true;
        v->p++;
        if (v->p >= v->e || *v->p < '0' || *v->p > '9') return false;
        while (v->p < v->e && *v->p >= '0' && *v->p <= '9') v->p++;
    }
    if (v->p < v->e && (*v->p == 'e' || *v->p == 'E')) {
        real = true;
        v->p++;
        if (v->p < v->e && (*v->p == '+' || *v->p == '-')) v->p++;
        if (v->p >= v->e || *v->p < '0' || *v->p > '9') return false;
        while (v->p < v->e && *v->p >= '0' && *v->p <= '9') v->p++;
    }
    char tmp[64];
    size_t n = (size_t)(v->p - s);
    if (n >= sizeof tmp) {
        /* long numbers: only integers can overflow int64 this way; reals of that length are rare */
        if (!real) return false;
        return true;
    }
    memcpy(tmp, s, n);
    tmp[n] = 0;
    errno = 0;
    if (real) {
        double d = strtod(tmp, NULL);
        if (errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL)) return false;
    } else {
        (void)strtoll(tmp, NULL, 10);
        if (errno == ERANGE) return false;
    }
    return true;
}

static bool value(jv *v);

static bool lit(jv *v, const char *w, size_t n) {
    if ((size_t)(v->e - v->p) < n || memcmp(v->p, w, n)) return false;
    v->p += n;
    return true;
}

static bool value(jv *v) {
    ws(v);
    if (v->p >= v->e) return false;
    switch (*v->p) {
    case '{':
    case '[': {
        bool obj = *v->p == '{';
        char close = obj ? '}' : ']';
        if (++v->depth > 2048) return false;
        v->p++;
        ws(v);
        if (v->p < v->e && *v->p == close) {
            v->p++;
            v->depth--;
            return true;
        }
        for (;;) {
            if (obj) {
                ws(v);
                if (v->p >= v->e || *v->p != '"' || !str(v)) return false;
                ws(v);
                if (v->p >= v->e || *v->p != ':') return false;
                v->p++;
            }
            if (!value(v)) return false;
            ws(v);
            if (v->p >= v->e) return false;
            if (*v->p == ',') {
                v->p++;
                continue;
            }
            if (*v->p != close) return false;
            v->p++;
            v->depth--;
            return true;
        }
    }
    case '"': return str(v);
    case 't': return lit(v, "true", 4);
    case 'f': return lit(v, "false", 5);
    case 'n': return lit(v, "null", 4);
    default: return num(v);
    }
}

bool json_text_is_object(const char *s, size_t n) {
    jv v = {(const unsigned char *)s, (const unsigned char *)s + n, 0};
    ws(&v);
    if (v.p >= v.e || *v.p != '{') return false;
    if (!value(&v)) return false;
    ws(&v);
    return v.p == v.e;
}
