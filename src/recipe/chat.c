/* chat.c - OpenAI Chat Completions codec: request <-> canonical, response <->
 * canonical (protocols.md §1). Parsing borrows strings from the body (the
 * request keeps a reference to it); the request encoder writes through the
 * JSON writer (writer.h: text or jansson tree), the response encoder builds
 * jansson values.
 * Called through recipe_request_parse/encode and recipe_response_parse/encode
 * (codec.c). Lossy cases (signatures, redacted thinking, is_error, images in tool
 * results) are listed in docs/recipe.md. */
#include <stdio.h>

#include "recipe/openai_out.h"
#include "recipe/recipe_internal.h"
#include "recipe/writer.h"

/* ---------------------------------------------------------------- request parse */

/* Content value -> parts. allow_images: user messages. */
static int parse_content(recipe_request *r, const rj *c, recipe_part **out, size_t *n, bool *is_string,
                         bool allow_images, const char *path, recipe_error *err) {
    *out = NULL;
    *n = 0;
    *is_string = false;
    if (!c || rj_is_null(c)) return 0;
    if (rj_is_string(c)) return string_content(&r->arena, rj_str(c), out, n, is_string, err);
    if (!rj_is_array(c))
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path, "'%s.content' must be a string or an array", path);
    size_t cnt = rj_size(c);
    recipe_part *ps = ra_alloc(&r->arena, (cnt ? cnt : 1) * sizeof *ps);
    if (!ps) return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < cnt; i++) {
        rj *part = rj_at(c, i);
        const char *type = rj_gets(part, "type");
        if (!type) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path, "'%s.content[%zu].type' missing", path, i);
        if (!strcmp(type, "text")) {
            const char *t = rj_gets(part, "text");
            if (!t)
                return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path, "'%s.content[%zu].text' must be a string",
                                   path, i);
            ps[k].type = RECIPE_PART_TEXT;
            ps[k++].text = t;
        } else if (!strcmp(type, "image_url") && allow_images) {
            rj *iu = rj_get(part, "image_url");
            const char *url = rj_is_string(iu) ? rj_str(iu) : rj_gets(iu, "url");
            if (!url)
                return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path,
                                   "'%s.content[%zu].image_url.url' must be a string", path, i);
            image_from_url(&r->arena, &ps[k], url);
            ps[k++].detail = rj_gets(iu, "detail");
        } else if (!strcmp(type, "refusal")) {
            continue; /* assistant refusal parts carry no prompt text */
        } else {
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path,
                               "'%s.content[%zu]': unsupported content part type '%s'", path, i, type);
        }
    }
    *out = ps;
    *n = k;
    return 0;
}

static int parse_tool_calls(recipe_request *r, const rj *tcs, recipe_part *ps, size_t *k, const char *path,
                            recipe_error *err) {
    if (!tcs || rj_is_null(tcs)) return 0;
    if (!rj_is_array(tcs))
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path, "'%s.tool_calls' must be an array", path);
    for (size_t i = 0; i < rj_size(tcs); i++) {
        static const jkey k_tc[] = {JKEY("function"), JKEY("id")}, k_fn[] = {JKEY("name"), JKEY("arguments")};
        rj *tv[2], *fv[2];
        jpick(rj_at(tcs, i), k_tc, 2, tv);
        jpick(tv[0], k_fn, 2, fv);
        const char *name = rj_str(fv[0]);
        rj *args = fv[1];
        if (!name)
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path, "'%s.tool_calls[%zu].function.name' missing",
                               path, i);
        recipe_part *p = &ps[(*k)++];
        p->type = RECIPE_PART_TOOL_CALL;
        p->id = rj_str(tv[1]);
        p->name = name;
        if (rj_is_string(args)) p->args = rj_str(args);
        else if (args && !rj_is_null(args)) p->args = RAW(r, args); /* tolerate an object */
        else p->args = "{}";
    }
    return 0;
}

