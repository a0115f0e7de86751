/* structured.c - request -> grammar spec (see structured.h). The JSON compositions (a forced call's
 * {"name", "arguments"} object over several tools) are built with jansson from the tools' schema
 * texts; schema keywords are not checked here - the grammar compiler refuses what it cannot
 * enforce, naming the keyword (400 through gen.c, param = the field recorded in the spec). */
#include "serve/structured.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void structured_spec_free(structured_spec *s) {
    free(s->text);
    memset(s, 0, sizeof *s);
}

static int oom(serve_error *e) { return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory"); }

static int set_spec(structured_spec *s, cinfer_grammar_kind kind, const char *text, size_t len, const char *param,
                    serve_error *err) {
    s->kind = kind;
    snprintf(s->param, sizeof s->param, "%s", param);
    if (!text) return 0;
    if (!(s->text = malloc(len + 1))) return oom(err);
    memcpy(s->text, text, len);
    s->text[len] = 0;
    s->len = len;
    return 0;
}

static const char *format_param(recipe_api api) {
    return api == RECIPE_API_MESSAGES    ? "output_config.format"
           : api == RECIPE_API_RESPONSES ? "text.format.schema"
                                         : "response_format.json_schema.schema";
}

/* guided_choice's strings as the JSON array the CHOICE kind takes. */
static int choice_spec(const recipe_request *r, structured_spec *s, serve_error *err) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < r->n_guided_choices; i++)
        if (json_array_append_new(a, json_string(r->guided_choices[i]))) json_decref(a), a = NULL;
    char *t = a ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    if (!t) return oom(err);
    int rc = set_spec(s, CINFER_GRAMMAR_CHOICE, t, strlen(t), r->guided_field, err);
    free(t);
    return rc;
}

int structured_from_request(const recipe_request *r, recipe_api api, structured_spec *s, serve_error *err) {
    memset(s, 0, sizeof *s);
    bool fmt = r->format == RECIPE_FORMAT_JSON_OBJECT || r->format == RECIPE_FORMAT_JSON_SCHEMA;
    if (fmt && r->guided_kind != RECIPE_GUIDED_NONE)
        return serve_bad(err, r->guided_field, "'%s' and '%s' both ask for structured output; give only one",
                         r->guided_field,
                         api == RECIPE_API_MESSAGES    ? "output_config.format"
                         : api == RECIPE_API_RESPONSES ? "text.format"
                                                       : "response_format");
    if (r->format == RECIPE_FORMAT_JSON_OBJECT)
        return set_spec(s, CINFER_GRAMMAR_JSON_OBJECT, NULL, 0,
                        api == RECIPE_API_RESPONSES ? "text.format" : "response_format", err);
    if (r->format == RECIPE_FORMAT_JSON_SCHEMA) {
        if (!r->format_schema) return serve_bad(err, format_param(api), "the JSON schema format has no schema");
        return set_spec(s, CINFER_GRAMMAR_JSON_SCHEMA, r->format_schema, strlen(r->format_schema), format_param(api),
                        err);
    }
    switch (r->guided_kind) {
    case RECIPE_GUIDED_JSON:
        return set_spec(s, CINFER_GRAMMAR_JSON_SCHEMA, r->guided_text, strlen(r->guided_text), r->guided_field, err);
    case RECIPE_GUIDED_REGEX:
        return set_spec(s, CINFER_GRAMMAR_REGEX, r->guided_text, strlen(r->guided_text), r->guided_field, err);
    case RECIPE_GUIDED_GRAMMAR:
        return set_spec(s, CINFER_GRAMMAR_GBNF, r->guided_text, strlen(r->guided_text), r->guided_field, err);
    case RECIPE_GUIDED_JSON_OBJECT: return set_spec(s, CINFER_GRAMMAR_JSON_OBJECT, NULL, 0, r->guided_field, err);
    case RECIPE_GUIDED_CHOICE: return choice_spec(r, s, err);
    default: return 0;
    }
}

/* Where the API spells tool i's schema (compile errors name it). */
static void tool_param(recipe_api api, int i, char *out, size_t cap) {
    if (i < 0) snprintf(out, cap, "tools");
    else if (api == RECIPE_API_MESSAGES) snprintf(out, cap, "tools[%d].input_schema", i);
    else if (api == RECIPE_API_RESPONSES) snprintf(out, cap, "tools[%d].parameters", i);
    else snprintf(out, cap, "tools[%d].function.parameters", i);
}

