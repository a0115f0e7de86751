/* api_tokenize.c - the request bodies of vLLM's POST /tokenize and POST /detokenize (see api.h).
 *
 * /tokenize: {"prompt": text, "add_special_tokens": bool} or {"messages": [...],
 * "add_generation_prompt": bool} (+ optional "model"). The messages form is a Chat message list:
 * it is parsed by recipe's Chat parser into a canonical request that the chat template reads, as
 * for POST /v1/chat/completions; the few top-level fields of these vLLM endpoints are read with
 * jansson. /detokenize: {"tokens": [ids in the vocabulary]}.
 * Invariants: on success *prompt is set for the prompt form, req holds messages otherwise; every id is in [0, n_vocab);
 * a wrong type is a 400 naming the field, never ignored. Pure: no model, no network. */
#include <stdlib.h>
#include <string.h>

#include "serve/api.h"

static int oom(serve_error *e) { return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory"); }

static json_t *load(const char *body, size_t len, serve_error *err) {
    json_error_t je;
    json_t *root = json_loadb(body, len, 0, &je);
    if (!root) {
        serve_bad(err, NULL, "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        serve_bad(err, NULL, "the body must be a JSON object");
        return NULL;
    }
    return root;
}

/* Optional boolean / string members: absent or null keep the default. */
static int get_bool(const json_t *o, const char *key, bool *out, serve_error *err) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return serve_bad(err, key, "'%s' must be a boolean", key);
    *out = json_is_true(v);
    return 0;
}

static int get_model(const json_t *o, char **out, serve_error *err) {
    const json_t *v = json_object_get(o, "model");
    if (!v || json_is_null(v)) return 0;
    if (!json_is_string(v)) return serve_bad(err, "model", "'model' must be a string");
    return (*out = strdup(json_string_value(v))) ? 0 : oom(err);
}

/* The body's Chat message list into *req (recipe's Chat parser; the other Chat fields it
 * accepts are ignored here, as vLLM's /tokenize does). */
static int tokenize_messages(const char *body, size_t len, recipe_request *req, serve_error *err) {
    recipe_error re = {0};
    if (recipe_request_parse_text(RECIPE_API_CHAT, body, len, 0, req, &re))
        return serve_bad(err, re.param[0] ? re.param : NULL, "%s", re.message);
    return api_check_text_only(req, err);
}

int api_tokenize_parse(const char *body, size_t len, char **prompt, size_t *prompt_len, recipe_request *req,
                       bool *add_special, char **model, serve_error *err) {
    *prompt = NULL;
    *model = NULL;
    *add_special = true;
    json_t *root = load(body, len, err);
    if (!root) return -1;
    const json_t *pr = json_object_get(root, "prompt"), *msgs = json_object_get(root, "messages");
    int rc = get_model(root, model, err);
    if (!rc && json_is_string(pr) && !msgs) {
        rc = get_bool(root, "add_special_tokens", add_special, err);
        *prompt_len = json_string_length(pr);
        if (!rc && !(*prompt = malloc(*prompt_len + 1))) rc = oom(err);
        if (!rc) memcpy(*prompt, json_string_value(pr), *prompt_len + 1);
    } else if (!rc && json_is_array(msgs) && json_array_size(msgs) > 0 && !pr) {
        rc = get_bool(root, "add_generation_prompt", add_special, err);
        if (!rc) rc = tokenize_messages(body, len, req, err);
    } else if (!rc) {
        rc = serve_bad(err, NULL, "give either 'prompt' (a string) or 'messages' (a non-empty array)");
    }
    json_decref(root);
    if (rc) {
        free(*prompt);
        *prompt = NULL;
        free(*model);
        *model = NULL;
        return -1;
    }
    return 0;
}

int api_detokenize_parse(const char *body, size_t len, int32_t n_vocab, int32_t **ids, int32_t *n_ids, char **model,
                         serve_error *err) {
    *ids = NULL;
    *n_ids = 0;
    *model = NULL;
    json_t *root = load(body, len, err);
    if (!root) return -1;
    const json_t *t = json_object_get(root, "tokens");
    int rc = get_model(root, model, err);
    size_t k = json_array_size(t);
    if (!rc && !json_is_array(t)) rc = serve_bad(err, "tokens", "'tokens' must be an array of token ids");
    else if (!rc && k > (size_t)INT32_MAX / 4) rc = serve_bad(err, "tokens", "'tokens' is too long");
    else if (!rc && k && !(*ids = malloc(k * sizeof **ids))) rc = oom(err);
    for (size_t i = 0; !rc && i < k; i++) {
        const json_t *x = json_array_get(t, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= n_vocab)
            rc = serve_bad(err, "tokens", "'tokens' must hold token ids in [0, %d)", n_vocab);
        else (*ids)[i] = (int32_t)json_integer_value(x);
    }
    if (!rc) *n_ids = (int32_t)k;
    json_decref(root);
    if (rc) {
        free(*ids);
        *ids = NULL;
        free(*model);
        *model = NULL;
    }
    return rc;
}