static int parse_message(recipe_request *r, const rj *m, recipe_message *out, size_t idx, recipe_error *err) {
    char path[RECIPE_PATH];
    path_idx(path, sizeof path, "messages", idx, "");
    if (!rj_is_object(m)) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path, "'%s' must be an object", path);
    enum { M_ROLE, M_CONTENT, M_NAME, M_TOOL_CALLS, M_REASONING_CONTENT, M_REASONING, M_REFUSAL, M_TOOL_CALL_ID, M_N };
    static const jkey keys[M_N] = {JKEY("role"),       JKEY("content"),           JKEY("name"),
                                   JKEY("tool_calls"), JKEY("reasoning_content"), JKEY("reasoning"),
                                   JKEY("refusal"),    JKEY("tool_call_id")};
    rj *v[M_N];
    jpick(m, keys, M_N, v);
    const char *role = rj_str(v[M_ROLE]);
    if (!role) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path, "'%s.role' missing", path);
    rj *content = v[M_CONTENT];
    out->name = rj_str(v[M_NAME]);
    if (!strcmp(role, "system") || !strcmp(role, "developer") || !strcmp(role, "user")) {
        out->role = role[0] == 's' ? RECIPE_ROLE_SYSTEM : role[0] == 'd' ? RECIPE_ROLE_DEVELOPER : RECIPE_ROLE_USER;
        if (!content || rj_is_null(content))
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path, "'%s.content' missing", path);
        return parse_content(r, content, &out->parts, &out->n_parts, &out->content_string,
                             out->role == RECIPE_ROLE_USER, path, err);
    }
    if (!strcmp(role, "assistant")) {
        out->role = RECIPE_ROLE_ASSISTANT;
        recipe_part *cp;
        size_t cn;
        if (parse_content(r, content, &cp, &cn, &out->content_string, false, path, err)) return -1;
        out->content_null = !content || rj_is_null(content);
        rj *tcs = v[M_TOOL_CALLS];
        const char *reasoning = rj_str(v[M_REASONING_CONTENT]);
        if (!reasoning) reasoning = rj_str(v[M_REASONING]);
        size_t total = cn + (reasoning ? 1 : 0) + (rj_is_array(tcs) ? rj_size(tcs) : 0);
        recipe_part *ps = ra_alloc(&r->arena, (total ? total : 1) * sizeof *ps);
        if (!ps) return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
        size_t k = 0;
        if (reasoning) {
            ps[k].type = RECIPE_PART_REASONING;
            ps[k++].text = reasoning;
        }
        for (size_t i = 0; i < cn; i++) ps[k++] = cp[i];
        if (parse_tool_calls(r, tcs, ps, &k, path, err)) return -1;
        out->parts = ps;
        out->n_parts = k;
        out->refusal = rj_str(v[M_REFUSAL]);
        return 0;
    }
    if (!strcmp(role, "tool") || !strcmp(role, "function")) {
        out->role = RECIPE_ROLE_TOOL;
        recipe_part *p = ra_alloc(&r->arena, sizeof *p);
        if (!p) return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
        p->type = RECIPE_PART_TOOL_RESULT;
        p->id = rj_str(role[0] == 't' ? v[M_TOOL_CALL_ID] : v[M_NAME]);
        if (!p->id) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path, "'%s.tool_call_id' missing", path);
        if (parse_content(r, content, &p->parts, &p->n_parts, &p->content_string, true, path, err)) return -1;
        if (!content || rj_is_null(content)) p->content_string = true;
        out->parts = p;
        out->n_parts = 1;
        out->name = NULL;
        return 0;
    }
    return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path,
                       "'%s.role' '%s' is not one of system, developer, user, "
                       "assistant, tool",
                       path, role);
}

static int parse_tools(recipe_request *r, const rj *tools, recipe_error *err) {
    if (!tools || rj_is_null(tools)) return 0;
    if (!rj_is_array(tools)) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "tools", "'tools' must be an array");
    size_t n = rj_size(tools);
    r->tools = ra_alloc(&r->arena, (n ? n : 1) * sizeof *r->tools);
    if (!r->tools) return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        static const jkey k_tool[] = {JKEY("function"), JKEY("type")},
                          k_fn[] = {JKEY("name"), JKEY("description"), JKEY("parameters"), JKEY("strict")};
        rj *tv[2], *fv[4];
        jpick(rj_at(tools, i), k_tool, 2, tv);
        jpick(tv[0], k_fn, 4, fv);
        const char *type = rj_str(tv[1]);
        if (type && strcmp(type, "function"))
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "tools", "tools[%zu]: unsupported tool type '%s'", i,
                               type);
        const char *name = rj_str(fv[0]);
        if (!name)
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "tools", "'tools[%zu].function.name' must be a string",
                               i);
        recipe_tool *d = &r->tools[r->n_tools++];
        d->name = name;
        d->description = rj_str(fv[1]);
        d->parameters = RAW(r, fv[2]);
        d->strict = -1;
        if (rjv_bool(fv[3], "strict", &d->strict, err, "tools.function")) return -1;
        d->cache_control = NULL;
    }
    return 0;
}

