/* serve_error.h - the error every serve/ layer reports: an HTTP status plus
 * the fields of OpenAI's error object ({"error":{"message","type","param",
 * "code"}}). Filled by request parsing (api_request.c), the generation core
 * (gen.c) and the server (server.c); formatted by serve_error_json (OpenAI's
 * shape; Anthropic's: api_error_json). Plain data, no resources. */
#ifndef CINFER_SERVE_ERROR_H
#define CINFER_SERVE_ERROR_H

#include <stdarg.h>

typedef struct serve_error {
    int status; /* HTTP status: 400, 401, 404, 413, 429, 500, 503 */
    const char *type; /* "invalid_request_error", "authentication_error", "server_error", ... (static) */
    const char *code; /* "context_length_exceeded", "model_not_found", ... or NULL (static) */
    char param[64]; /* offending request field, "" if none */
    char message[512];
} serve_error;

/* Fills e (if non-NULL) and returns -1. `param` and `code` may be NULL. */
int serve_fail(serve_error *e, int status, const char *type, const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* 400 invalid_request_error naming `param`. Returns -1. */
int serve_bad(serve_error *e, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* {"error":{"message","type","param","code"}} as compact JSON (malloc'd), NULL when out of memory.
 * A message that is not valid UTF-8 (it may quote user input) becomes "invalid request". */
char *serve_error_json(const serve_error *e);

#endif
