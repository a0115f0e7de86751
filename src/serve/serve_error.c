/* serve_error.c - filling serve_error (see serve_error.h). */
#include "serve/serve_error.h"

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