/* A canonical token id key: "0" or a decimal without leading zeros, below 2^31. */
static bool token_key(const char *k, size_t n, int32_t *out) {
    if (n == 0 || n > 10 || (k[0] == '0' && n > 1)) return false;
    int64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (k[i] < '0' || k[i] > '9') return false;
        x = x * 10 + (k[i] - '0');
    }
    if (x > INT32_MAX) return false;
    *out = (int32_t)x;
    return true;
}

/* logit_bias {"<token id>": bias in [-100, 100]}: kept as JSON text (encoders) and parsed (r->bias). */
int parse_logit_bias(recipe_request *r, rj *lb, recipe_error *err) {
    if (rjv_obj(lb, "logit_bias", &lb, err, "")) return -1;
    if (!lb) return 0;
    if (!rj_expand(lb)) return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
    rj **items = rj_items(lb);
    size_t n = lb->n;
    recipe_bias *bs = ra_alloc(&r->arena, (n ? n : 1) * sizeof *bs);
    if (!bs) return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const rj *m = items[i];
        if (!token_key(m->key, m->klen, &bs[i].token))
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "logit_bias",
                               "'logit_bias' key '%.40s' is not a token id (a decimal integer >= 0 without sign, "
                               "spaces or leading zeros)",
                               m->key);
        if (!rj_is_number(m) || !(rj_num(m) >= -100 && rj_num(m) <= 100))
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "logit_bias",
                               "'logit_bias' values must be numbers in [-100, 100] (key '%.40s')", m->key);
        bs[i].bias = rj_num(m);
    }
    r->logit_bias = RAW(r, lb);
    r->bias = bs;
    r->n_bias = n;
    return 0;
}

int parse_openai_stop(recipe_request *r, const rj *stop, recipe_error *err) {
    if (rj_is_absent(stop)) return 0;
    if (rj_is_string(stop)) {
        if (!(r->stop = ra_alloc(&r->arena, sizeof *r->stop)))
            return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
        r->stop[0] = rj_str(stop);
        r->n_stop = 1;
        r->stop_string = true;
        return 0;
    }
    if (!rj_is_array(stop))
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "stop", "'stop' must be a string or an array of strings");
    size_t ns = rj_size(stop);
    if (ns > 4) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "stop", "'stop' allows at most 4 sequences");
    if (!(r->stop = ra_alloc(&r->arena, (ns ? ns : 1) * sizeof *r->stop)))
        return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
    for (size_t i = 0; i < ns; i++) {
        const char *s = rj_str(rj_at(stop, i));
        if (!s) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "stop", "'stop[%zu]' must be a string", i);
        r->stop[r->n_stop++] = s;
    }
    return 0;
}

