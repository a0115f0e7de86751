/* test_recipe_guided.c - structured-output request fields in the canonical request: vLLM's
 * guided_* and structured_outputs in every API, Anthropic's output_config.format / output_format,
 * the 400s (naming the field) for bad shapes and for two constraints at once, and the encoders
 * re-emitting them. */
#include <stdio.h>
#include <string.h>

#include "cinfer/recipe.h"
#include "testutil.h"

static const char *const prefix[RECIPE_API_COUNT] = {
    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],",
    "{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],",
    "{\"input\":\"x\",",
};

/* Parses prefix[api] + tail; returns rc, fills err. */
static int parse(recipe_api api, const char *tail, recipe_request *r, recipe_error *err) {
    char body[1024];
    snprintf(body, sizeof body, "%s%s", prefix[api], tail);
    recipe_request_init(r);
    return recipe_request_parse_text(api, body, strlen(body), 0, r, err);
}

static void test_kinds(void) {
    static const struct {
        const char *tail;
        recipe_guided kind;
        const char *field, *text;
    } cases[] = {
        {"\"guided_json\":{\"type\":\"object\"}}", RECIPE_GUIDED_JSON, "guided_json", "{\"type\":\"object\"}"},
        {"\"guided_json\":\"{\\\"type\\\": \\\"integer\\\"}\"}", RECIPE_GUIDED_JSON, "guided_json",
         "{\"type\": \"integer\"}"},
        {"\"guided_regex\":\"[a-z]+\"}", RECIPE_GUIDED_REGEX, "guided_regex", "[a-z]+"},
        {"\"guided_grammar\":\"root ::= \\\"x\\\"\"}", RECIPE_GUIDED_GRAMMAR, "guided_grammar", "root ::= \"x\""},
        {"\"guided_choice\":[\"yes\",\"no\"]}", RECIPE_GUIDED_CHOICE, "guided_choice", NULL},
        {"\"structured_outputs\":{\"json\":{\"type\":\"array\"}}}", RECIPE_GUIDED_JSON, "structured_outputs.json",
         "{\"type\":\"array\"}"},
        {"\"structured_outputs\":{\"regex\":\"a|b\",\"disable_fallback\":true}}", RECIPE_GUIDED_REGEX,
         "structured_outputs.regex", "a|b"},
        {"\"structured_outputs\":{\"choice\":[\"yes\",\"no\"]}}", RECIPE_GUIDED_CHOICE, "structured_outputs.choice",
         NULL},
        {"\"structured_outputs\":{\"grammar\":\"root ::= \\\"x\\\"\"}}", RECIPE_GUIDED_GRAMMAR,
         "structured_outputs.grammar", "root ::= \"x\""},
        {"\"structured_outputs\":{\"json_object\":true}}", RECIPE_GUIDED_JSON_OBJECT, "structured_outputs.json_object",
         NULL},
        {"\"structured_outputs\":{\"json_object\":false}}", RECIPE_GUIDED_NONE, NULL, NULL},
    };
    for (int api = 0; api < RECIPE_API_COUNT; api++)
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            recipe_request r;
            recipe_error err;
            int rc = parse((recipe_api)api, cases[i].tail, &r, &err);
            CHECKF(rc == 0, "%d %s: %s", api, cases[i].tail, err.message);
            CHECKF(r.guided_kind == cases[i].kind, "%d %s: kind %d", api, cases[i].tail, (int)r.guided_kind);
            CHECKF(!cases[i].field || (r.guided_field && !strcmp(r.guided_field, cases[i].field)), "%s", cases[i].tail);
            CHECKF(!cases[i].text || (r.guided_text && !strcmp(r.guided_text, cases[i].text)), "%s: %s", cases[i].tail,
                   r.guided_text ? r.guided_text : "(null)");
            if (cases[i].kind == RECIPE_GUIDED_CHOICE)
                CHECK(r.n_guided_choices == 2 && !strcmp(r.guided_choices[0], "yes") &&
                      !strcmp(r.guided_choices[1], "no"));
            for (int to = 0; to < RECIPE_API_COUNT && rc == 0 && r.guided_kind; to++) { /* every encoder keeps it */
                recipe_buf out = {0};
                CHECK(recipe_request_encode_text((recipe_api)to, &r, &out, &err) == 0);
                recipe_request back;
                recipe_request_init(&back);
                CHECKF(out.data && recipe_request_parse_text((recipe_api)to, out.data, out.len, 0, &back, &err) == 0,
                       "%s", out.data ? out.data : "");
                CHECKF(back.guided_kind == r.guided_kind && !strcmp(back.guided_field, r.guided_field), "%d -> %d: %s",
                       api, to, out.data);
                recipe_request_free(&back);
                recipe_buf_free(&out);
            }
            recipe_request_free(&r);
        }
}

