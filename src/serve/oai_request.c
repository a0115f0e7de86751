/* oai_request.c - OpenAI request parsing and validation (see oai_request.h).
 *
 * Ranges follow OpenAI's API reference, and vLLM's where OpenAI is silent:
 * temperature [0, 2], top_p (0, 1], presence/frequency penalty [-2, 2],
 * logit_bias values [-100, 100] keyed by token-id strings, top_logprobs
 * [0, 20] (needs logprobs), stop: a string or up to 16 strings (empty ones
 * are ignored), n [1, max_n], max_tokens / max_completion_tokens >= 1 (the
 * latter wins), seed any integer, top_k -1/0 (off) or >= 1, min_p [0, 1],
 * repetition_penalty (0, 10], cache_salt a non-empty string, priority an
 * integer (lower = scheduled first, as vLLM).
 * stream_options is only allowed with stream = true (as vLLM).
 * Chat content parts: "text" parts are concatenated; image/audio/file parts
 * are rejected (the models served are text-only). Role "developer" is
 * passed to the template as "system". */
#include "serve/oai_request.h"
#include "serve/traffic.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STOP 16
#define MAX_STOP_LEN 1024
#define MAX_BIAS 1024

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

/* absent or null -> 0 (default kept); wrong type or out of range -> -1 */
static int get_num(const json_t *o, const char *key, double lo, double hi, bool lo_open, float *out,
                   serve_error *err) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return serve_bad(err, key, "'%s' must be a number", key);
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi) || (lo_open && d <= lo))
        return serve_bad(err, key, "'%s' must be in %c%g, %g], got %g", key, lo_open ? '(' : '[', lo, hi, d);
    *out = (float)d;
    return 0;
}

static int get_int(const json_t *o, const char *key, long long lo, long long hi, long long *out, bool *present,
                   serve_error *err) {
    const json_t *v = json_object_get(o, key);
    if (present) *present = false;
    if (!v || json_is_null(v)) return 0;
    long long x;
    if (json_is_integer(v)) x = json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) && fabs(json_real_value(v)) < 9e18)
        x = (long long)json_real_value(v);
    else return serve_bad(err, key, "'%s' must be an integer", key);
    if (x < lo || x > hi) return serve_bad(err, key, "'%s' must be in [%lld, %lld], got %lld", key, lo, hi, x);
    *out = x;
    if (present) *present = true;
    return 0;
}

static int get_bool(const json_t *o, const char *key, bool *out, serve_error *err) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return serve_bad(err, key, "'%s' must be a boolean", key);
    *out = json_is_true(v);
    return 0;
}

/* Optional string: absent/null leaves *out NULL. */
static int get_str(const json_t *o, const char *key, char **out, serve_error *err) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_string(v)) return serve_bad(err, key, "'%s' must be a string", key);
    if (!(*out = strdup(json_string_value(v)))) return serve_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    return 0;
}

static int oom(serve_error *err) { return serve_fail(err, 500, "server_error", NULL, NULL, "out of memory"); }

static int parse_stop(const json_t *o, gen_params *p, serve_error *err) {
    const json_t *v = json_object_get(o, "stop");
    if (!v || json_is_null(v)) return 0;
    size_t n = json_is_string(v) ? 1 : json_is_array(v) ? json_array_size(v) : 0;
    if (!json_is_string(v) && !json_is_array(v)) return serve_bad(err, "stop", "'stop' must be a string or an array of strings");
    if (n > MAX_STOP) return serve_bad(err, "stop", "'stop' has %zu strings; at most %d are allowed", n, MAX_STOP);
    if (n == 0) return 0;
    p->stop = calloc(n, sizeof *p->stop);
    if (!p->stop) return oom(err);
    for (size_t i = 0; i < n; i++) {
        const json_t *s = json_is_string(v) ? v : json_array_get(v, i);
        if (!json_is_string(s)) return serve_bad(err, "stop", "'stop' must be a string or an array of strings");
        size_t len = json_string_length(s);
        if (len > MAX_STOP_LEN) return serve_bad(err, "stop", "a stop string is longer than %d bytes", MAX_STOP_LEN);
        if (len == 0) continue;
        if (!(p->stop[p->n_stop] = strdup(json_string_value(s)))) return oom(err);
        p->n_stop++;
    }
    return 0;
}