int chat_request_parse(recipe_request *r, rj *b, recipe_error *err);
int chat_request_parse(recipe_request *r, rj *b, recipe_error *err) {
    /* every top-level field in one pass over the body (most optional fields are absent) */
    enum {
        C_MODEL = S_COUNT,
        C_MESSAGES,
        C_TOOLS,
        C_TOOL_CHOICE,
        C_STREAM_OPTIONS,
        C_MAX_COMPLETION_TOKENS,
        C_MAX_TOKENS,
        C_PRESENCE,
        C_FREQUENCY,
        C_N,
        C_SEED,
        C_LOGPROBS,
        C_LOGIT_BIAS,
        C_STOP,
        C_EFFORT,
        C_THINKING,
        C_RESPONSE_FORMAT,
        C_COUNT
    };
    static const jkey keys[C_COUNT] = {RECIPE_COMMON_KEYS,
                                       JKEY("model"),
                                       JKEY("messages"),
                                       JKEY("tools"),
                                       JKEY("tool_choice"),
                                       JKEY("stream_options"),
                                       JKEY("max_completion_tokens"),
                                       JKEY("max_tokens"),
                                       JKEY("presence_penalty"),
                                       JKEY("frequency_penalty"),
                                       JKEY("n"),
                                       JKEY("seed"),
                                       JKEY("logprobs"),
                                       JKEY("logit_bias"),
                                       JKEY("stop"),
                                       JKEY("reasoning_effort"),
                                       JKEY("thinking"),
                                       JKEY("response_format")};
    rj *v[C_COUNT];
    jpick(b, keys, C_COUNT, v);
    if (rjv_str(v[C_MODEL], "model", &r->model, err, "")) return -1;
    rj *msgs = v[C_MESSAGES];
    if (!rj_is_array(msgs) || rj_size(msgs) == 0)
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "messages", "'messages' must be a non-empty array");
    size_t n = rj_size(msgs);
    r->messages = ra_alloc(&r->arena, n * sizeof *r->messages);
    if (!r->messages) return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (parse_message(r, rj_at(msgs, i), &r->messages[i], i, err)) return -1;
        r->n_messages++;
    }
    if (parse_tools(r, v[C_TOOLS], err)) return -1;
    if (tool_choice_parse_openai(r, v[C_TOOL_CHOICE], false, err)) return -1;
    if (parse_common_sampling_v(r, v, err)) return -1;
    rj *so = NULL;
    if (rjv_obj(v[C_STREAM_OPTIONS], "stream_options", &so, err, "")) return -1;
    if (so && !r->stream)
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "stream_options",
                           "'stream_options' is only allowed when 'stream' is true");
    if (so && jget_bool(so, "include_usage", &r->include_usage, err, "stream_options")) return -1;
    int64_t mt = RECIPE_UNSET;
    if (rjv_int(v[C_MAX_COMPLETION_TOKENS], "max_completion_tokens", &r->max_tokens, 1, INT32_MAX, err, "")) return -1;
    if (rjv_int(v[C_MAX_TOKENS], "max_tokens", &mt, 1, INT32_MAX, err, "")) return -1;
    if (r->max_tokens == RECIPE_UNSET && mt != RECIPE_UNSET) r->max_tokens = mt, r->max_tokens_legacy = true;
    if (rjv_num(v[C_PRESENCE], "presence_penalty", &r->presence_penalty, -2, 2, err, "")) return -1;
    if (rjv_num(v[C_FREQUENCY], "frequency_penalty", &r->frequency_penalty, -2, 2, err, "")) return -1;
    if (rjv_int(v[C_N], "n", &r->n, 1, 128, err, "")) return -1;
    if (rjv_int(v[C_SEED], "seed", &r->seed, INT64_MIN + 1, INT64_MAX, err, "")) return -1;
    if (rjv_bool(v[C_LOGPROBS], "logprobs", &r->logprobs, err, "")) return -1;
    if (parse_logit_bias(r, v[C_LOGIT_BIAS], err)) return -1;
    if (parse_openai_stop(r, v[C_STOP], err)) return -1;
    const char *eff = NULL;
    if (rjv_str(v[C_EFFORT], "reasoning_effort", &eff, err, "")) return -1;
    if (eff && !(r->reasoning_effort = effort_parse(eff)))
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "reasoning_effort",
                           "'reasoning_effort' must be one of none, minimal, low, medium, high");
    rj *th = v[C_THINKING]; /* DeepSeek switch */
    if (rj_is_object(th) && rj_gets(th, "type")) r->thinking = strcmp(rj_gets(th, "type"), "disabled") != 0;
    rj *rf = v[C_RESPONSE_FORMAT];
    if (rf && !rj_is_null(rf)) {
        const char *type = rj_gets(rf, "type");
        if (!type)
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "response_format", "'response_format.type' missing");
        if (!strcmp(type, "text")) r->format = RECIPE_FORMAT_TEXT;
        else if (!strcmp(type, "json_object")) r->format = RECIPE_FORMAT_JSON_OBJECT;
        else if (!strcmp(type, "json_schema")) {
            rj *js = rj_get(rf, "json_schema");
            if (!rj_is_object(js) || !rj_is_object(rj_get(js, "schema")))
                return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "response_format.json_schema",
                                   "'response_format.json_schema.schema' must be an object");
            r->format = RECIPE_FORMAT_JSON_SCHEMA;
            r->format_name = rj_gets(js, "name");
            r->format_description = rj_gets(js, "description");
            r->format_schema = RAW(r, rj_get(js, "schema"));
            if (jget_bool(js, "strict", &r->format_strict, err, "response_format.json_schema")) return -1;
        } else
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "response_format.type",
                               "'response_format.type' must be text, json_object or json_schema");
    }
    return 0;
}

