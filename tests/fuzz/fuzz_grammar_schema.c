/* fuzz_grammar_schema.c - libFuzzer harness for the JSON Schema compiler and the matcher
 * (src/grammar/): input = schema text, NUL, walk seed (see grammar_fuzz.h). Oracle: every
 * complete walk must be valid JSON (jansson) and, for the schemas whose top-level keywords are
 * only "type" (one name), its value must have that JSON type. Numbers jansson cannot represent
 * (beyond double or json_int_t: valid JSON) are not judged. */
#include <jansson.h>

#include "grammar_fuzz.h"

static int type_ok(const char *type, const json_t *v) {
    if (!strcmp(type, "object")) return json_is_object(v);
    if (!strcmp(type, "array")) return json_is_array(v);
    if (!strcmp(type, "string")) return json_is_string(v);
    if (!strcmp(type, "integer")) return json_is_integer(v);
    if (!strcmp(type, "number")) return json_is_number(v);
    if (!strcmp(type, "boolean")) return json_is_boolean(v);
    if (!strcmp(type, "null")) return json_is_null(v);
    return 1;
}

static int validate(const char *spec, size_t spec_len, const uint8_t *out, size_t len, void *ctx) {
    (void)ctx;
    json_error_t jerr;
    json_t *v = json_loadb((const char *)out, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    /* numbers beyond double / json_int_t are valid JSON that jansson cannot hold: no oracle */
    if (!v) return strstr(jerr.text, "overflow") || strstr(jerr.text, "too big");
    int ok = 1;
    json_t *schema = json_loadb(spec, spec_len, JSON_DECODE_ANY, NULL);
    json_t *type = json_object_get(schema, "type");
    if (json_is_object(schema) && json_object_size(schema) == 1 && json_is_string(type))
        ok = type_ok(json_string_value(type), v);
    json_decref(schema);
    json_decref(v);
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gf_run(CINFER_GRAMMAR_JSON_SCHEMA, data, size, validate, NULL);
    return 0;
}