/* Tool t's parameters schema as a new JSON value ({"type":"object"} when it has none). */
static json_t *tool_schema(const recipe_tool *t, const char *param, serve_error *err) {
    json_t *v = t->parameters ? json_loads(t->parameters, JSON_DECODE_ANY, NULL) : json_pack("{s:s}", "type", "object");
    if (!v && t->parameters) serve_bad(err, param, "'%s' is not valid JSON", param);
    else if (!v) oom(err);
    return v;
}

/* {"type":"object","properties":{"name":{"const":N},ARGS:schema},"required":["name",ARGS],
 *  "additionalProperties":false} for one tool (any_args: ARGS any JSON object, not its schema). */
static json_t *call_branch(const recipe_tool *t, const char *args_key, bool any_args, const char *param,
                           serve_error *err) {
    json_t *schema = any_args ? json_pack("{s:s}", "type", "object") : tool_schema(t, param, err);
    if (!schema && any_args) oom(err);
    if (!schema) return NULL;
    json_t *b =
        json_pack("{s:s, s:{s:{s:s}, s:o}, s:[s,s], s:b}", "type", "object", "properties", "name", "const",
                  t->name ? t->name : "", args_key, schema, "required", "name", args_key, "additionalProperties", 0);
    if (!b) oom(err);
    return b;
}

static int tool_call_spec(const recipe_request *r, recipe_api api, int tool, structured_call_shape shape, bool any_args,
                          structured_spec *s, serve_error *err) {
    memset(s, 0, sizeof *s);
    char param[64];
    tool_param(api, tool, param, sizeof param);
    json_t *g = NULL;
    if (shape == STRUCTURED_CALL_ARGS) {
        if (tool < 0 || (size_t)tool >= r->n_tools) return serve_bad(err, "tool_choice", "no tool to call");
        g = tool_schema(&r->tools[tool], param, err);
    } else {
        json_t *any = json_array();
        const char *key = shape == STRUCTURED_CALL_OBJECT_PARAMS ? "parameters" : "arguments";
        for (size_t i = 0; any && i < r->n_tools; i++) {
            if (tool >= 0 && (int)i != tool) continue;
            char p[64];
            tool_param(api, (int)i, p, sizeof p);
            json_t *b = call_branch(&r->tools[i], key, any_args && r->tools[i].strict != 1, p, err);
            if (!b || json_array_append_new(any, b)) {
                json_decref(any);
                return -1;
            }
        }
        g = !any ? NULL : tool >= 0 ? json_incref(json_array_get(any, 0)) : json_pack("{s:O}", "anyOf", any);
        json_decref(any);
        if (g && shape == STRUCTURED_CALL_ARRAY)
            g = json_pack("{s:s, s:o, s:i, s:i}", "type", "array", "items", g, "minItems", 1, "maxItems", 1);
        if (!g) return oom(err);
    }
    if (!g) return -1;
    char *text = json_dumps(g, JSON_COMPACT);
    json_decref(g);
    if (!text) return oom(err);
    int rc = set_spec(s, CINFER_GRAMMAR_JSON_SCHEMA, text, strlen(text), param, err);
    free(text);
    return rc;
}

int structured_tool_call(const recipe_request *r, recipe_api api, int tool, structured_call_shape shape,
                         structured_spec *s, serve_error *err) {
    return tool_call_spec(r, api, tool, shape, false, s, err);
}

int structured_strict_tools(const recipe_request *r, recipe_api api, recipe_parser_kind kind, structured_spec *s,
                            serve_error *err) {
    memset(s, 0, sizeof *s);
    int strict = -1;
    for (size_t i = 0; i < r->n_tools && strict < 0; i++)
        if (r->tools[i].strict == 1) strict = (int)i;
    if (strict < 0 || r->tool_choice == RECIPE_TOOL_CHOICE_NONE) return 0;
    char param[64];
    snprintf(param, sizeof param, api == RECIPE_API_CHAT ? "tools[%d].function.strict" : "tools[%d].strict", strict);
    if (r->format == RECIPE_FORMAT_JSON_OBJECT || r->format == RECIPE_FORMAT_JSON_SCHEMA || r->guided_kind)
        return serve_bad(err, param,
                         "strict tools with tool_choice auto cannot be combined with another structured "
                         "output (a format or guided_* field)");
    if (kind != RECIPE_PARSER_HERMES)
        return serve_bad(err, param,
                         "strict tools with tool_choice auto are enforced for the Hermes tool-call format only (output "
                         "parser '%s'); use tool_choice required or a named tool, or strict false",
                         recipe_parser_name(kind));
    if (tool_call_spec(r, api, -1, STRUCTURED_CALL_OBJECT, true, s, err)) return -1;
    s->trigger = "<tool_call>";
    return 0;
}