/* ---------------------------------------------------------------- request encode */

static bool has_type(const recipe_part *ps, size_t n, recipe_part_type t) {
    for (size_t i = 0; i < n; i++)
        if (ps[i].type == t) return true;
    return false;
}

static void w_image_part(rw *w, recipe_arena *a, const recipe_part *p) {
    rw_obj(w);
    rw_kstr(w, "type", "image_url");
    rw_kobj(w, "image_url");
    rw_kstr(w, "url", image_url(a, p));
    rw_kstr(w, "detail", p->detail);
    rw_end(w);
    rw_end(w);
}

static void w_text_parts(rw *w, const recipe_part *ps, size_t n, recipe_arena *a, bool images) {
    rw_arr(w);
    for (size_t i = 0; i < n; i++) {
        if (ps[i].type == RECIPE_PART_TEXT) {
            rw_obj(w);
            rw_kstr(w, "type", "text");
            rw_kstr(w, "text", ps[i].text);
            rw_end(w);
        } else if (ps[i].type == RECIPE_PART_IMAGE && images) w_image_part(w, a, &ps[i]);
    }
    rw_end(w);
}

/* content as a string (joined with sep) or as typed parts */
static void w_content(rw *w, const recipe_part *ps, size_t n, bool as_string, recipe_arena *a, bool images,
                      const char *sep) {
    if (as_string && !(images && has_type(ps, n, RECIPE_PART_IMAGE))) {
        const char *t = join_text(a, ps, n, sep);
        rw_str(w, t ? t : "");
    } else w_text_parts(w, ps, n, a, images);
}

static void w_message(rw *w, const recipe_request *r, const recipe_message *m, recipe_arena *a) {
    bool foreign = r->source != RECIPE_API_CHAT;
    switch (m->role) {
    case RECIPE_ROLE_SYSTEM:
    case RECIPE_ROLE_DEVELOPER:
        rw_obj(w);
        rw_kstr(w, "role", m->role == RECIPE_ROLE_SYSTEM ? "system" : "developer");
        /* top-level system blocks (Anthropic) are joined into one string, as vLLM does */
        rw_key(w, "content");
        w_content(w, m->parts, m->n_parts, m->content_string || (foreign && m->top_level), a, false,
                  m->content_string ? "" : "\n");
        rw_kstr(w, "name", m->name);
        rw_end(w);
        return;
    case RECIPE_ROLE_USER:
        rw_obj(w);
        rw_kstr(w, "role", "user");
        rw_key(w, "content");
        w_content(w, m->parts, m->n_parts, m->content_string, a, true, "");
        rw_kstr(w, "name", m->name);
        rw_end(w);
        return;
    case RECIPE_ROLE_ASSISTANT: {
        rw_obj(w);
        rw_kstr(w, "role", "assistant");
        const char *text = join_text(a, m->parts, m->n_parts, "");
        bool calls = has_type(m->parts, m->n_parts, RECIPE_PART_TOOL_CALL);
        rw_key(w, "content");
        if (text && !m->content_string && !foreign) w_text_parts(w, m->parts, m->n_parts, a, false);
        else if (text) rw_str(w, text);
        else if (calls || m->content_null) rw_null(w);
        else rw_str(w, ""); /* reasoning-only turn */
        for (size_t k = 0; k < m->n_parts; k++)
            if (m->parts[k].type == RECIPE_PART_REASONING) {
                rw_kstr(w, "reasoning_content", reasoning_text(a, &m->parts[k]));
                break;
            }
        if (calls) {
            rw_karr(w, "tool_calls");
            for (size_t k = 0; k < m->n_parts; k++) {
                const recipe_part *p = &m->parts[k];
                if (p->type != RECIPE_PART_TOOL_CALL) continue;
                rw_obj(w);
                rw_kstr(w, "id", p->id);
                rw_kstr(w, "type", "function");
                rw_kobj(w, "function");
                rw_kstr(w, "name", p->name);
                rw_kstr(w, "arguments", p->args ? p->args : "{}");
                rw_end(w);
                rw_end(w);
            }
            rw_end(w);
        }
        rw_kstr(w, "refusal", m->refusal);
        rw_kstr(w, "name", m->name);
        rw_end(w);
        return;
    }
    case RECIPE_ROLE_TOOL: {
        const recipe_part *p = m->n_parts ? &m->parts[0] : NULL;
        if (!p || p->type != RECIPE_PART_TOOL_RESULT) return;
        rw_obj(w);
        rw_kstr(w, "role", "tool");
        rw_kstr(w, "tool_call_id", p->id);
        rw_key(w, "content");
        w_content(w, p->parts, p->n_parts, p->content_string, a, false, "");
        rw_end(w);
        /* Chat tool messages carry no images: they follow in a user message (vLLM) */
        if (has_type(p->parts, p->n_parts, RECIPE_PART_IMAGE)) {
            rw_obj(w);
            rw_kstr(w, "role", "user");
            rw_karr(w, "content");
            for (size_t k = 0; k < p->n_parts; k++)
                if (p->parts[k].type == RECIPE_PART_IMAGE) w_image_part(w, a, &p->parts[k]);
            rw_end(w);
            rw_end(w);
        }
        return;
    }
    }
}