static int parse_bias(const json_t *o, const oai_limits *lim, gen_params *p, serve_error *err) {
    const json_t *v = json_object_get(o, "logit_bias");
    if (!v || json_is_null(v)) return 0;
    if (!json_is_object(v)) return serve_bad(err, "logit_bias", "'logit_bias' must be an object {token id: bias}");
    size_t n = json_object_size(v);
    if (n > MAX_BIAS) return serve_bad(err, "logit_bias", "'logit_bias' has %zu entries; at most %d are allowed", n, MAX_BIAS);
    if (n == 0) return 0;
    p->bias = calloc(n, sizeof *p->bias);
    if (!p->bias) return oom(err);
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)v, key, val) {
        char *end;
        errno = 0;
        long id = strtol(key, &end, 10);
        if (!*key || *end || errno || id < 0 || id >= lim->n_vocab)
            return serve_bad(err, "logit_bias", "'logit_bias' key '%.40s' is not a token id in [0, %d)", key, lim->n_vocab);
        if (!json_is_number(val)) return serve_bad(err, "logit_bias", "'logit_bias' values must be numbers");
        double b = json_number_value(val);
        if (!(b >= -100 && b <= 100)) return serve_bad(err, "logit_bias", "'logit_bias' values must be in [-100, 100]");
        p->bias[p->sampling.n_bias].token = (int32_t)id;
        p->bias[p->sampling.n_bias].bias = (float)b;
        p->sampling.n_bias++;
    }
    return 0;
}

/* Fields shared by chat and completions. */
static int parse_common(const json_t *o, const oai_limits *lim, gen_params *p, serve_error *err) {
    long long iv;
    bool present;
    if (get_str(o, "model", &p->model, err) || get_str(o, "user", &p->user, err) ||
        get_str(o, "cache_salt", &p->cache_salt, err))
        return -1;
    if (p->cache_salt && !*p->cache_salt) return serve_bad(err, "cache_salt", "'cache_salt' must be a non-empty string");
    cinfer_sampling *s = &p->sampling;
    if (get_num(o, "temperature", 0, 2, false, &s->temperature, err) || get_num(o, "top_p", 0, 1, true, &s->top_p, err) ||
        get_num(o, "min_p", 0, 1, false, &s->min_p, err) ||
        get_num(o, "presence_penalty", -2, 2, false, &s->presence_penalty, err) ||
        get_num(o, "frequency_penalty", -2, 2, false, &s->frequency_penalty, err) ||
        get_num(o, "repetition_penalty", 0, 10, true, &s->repetition_penalty, err))
        return -1;
    if (get_int(o, "top_k", -1, 1 << 30, &iv, &present, err)) return -1;
    if (present) s->top_k = iv < 0 ? 0 : (int32_t)iv;
    if (get_int(o, "seed", INT64_MIN, INT64_MAX, &iv, &present, err)) return -1;
    if (present) {
        p->has_seed = true;
        s->seed = (uint64_t)iv;
    }
    if (get_int(o, "priority", -1000000, 1000000, &iv, &present, err)) return -1;
    if (present) p->priority = (int32_t)iv;
    int tc;
    if (traffic_class_from_json(o, &tc, err)) return -1; /* cinfer.traffic_class (serve/traffic.h) */
    p->traffic_class = tc;
    if (get_int(o, "n", 1, lim->max_n, &iv, &present, err)) return -1;
    if (present) p->n = (int32_t)iv;
    long long mt = 0, mct = 0;
    bool has_mt, has_mct;
    if (get_int(o, "max_tokens", 1, INT32_MAX / 2, &mt, &has_mt, err) ||
        get_int(o, "max_completion_tokens", 1, INT32_MAX / 2, &mct, &has_mct, err))
        return -1;
    p->max_tokens = has_mct ? (int32_t)mct : has_mt ? (int32_t)mt : 0;
    if (get_bool(o, "stream", &p->stream, err) || get_bool(o, "ignore_eos", &p->ignore_eos, err)) return -1;
    const json_t *so = json_object_get(o, "stream_options");
    if (so && !json_is_null(so)) {
        if (!p->stream) return serve_bad(err, "stream_options", "'stream_options' is only allowed when 'stream' is true");
        if (!json_is_object(so)) return serve_bad(err, "stream_options", "'stream_options' must be an object");
        if (get_bool(so, "include_usage", &p->include_usage, err)) return -1;
    }
    if (parse_stop(o, p, err) || parse_bias(o, lim, p, err)) return -1;
    return 0;
}

