/* fuzz_recipe_codec.c - libFuzzer harness for the recipe protocol codecs.
 * The first byte picks the API (and request vs response); the rest is the body
 * text, parsed by recipe's own reader (recipe_*_parse_text). Requests: the text
 * path and the jansson-tree path (json_loadb + recipe_request_parse) must agree
 * (both accept with the same text encoding, or both reject); a parsed request is
 * encoded to all three formats (tree and text encoders agree) and each result
 * parsed again in its own format; a parsed response is encoded to all formats; a
 * rejected input must give a NUL-terminated message and an error body of the
 * API's shape. Nothing may crash, leak or trip a sanitizer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/recipe.h"
#include "recipe/recipe_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    recipe_api api = (recipe_api)(data[0] % 3);
    bool response = data[0] & 4;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    json_t *j = json_loadb(text, len, 0, NULL);
    recipe_error err;
    if (response) {
        recipe_response r;
        recipe_response_init(&r);
        if (recipe_response_parse_text(api, text, len, &r, &err) == 0) {
            for (int a = 0; a < 3; a++) json_decref(recipe_response_encode((recipe_api)a, &r, NULL, &err));
        }
        recipe_response_free(&r);
    } else {
        recipe_request r, rt;
        recipe_request_init(&r);
        recipe_request_init(&rt);
        int rc = recipe_request_parse_text(api, text, len, 0, &r, &err);
        recipe_error err_t;
        int rct = j ? recipe_request_parse(api, j, &rt, &err_t) : -1;
        /* the text and tree entry points agree (except that jansson skips a NUL byte after a
         * number, which recipe's reader rejects: tests/unit/recipe/rjson_oracle.h) */
        if (j && rc != rct && !memchr(text, 0, len)) abort();
        if (rc == 0 && rct == 0) {
            recipe_buf a = {0}, b = {0};
            if (recipe_request_encode_text(RECIPE_API_CHAT, &r, &a, &err) == 0 &&
                recipe_request_encode_text(RECIPE_API_CHAT, &rt, &b, &err) == 0) {
                /* the same JSON (opaque values keep their source escapes on the text path) */
                json_t *ja = json_loadb(a.data, a.len, 0, NULL), *jb = json_loadb(b.data, b.len, 0, NULL);
                if (!json_equal(ja, jb)) abort();
                json_decref(ja);
                json_decref(jb);
            }
            recipe_buf_free(&a);
            recipe_buf_free(&b);
        }
        recipe_request_free(&rt);
        if (rc == 0) {
            for (int a = 0; a < 3; a++) {
                json_t *o = recipe_request_encode((recipe_api)a, &r, &err);
                recipe_buf tb = {0};
                int trc = recipe_request_encode_text((recipe_api)a, &r, &tb, &err);
                if (o && trc == 0) { /* both encoders agree */
                    json_t *tj = json_loadb(tb.data, tb.len, 0, NULL);
                    if (!json_equal(tj, o)) abort();
                    json_decref(tj);
                }
                recipe_buf_free(&tb);
                if (!o) continue;
                recipe_request r2;
                recipe_request_init(&r2);
                (void)recipe_request_parse((recipe_api)a, o, &r2, &err);
                recipe_request_free(&r2);
                json_decref(o);
            }
            json_decref(recipe_request_dump(&r));
            for (int a = 0; a < 3; a++)
                json_decref(recipe_response_encode((recipe_api)a, &(recipe_response){0}, &r, &err));
        } else {
            if (!memchr(err.message, 0, sizeof err.message)) abort();
            json_t *b = recipe_error_body(api, &err, "req");
            if (!b) abort();
            json_decref(b);
        }
        recipe_request_free(&r);
    }
    json_decref(j);
    return 0;
}