int chat_request_write(rw *w, const recipe_request *r, recipe_error *err);
int chat_request_write(rw *w, const recipe_request *r, recipe_error *err) {
    if (r->n_messages == 0) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "messages", "no messages to encode");
    recipe_arena a = {0};
    bool foreign = r->source != RECIPE_API_CHAT;
    rw_obj(w);
    rw_kstr(w, "model", r->model);
    rw_karr(w, "messages");
    for (size_t i = 0; i < r->n_messages; i++) w_message(w, r, &r->messages[i], &a);
    rw_end(w);
    if (r->n_tools) {
        rw_karr(w, "tools");
        for (size_t i = 0; i < r->n_tools; i++) write_tool_openai(w, &r->tools[i], false);
        rw_end(w);
    }
    if (r->tool_choice != RECIPE_TOOL_CHOICE_UNSET) {
        rw_key(w, "tool_choice");
        write_tool_choice_openai(w, r, false);
    }
    rw_ktri(w, "parallel_tool_calls", r->parallel_tool_calls);
    if (r->format != RECIPE_FORMAT_UNSET) {
        rw_kobj(w, "response_format");
        if (r->format == RECIPE_FORMAT_TEXT) rw_kstr(w, "type", "text");
        else if (r->format == RECIPE_FORMAT_JSON_OBJECT) rw_kstr(w, "type", "json_object");
        else {
            rw_kstr(w, "type", "json_schema");
            rw_kobj(w, "json_schema");
            rw_kstr(w, "name", r->format_name ? r->format_name : "response");
            rw_kstr(w, "description", r->format_description);
            rw_kraw(w, "schema", r->format_schema);
            rw_ktri(w, "strict", r->format_strict);
            rw_end(w);
        }
        rw_end(w);
    }
    int iu = -1;
    if (r->stream) {
        rw_key(w, "stream"), rw_bool(w, true);
        iu = r->include_usage >= 0 ? r->include_usage : foreign ? 1 : -1;
    } else if (r->source == RECIPE_API_CHAT) iu = r->include_usage;
    if (iu >= 0) {
        rw_kobj(w, "stream_options");
        rw_key(w, "include_usage"), rw_bool(w, iu);
        rw_end(w);
    }
    rw_kint(w, r->max_tokens_legacy ? "max_tokens" : "max_completion_tokens", r->max_tokens);
    rw_kreal(w, "temperature", r->temperature);
    rw_kreal(w, "top_p", r->top_p);
    rw_kint(w, "top_k", r->top_k);
    rw_kint(w, "n", r->n);
    if (r->n_stop) {
        if (r->stop_string && r->n_stop == 1) rw_kstr(w, "stop", r->stop[0]);
        else {
            rw_karr(w, "stop");
            for (size_t i = 0; i < r->n_stop; i++) rw_str(w, r->stop[i]);
            rw_end(w);
        }
    }
    rw_kint(w, "seed", r->seed);
    rw_ktri(w, "logprobs", r->logprobs);
    rw_kint(w, "top_logprobs", r->top_logprobs);
    rw_kreal(w, "presence_penalty", r->presence_penalty);
    rw_kreal(w, "frequency_penalty", r->frequency_penalty);
    rw_kraw(w, "logit_bias", r->logit_bias);
    rw_kstr(w, "user", r->user);
    rw_kraw(w, "metadata", r->metadata);
    recipe_effort eff = r->reasoning_effort;
    if (!eff && r->thinking == 1 && r->thinking_budget != RECIPE_UNSET)
        eff = recipe_effort_from_budget(r->thinking_budget);
    rw_kstr(w, "reasoning_effort", recipe_effort_name(eff));
    if (r->thinking >= 0) {
        rw_kobj(w, "thinking");
        rw_kstr(w, "type", r->thinking ? "enabled" : "disabled");
        rw_end(w);
    }
    write_extensions(w, r);
    rw_end(w);
    ra_free(&a);
    return 0;
}

