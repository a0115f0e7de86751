/* recipe_json.h - recipe's jansson-typed entry points (internal: the public header
 * include/cinfer/recipe.h has no jansson types). For callers inside the repository that hold or
 * want a JSON tree: the codec tests and fuzzers, the benchmarks, the Python bindings (python/),
 * and the codecs themselves. Same contracts as the text functions of recipe.h; every json_t
 * returned is a new reference (caller decrefs), NULL + err on failure. */
#ifndef CINFER_RECIPE_JSON_H
#define CINFER_RECIPE_JSON_H

#include <jansson.h>

#include "cinfer/recipe.h"

/* The API's own error body: OpenAI {"error":{message,type,param,code}} (Chat and
 * Responses), Anthropic {"type":"error","error":{type,message}} (+ "request_id" when
 * request_id is non-NULL). New reference. */
json_t *recipe_error_body(recipe_api api, const recipe_error *e, const char *request_id);

/* recipe_request_parse_text from a jansson value (serialized, then parsed as text). */
int recipe_request_parse(recipe_api api, const json_t *body, recipe_request *out, recipe_error *err);

/* Encodes a canonical request as `api`'s request body. New reference, or NULL + err
 * (e.g. no messages). Lossy cases: docs/recipe.md. */
json_t *recipe_request_encode(recipe_api api, const recipe_request *req, recipe_error *err);

/* Debug/introspection: the canonical request as JSON (field names as in the struct). */
json_t *recipe_request_dump(const recipe_request *req);

/* Response bodies from a jansson value (serialized first). */
int recipe_response_parse(recipe_api api, const json_t *body, recipe_response *out, recipe_error *err);

/* `req` (may be NULL) supplies the settings the Responses object echoes (instructions,
 * tools, temperature, ...). New reference or NULL + err. */
json_t *recipe_response_encode(recipe_api api, const recipe_response *resp, const recipe_request *req,
                               recipe_error *err);

#endif