static void test_errors(void) {
    static const struct {
        const char *tail, *param;
    } cases[] = {
        {"\"guided_json\":5}", "guided_json"},
        {"\"guided_json\":\"not json\"}", "guided_json"},
        {"\"guided_json\":\"[1]\"}", "guided_json"},
        {"\"guided_regex\":\"\"}", "guided_regex"},
        {"\"guided_regex\":[\"a\"]}", "guided_regex"},
        {"\"guided_choice\":[]}", "guided_choice"},
        {"\"guided_choice\":[\"a\",1]}", "guided_choice"},
        {"\"guided_grammar\":{}}", "guided_grammar"},
        {"\"guided_regex\":\"a\",\"guided_choice\":[\"a\"]}", "guided_choice"},
        {"\"guided_regex\":\"a\",\"structured_outputs\":{\"json_object\":true}}", "structured_outputs.json_object"},
        {"\"structured_outputs\":{\"regex\":\"a\",\"choice\":[\"a\"]}}", "structured_outputs.choice"},
        {"\"structured_outputs\":{\"whitespace_pattern\":\" \"}}", "structured_outputs.whitespace_pattern"},
        {"\"structured_outputs\":{\"structural_tag\":\"x\"}}", "structured_outputs.structural_tag"},
        {"\"structured_outputs\":{\"disable_fallback\":1}}", "structured_outputs.disable_fallback"},
        {"\"structured_outputs\":[1]}", "structured_outputs"},
        {"\"structured_outputs\":{\"json_object\":\"yes\"}}", "structured_outputs.json_object"},
    };
    for (int api = 0; api < RECIPE_API_COUNT; api++)
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            recipe_request r;
            recipe_error err = {0};
            int rc = parse((recipe_api)api, cases[i].tail, &r, &err);
            CHECKF(rc == -1 && err.kind == RECIPE_ERR_INVALID_REQUEST && !strcmp(err.param, cases[i].param),
                   "%d %s: rc %d param '%s' (%s)", api, cases[i].tail, rc, err.param, err.message);
            recipe_request_free(&r);
        }
}

/* Anthropic: output_config.format and the beta's output_format ({type: json_schema, schema}). */
static void test_messages_format(void) {
    recipe_request r;
    recipe_error err = {0};
    CHECK(parse(RECIPE_API_MESSAGES, "\"output_format\":{\"type\":\"json_schema\",\"schema\":{\"type\":\"object\"}}}",
                &r, &err) == 0);
    CHECK(r.format == RECIPE_FORMAT_JSON_SCHEMA && r.format_schema &&
          !strcmp(r.format_schema, "{\"type\":\"object\"}"));
    recipe_request_free(&r);
    CHECK(parse(RECIPE_API_MESSAGES,
                "\"output_config\":{\"format\":{\"type\":\"json_schema\",\"schema\":{\"type\":\"array\"}}}}", &r,
                &err) == 0);
    CHECK(r.format == RECIPE_FORMAT_JSON_SCHEMA && !strcmp(r.format_schema, "{\"type\":\"array\"}"));
    recipe_request_free(&r);
    static const struct {
        const char *tail, *param;
    } bad[] = {
        {"\"output_format\":{\"type\":\"json_object\"}}", "output_format"},
        {"\"output_format\":{\"type\":\"json_schema\",\"schema\":5}}", "output_format"},
        {"\"output_config\":{\"format\":{\"type\":\"text\"}}}", "output_config.format"},
        {"\"output_config\":{\"format\":{\"type\":\"json_schema\",\"schema\":{}}},"
         "\"output_format\":{\"type\":\"json_schema\",\"schema\":{}}}",
         "output_format"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECKF(parse(RECIPE_API_MESSAGES, bad[i].tail, &r, &err) == -1 && !strcmp(err.param, bad[i].param),
               "%s: param '%s'", bad[i].tail, err.param);
        recipe_request_free(&r);
    }
}

int main(void) {
    test_kinds();
    test_errors();
    test_messages_format();
    return test_finish();
}