/* ---------------------------------------------------------------- response */

json_t *usage_chat(const recipe_usage *u);
json_t *usage_chat(const recipe_usage *u) {
    json_t *o = json_object();
    jset(o, "prompt_tokens", json_integer(u->prompt));
    jset(o, "completion_tokens", json_integer(u->output));
    jset(o, "total_tokens", json_integer(u->prompt + u->output));
    json_t *pd = json_pack("{s:I}", "cached_tokens", (json_int_t)u->cache_read);
    if (u->replayed > 0) jset(pd, "replayed_tokens", json_integer(u->replayed)); /* cinfer: bounded replay */
    jset(o, "prompt_tokens_details", pd);
    json_t *d = json_pack("{s:I}", "reasoning_tokens", (json_int_t)u->reasoning);
    if (u->accepted_draft > 0) jset(d, "accepted_prediction_tokens", json_integer(u->accepted_draft));
    jset(o, "completion_tokens_details", d);
    return o;
}

/* One choice object: message (content / reasoning_content / tool_calls), logprobs, finish. */
static json_t *chat_choice(recipe_arena *a, size_t index, const recipe_choice *c) {
    json_t *msg = json_object(), *tcs = NULL;
    jset(msg, "role", json_string("assistant"));
    const char *text = join_text(a, c->parts, c->n_parts, "");
    recipe_buf rb = {0};
    for (size_t i = 0; i < c->n_parts; i++) {
        const recipe_part *p = &c->parts[i];
        if (p->type == RECIPE_PART_REASONING) {
            const char *t = reasoning_text(a, p);
            if (t) rb_puts(&rb, t);
        } else if (p->type == RECIPE_PART_TOOL_CALL) {
            if (!tcs) tcs = json_array();
            json_t *tc = json_object();
            jset_str(tc, "id", p->id);
            jset(tc, "type", json_string("function"));
            jset(tc, "function",
                 json_pack("{s:o,s:o}", "name", jsnew(p->name), "arguments", jsnew(p->args ? p->args : "{}")));
            json_array_append_new(tcs, tc);
        }
    }
    jset(msg, "content", text ? jsnew(text) : json_null());
    if (rb.data) jset(msg, "reasoning_content", json_stringn_nocheck(rb.data, rb.len));
    if (tcs) jset(msg, "tool_calls", tcs);
    recipe_buf_free(&rb);
    recipe_finish f = tcs && c->finish != RECIPE_FINISH_ERROR ? RECIPE_FINISH_TOOL_CALLS : c->finish;
    json_t *lp = NULL;
    if (c->logprobs) {
        recipe_buf b = {0};
        if (!oai_logprobs_json(&b, c->logprobs, c->n_logprobs, false, NULL)) lp = json_loads(b.data, 0, NULL);
        recipe_buf_free(&b);
    }
    json_t *choice = json_object();
    jset(choice, "index", json_integer((json_int_t)index));
    jset(choice, "message", msg);
    jset(choice, "logprobs", lp ? lp : json_null());
    const char *fr = recipe_finish_chat(f);
    jset(choice, "finish_reason", fr ? json_string(fr) : json_null());
    if (f == RECIPE_FINISH_STOP_STRING && c->stop_sequence) jset_str(choice, "stop_reason", c->stop_sequence);
    return choice;
}