/* One message -> {role, content: string|null, ...other fields}. */
static json_t *norm_message(const json_t *m, size_t i, serve_error *err) {
    char where[48];
    snprintf(where, sizeof where, "messages[%zu]", i);
    if (!json_is_object(m)) {
        serve_bad(err, where, "%s must be an object", where);
        return NULL;
    }
    const char *role = json_string_value(json_object_get(m, "role"));
    static const char *const roles[] = {"system", "developer", "user", "assistant", "tool", "function"};
    bool ok = false;
    for (size_t r = 0; role && r < sizeof roles / sizeof roles[0]; r++) ok |= !strcmp(role, roles[r]);
    if (!ok) {
        serve_bad(err, where, "%s.role must be one of system, developer, user, assistant, tool, function", where);
        return NULL;
    }
    const json_t *c = json_object_get(m, "content");
    json_t *content;
    if (json_is_string(c)) content = json_incref((json_t *)c);
    else if (!c || json_is_null(c)) {
        if (strcmp(role, "assistant")) {
            serve_bad(err, where, "%s.content is required for role '%s'", where, role);
            return NULL;
        }
        content = json_null();
    } else if (json_is_array(c)) {
        size_t total = 0, np = json_array_size(c);
        for (size_t k = 0; k < np; k++) {
            const json_t *part = json_array_get(c, k);
            const char *type = json_string_value(json_object_get(part, "type"));
            if (!type) {
                serve_bad(err, where, "%s.content[%zu] must be an object with a 'type'", where, k);
                return NULL;
            }
            if (!strcmp(type, "text")) {
                if (!json_is_string(json_object_get(part, "text"))) {
                    serve_bad(err, where, "%s.content[%zu].text must be a string", where, k);
                    return NULL;
                }
                total += json_string_length(json_object_get(part, "text"));
            } else if (!strcmp(type, "refusal") && !strcmp(role, "assistant")) {
            } else {
                serve_bad(err, where, "%s.content[%zu]: content type '%.32s' is not supported (text-only model)", where, k,
                          type);
                return NULL;
            }
        }
        char *buf = malloc(total + 1);
        if (!buf) {
            oom(err);
            return NULL;
        }
        size_t at = 0;
        for (size_t k = 0; k < np; k++) {
            const json_t *t = json_object_get(json_array_get(c, k), "text");
            if (!json_is_string(t) || strcmp(json_string_value(json_object_get(json_array_get(c, k), "type")), "text"))
                continue;
            memcpy(buf + at, json_string_value(t), json_string_length(t));
            at += json_string_length(t);
        }
        buf[at] = 0;
        content = json_stringn(buf, at);
        free(buf);
        if (!content) {
            serve_bad(err, where, "%s.content is not valid UTF-8", where);
            return NULL;
        }
    } else {
        serve_bad(err, where, "%s.content must be a string, an array of content parts or null", where);
        return NULL;
    }
    json_t *out = json_copy((json_t *)m);
    if (!out || json_object_set_new(out, "content", content) ||
        (!strcmp(role, "developer") && json_object_set_new(out, "role", json_string("system")))) {
        if (out) json_decref(out);
        oom(err);
        return NULL;
    }
    return out;
}

/* ids from a JSON array of integers in [0, n_vocab). */
static int parse_ids(const json_t *a, const oai_limits *lim, const char *param, int32_t **ids, int32_t *n,
                     serve_error *err) {
    size_t k = json_array_size(a);
    if (k == 0) return serve_bad(err, param, "'%s' must not be empty", param);
    if (k > (size_t)INT32_MAX / 4) return serve_bad(err, param, "'%s' is too long", param);
    *ids = malloc(k * sizeof **ids);
    if (!*ids) return oom(err);
    for (size_t i = 0; i < k; i++) {
        const json_t *t = json_array_get(a, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= lim->n_vocab)
            return serve_bad(err, param, "'%s' must hold token ids in [0, %d)", param, lim->n_vocab);
        (*ids)[i] = (int32_t)json_integer_value(t);
    }
    *n = (int32_t)k;
    return 0;
}

