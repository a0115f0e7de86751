/* serve_error.c - filling and formatting serve_error (see serve_error.h). */
#include "serve/serve_error.h"

#include <jansson.h>
#include <stdio.h>

static int serve_vfail(serve_error *e, int status, const char *type, const char *code, const char *param,
                       const char *fmt, va_list ap) {
    if (!e) return -1;
    e->status = status;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    return -1;
}

int serve_fail(serve_error *e, int status, const char *type, const char *code, const char *param, const char *fmt,
               ...) {
    va_list ap;
    va_start(ap, fmt);
    serve_vfail(e, status, type, code, param, fmt, ap);
    va_end(ap);
    return -1;
}

int serve_bad(serve_error *e, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    serve_vfail(e, 400, "invalid_request_error", NULL, param, fmt, ap);
    va_end(ap);
    return -1;
}

char *serve_error_json(const serve_error *e) {
    json_t *err = json_pack("{s:s, s:s, s:o, s:o}", "message", e->message, "type", e->type ? e->type : "server_error",
                            "param", e->param[0] ? json_string(e->param) : json_null(), "code",
                            e->code ? json_string(e->code) : json_null());
    if (!err) /* message not UTF-8 (it quotes user input): dropped */
        err = json_pack("{s:s, s:s, s:n, s:n}", "message", "invalid request", "type",
                        e->type ? e->type : "server_error", "param", "code");
    json_t *o = err ? json_pack("{s:o}", "error", err) : NULL;
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (o) json_decref(o);
    return s;
}