json_t *chat_response_encode(const recipe_response *r, recipe_error *err);
json_t *chat_response_encode(const recipe_response *r, recipe_error *err) {
    (void)err;
    recipe_arena a = {0};
    recipe_choice one = {
        .parts = r->parts, .n_parts = r->n_parts, .finish = r->finish, .stop_sequence = r->stop_sequence};
    json_t *choices = json_array();
    for (size_t i = 0; choices && i < (r->n_choices ? r->n_choices : 1); i++)
        json_array_append_new(choices, chat_choice(&a, i, r->n_choices ? &r->choices[i] : &one));
    json_t *o = json_object();
    jset(o, "id", jsnew(r->id ? r->id : default_id(&a, "chatcmpl-", r)));
    jset(o, "object", json_string("chat.completion"));
    jset(o, "created", json_integer(r->created));
    jset(o, "model", jsnew(r->model ? r->model : ""));
    jset(o, "choices", choices);
    if (r->has_usage) jset(o, "usage", usage_chat(&r->usage));
    ra_free(&a);
    return o;
}

int chat_response_parse(recipe_response *r, rj *b, recipe_error *err);
int chat_response_parse(recipe_response *r, rj *b, recipe_error *err) {
    r->id = rj_gets(b, "id");
    r->model = rj_gets(b, "model");
    rj *cr = rj_get(b, "created");
    if (rj_is_integer(cr)) r->created = rj_int(cr);
    rj *ch = rj_at(rj_get(b, "choices"), 0);
    rj *msg = rj_get(ch, "message");
    if (!rj_is_object(msg))
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "choices", "'choices[0].message' must be an object");
    rj *tcs = rj_get(msg, "tool_calls");
    size_t cap = 2 + (rj_is_array(tcs) ? rj_size(tcs) : 0);
    r->parts = ra_alloc(&r->arena, cap * sizeof *r->parts);
    if (!r->parts) return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
    const char *reasoning = rj_gets(msg, "reasoning_content");
    if (!reasoning) reasoning = rj_gets(msg, "reasoning");
    if (reasoning) r->parts[r->n_parts].type = RECIPE_PART_REASONING, r->parts[r->n_parts++].text = reasoning;
    const char *content = rj_gets(msg, "content");
    if (content) r->parts[r->n_parts].type = RECIPE_PART_TEXT, r->parts[r->n_parts++].text = content;
    for (size_t i = 0; rj_is_array(tcs) && i < rj_size(tcs); i++) {
        rj *tc = rj_at(tcs, i), *fn = rj_get(tc, "function");
        if (!rj_gets(fn, "name"))
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "tool_calls", "tool_calls[%zu].function.name missing",
                               i);
        recipe_part *p = &r->parts[r->n_parts++];
        p->type = RECIPE_PART_TOOL_CALL;
        p->id = rj_gets(tc, "id");
        p->name = rj_gets(fn, "name");
        p->args = rj_gets(fn, "arguments") ? rj_gets(fn, "arguments") : "{}";
    }
    r->finish = recipe_finish_from_chat(rj_gets(ch, "finish_reason"));
    if (rj_is_string(rj_get(ch, "stop_reason"))) {
        r->stop_sequence = rj_gets(ch, "stop_reason");
        if (r->finish == RECIPE_FINISH_EOS) r->finish = RECIPE_FINISH_STOP_STRING;
    }
    rj *u = rj_get(b, "usage");
    if (rj_is_object(u)) {
        r->has_usage = true;
        r->usage.prompt = rj_int(rj_get(u, "prompt_tokens"));
        r->usage.output = rj_int(rj_get(u, "completion_tokens"));
        r->usage.cache_read = rj_int(rj_get(rj_get(u, "prompt_tokens_details"), "cached_tokens"));
        r->usage.replayed = rj_int(rj_get(rj_get(u, "prompt_tokens_details"), "replayed_tokens"));
        r->usage.reasoning = rj_int(rj_get(rj_get(u, "completion_tokens_details"), "reasoning_tokens"));
        r->usage.accepted_draft = rj_int(rj_get(rj_get(u, "completion_tokens_details"), "accepted_prediction_tokens"));
    }
    return 0;
}