int oai_parse_completion(const char *body, size_t len, const oai_limits *lim, gen_params *p, serve_error *err) {
    gen_params_init(p);
    p->kind = GEN_COMPLETION;
    json_t *root = load(body, len, err);
    if (!root) return -1;
    const json_t *pr = json_object_get(root, "prompt");
    if (json_is_array(pr) && json_array_size(pr) == 1 &&
        (json_is_string(json_array_get(pr, 0)) || json_is_array(json_array_get(pr, 0))))
        pr = json_array_get(pr, 0);
    if (json_is_string(pr)) {
        p->prompt_len = json_string_length(pr);
        if (!(p->prompt = malloc(p->prompt_len + 1))) {
            oom(err);
            goto fail;
        }
        memcpy(p->prompt, json_string_value(pr), p->prompt_len + 1);
    } else if (json_is_array(pr) && json_array_size(pr) > 0 && json_is_integer(json_array_get(pr, 0))) {
        if (parse_ids(pr, lim, "prompt", &p->prompt_ids, &p->n_prompt_ids, err)) goto fail;
    } else if (json_is_array(pr) && json_array_size(pr) > 1) {
        serve_bad(err, "prompt", "batched prompts (more than one) are not supported; send one request per prompt");
        goto fail;
    } else {
        serve_bad(err, "prompt", "'prompt' must be a string, a list of token ids, or a list with one of those");
        goto fail;
    }
    if (parse_common(root, lim, p, err)) goto fail;
    long long iv;
    bool present, echo = false;
    if (get_int(root, "logprobs", 0, 20, &iv, &present, err)) goto fail;
    if (present) {
        p->logprobs = true;
        p->top_logprobs = (int32_t)iv;
    }
    if (get_bool(root, "echo", &echo, err)) goto fail;
    if (echo) {
        serve_bad(err, "echo", "'echo' is not supported");
        goto fail;
    }
    const json_t *suffix = json_object_get(root, "suffix");
    if (suffix && !json_is_null(suffix)) {
        serve_bad(err, "suffix", "'suffix' is not supported");
        goto fail;
    }
    if (get_int(root, "best_of", 1, lim->max_n, &iv, &present, err)) goto fail;
    if (present && iv != p->n) {
        serve_bad(err, "best_of", "'best_of' other than n is not supported");
        goto fail;
    }
    json_decref(root);
    return 0;
fail:
    json_decref(root);
    gen_params_free(p);
    return -1;
}

int oai_parse_tokenize(const char *body, size_t len, char **prompt, size_t *prompt_len, json_t **messages,
                       bool *add_special, char **model, serve_error *err) {
    *prompt = NULL;
    *messages = NULL;
    *model = NULL;
    *add_special = true;
    json_t *root = load(body, len, err);
    if (!root) return -1;
    const json_t *pr = json_object_get(root, "prompt"), *msgs = json_object_get(root, "messages");
    if (get_str(root, "model", model, err)) goto fail;
    if (json_is_string(pr) && !msgs) {
        if (get_bool(root, "add_special_tokens", add_special, err)) goto fail;
        *prompt_len = json_string_length(pr);
        if (!(*prompt = malloc(*prompt_len + 1))) {
            oom(err);
            goto fail;
        }
        memcpy(*prompt, json_string_value(pr), *prompt_len + 1);
    } else if (json_is_array(msgs) && json_array_size(msgs) > 0 && !pr) {
        *add_special = true;
        if (get_bool(root, "add_generation_prompt", add_special, err)) goto fail;
        if (!(*messages = json_array())) {
            oom(err);
            goto fail;
        }
        for (size_t i = 0; i < json_array_size(msgs); i++) {
            json_t *m = norm_message(json_array_get(msgs, i), i, err);
            if (!m || json_array_append_new(*messages, m)) goto fail;
        }
    } else {
        serve_bad(err, NULL, "give either 'prompt' (a string) or 'messages' (a non-empty array)");
        goto fail;
    }
    json_decref(root);
    return 0;
fail:
    json_decref(root);
    free(*prompt);
    *prompt = NULL;
    free(*model);
    *model = NULL;
    if (*messages) json_decref(*messages);
    *messages = NULL;
    return -1;
}

int oai_parse_detokenize(const char *body, size_t len, const oai_limits *lim, int32_t **ids, int32_t *n_ids,
                         char **model, serve_error *err) {
    *ids = NULL;
    *n_ids = 0;
    *model = NULL;
    json_t *root = load(body, len, err);
    if (!root) return -1;
    const json_t *t = json_object_get(root, "tokens");
    int rc = -1;
    if (get_str(root, "model", model, err)) goto done;
    if (!json_is_array(t)) {
        serve_bad(err, "tokens", "'tokens' must be an array of token ids");
        goto done;
    }
    if (json_array_size(t) == 0) rc = 0;
    else rc = parse_ids(t, lim, "tokens", ids, n_ids, err);
done:
    json_decref(root);
    if (rc) {
        free(*ids);
        *ids = NULL;
        free(*model);
        *model = NULL;
    }
    return rc;
}
