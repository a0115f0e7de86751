/* messages.c - Anthropic Messages codec: request <-> canonical, response <->
 * canonical (protocols.md §2). A user turn's tool_result blocks become canonical
 * TOOL messages (one per result) and its other blocks a USER message; encoding
 * merges same-role neighbours back into one turn, tool results first. The
 * top-level `system` becomes one SYSTEM message marked top_level (Claude Code's
 * per-request x-anthropic-billing-header block is dropped: it would defeat prefix
 * caching). Called through codec.c. */
#include <stdio.h>

#include "recipe/recipe_internal.h"
#include "recipe/writer.h"

static int oom(recipe_error *err) { return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory"); }

static int parse_image(recipe_part *p, const rj *blk, const char *path, recipe_error *err) {
    rj *src = rj_get(blk, "source");
    const char *type = rj_gets(src, "type");
    p->type = RECIPE_PART_IMAGE;
    if (type && !strcmp(type, "base64") && rj_gets(src, "data")) {
        p->media_type = rj_gets(src, "media_type");
        p->data = rj_gets(src, "data");
        return 0;
    }
    if (type && !strcmp(type, "url") && rj_gets(src, "url")) {
        p->url = rj_gets(src, "url");
        return 0;
    }
    return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path, "'%s.source' must be a base64 or url image source", path);
}

/* Blocks of a tool_result content / simple text+image content. */
static int parse_simple_blocks(recipe_request *r, const rj *c, recipe_part **out, size_t *n, bool *is_string,
                               const char *path, recipe_error *err) {
    *out = NULL;
    *n = 0;
    *is_string = false;
    if (!c || rj_is_null(c)) {
        *is_string = true;
        return 0;
    }
    if (rj_is_string(c)) return string_content(&r->arena, rj_str(c), out, n, is_string, err);
    if (!rj_is_array(c))
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path, "'%s' must be a string or an array", path);
    size_t cnt = rj_size(c);
    recipe_part *ps = ra_alloc(&r->arena, (cnt ? cnt : 1) * sizeof *ps);
    if (!ps) return oom(err);
    for (size_t i = 0; i < cnt; i++) {
        rj *b = rj_at(c, i);
        const char *type = rj_gets(b, "type");
        char p2[RECIPE_PATH];
        path_idx(p2, sizeof p2, path, i, "");
        if (type && !strcmp(type, "text") && rj_gets(b, "text")) {
            ps[i].type = RECIPE_PART_TEXT;
            ps[i].text = rj_gets(b, "text");
        } else if (type && !strcmp(type, "image")) {
            if (parse_image(&ps[i], b, p2, err)) return -1;
        } else return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, p2, "'%s' must be a text or image block", p2);
        ps[i].cache_control = RAW(r, rj_get(b, "cache_control"));
    }
    *out = ps, *n = cnt;
    return 0;
}

/* One wire message -> one or more canonical messages appended to r->messages. */
static int parse_turn(recipe_request *r, const rj *m, size_t idx, recipe_error *err) {
    char path[RECIPE_PATH];
    path_idx(path, sizeof path, "messages", idx, "");
    const char *role = rj_gets(m, "role");
    bool user = role && !strcmp(role, "user"), asst = role && !strcmp(role, "assistant");
    if (!user && !asst)
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path, "'%s.role' must be user or assistant", path);
    rj *c = rj_get(m, "content");
    char cpath[RECIPE_PATH];
    size_t pl = strlen(path);
    memcpy(cpath, path, pl);
    memcpy(cpath + pl, ".content", 9);
    if (rj_is_string(c)) {
        recipe_message *o = &r->messages[r->n_messages++];
        o->role = user ? RECIPE_ROLE_USER : RECIPE_ROLE_ASSISTANT;
        o->content_string = true;
        o->parts = ra_alloc(&r->arena, sizeof *o->parts);
        if (!o->parts) return oom(err);
        o->parts[0].type = RECIPE_PART_TEXT;
        o->parts[0].text = rj_str(c);
        o->n_parts = 1;
        return 0;
    }
    if (!rj_is_array(c))
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path, "'%s.content' must be a string or an array", path);
    size_t cnt = rj_size(c);
    recipe_message *cur = NULL; /* the open USER/ASSISTANT message collecting non-tool_result blocks */
    for (size_t i = 0; i < cnt; i++) {
        rj *b = rj_at(c, i);
        enum {
            B_TYPE,
            B_TEXT,
            B_ID,
            B_NAME,
            B_INPUT,
            B_THINKING,
            B_SIGNATURE,
            B_DATA,
            B_CACHE,
            B_CONTENT,
            B_TOOL_USE_ID,
            B_IS_ERROR,
            B_N
        };
        static const jkey bkeys[B_N] = {JKEY("type"),          JKEY("text"),     JKEY("id"),          JKEY("name"),
                                        JKEY("input"),         JKEY("thinking"), JKEY("signature"),   JKEY("data"),
                                        JKEY("cache_control"), JKEY("content"),  JKEY("tool_use_id"), JKEY("is_error")};
        rj *v[B_N];
        jpick(b, bkeys, B_N, v);
        const char *type = rj_str(v[B_TYPE]);
        char p2[RECIPE_PATH];
        path_idx(p2, sizeof p2, cpath, i, "");
        if (!type) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, p2, "'%s.type' missing", p2);
        if (user && !strcmp(type, "tool_result")) {
            recipe_message *o = &r->messages[r->n_messages++];
            o->role = RECIPE_ROLE_TOOL;
            recipe_part *p = o->parts = ra_alloc(&r->arena, sizeof *p);
            if (!p) return oom(err);
            o->n_parts = 1;
            p->type = RECIPE_PART_TOOL_RESULT;
            p->id = rj_str(v[B_TOOL_USE_ID]);
            if (!p->id) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, p2, "'%s.tool_use_id' missing", p2);
            p->is_error = rj_is_true(v[B_IS_ERROR]);
            p->cache_control = RAW(r, v[B_CACHE]);
            char p3[RECIPE_PATH];
            path_idx(p3, sizeof p3, cpath, i, ".content");
            if (parse_simple_blocks(r, v[B_CONTENT], &p->parts, &p->n_parts, &p->content_string, p3, err)) return -1;
            cur = NULL;
            continue;
        }
        if (!cur) {
            cur = &r->messages[r->n_messages++];
            cur->role = user ? RECIPE_ROLE_USER : RECIPE_ROLE_ASSISTANT;
            cur->parts = ra_alloc(&r->arena, (cnt - i) * sizeof *cur->parts);
            if (!cur->parts) return oom(err);
        }
        recipe_part *p = &cur->parts[cur->n_parts];
        if (!strcmp(type, "text")) {
            p->type = RECIPE_PART_TEXT;
            p->text = rj_str(v[B_TEXT]);
            if (!p->text) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, p2, "'%s.text' must be a string", p2);
        } else if (!strcmp(type, "image")) {
            if (parse_image(p, b, p2, err)) return -1;
        } else if (asst && !strcmp(type, "tool_use")) {
            p->type = RECIPE_PART_TOOL_CALL;
            p->id = rj_str(v[B_ID]);
            p->name = rj_str(v[B_NAME]);
            if (!p->id || !p->name)
                return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, p2, "'%s' needs string id and name", p2);
            rj *in = v[B_INPUT];
            p->args = in ? RAW(r, in) : "{}";
        } else if (asst && !strcmp(type, "thinking")) {
            p->type = RECIPE_PART_REASONING;
            p->text = rj_str(v[B_THINKING]);
            if (!p->text) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, p2, "'%s.thinking' must be a string", p2);
            p->signature = rj_str(v[B_SIGNATURE]);
        } else if (asst && !strcmp(type, "redacted_thinking")) {
            p->type = RECIPE_PART_REDACTED;
            p->data = rj_str(v[B_DATA]);
            if (!p->data) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, p2, "'%s.data' must be a string", p2);
        } else
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, p2,
                               "'%s': unsupported content block type '%s' in a %s turn", p2, type, role);
        p->cache_control = RAW(r, v[B_CACHE]);
        cur->n_parts++;
    }
    if (cnt == 0) {
        recipe_message *o = &r->messages[r->n_messages++];
        o->role = user ? RECIPE_ROLE_USER : RECIPE_ROLE_ASSISTANT;
    }
    return 0;
}

/* Checks every messages[] entry is an object and allocates room for the canonical messages:
 * the system message + per wire message (1 + its blocks: tool_results split off). */
static int alloc_messages(recipe_request *r, rj *msgs, recipe_error *err) {
    size_t cap = 1;
    for (size_t i = 0; i < rj_size(msgs); i++) {
        rj *m = rj_at(msgs, i), *c = rj_get(m, "content");
        if (!rj_is_object(m))
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "messages", "'messages[%zu]' must be an object", i);
        cap += 1 + (rj_is_array(c) ? rj_size(c) : 0);
    }
    r->messages = ra_alloc(&r->arena, cap * sizeof *r->messages);
    if (!r->messages) return oom(err);
    return 0;
}

/* The top-level `system` (a string or text blocks) -> one top_level SYSTEM message. */
static int parse_system(recipe_request *r, rj *sys, recipe_error *err) {
    if (rj_is_string(sys)) {
        recipe_message *o = &r->messages[r->n_messages++];
        o->role = RECIPE_ROLE_SYSTEM;
        o->top_level = o->content_string = true;
        o->parts = ra_alloc(&r->arena, sizeof *o->parts);
        if (!o->parts) return oom(err);
        o->parts[0].type = RECIPE_PART_TEXT;
        o->parts[0].text = rj_str(sys);
        o->n_parts = 1;
    } else if (rj_is_array(sys)) {
        recipe_message *o = &r->messages[r->n_messages++];
        o->role = RECIPE_ROLE_SYSTEM;
        o->top_level = true;
        o->parts = ra_alloc(&r->arena, (rj_size(sys) + 1) * sizeof *o->parts);
        if (!o->parts) return oom(err);
        for (size_t i = 0; i < rj_size(sys); i++) {
            rj *blk = rj_at(sys, i);
            const char *t = rj_gets(blk, "text");
            if (!t)
                return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "system", "'system[%zu]' must be a text block", i);
            if (!strncmp(t, "x-anthropic-billing-header", 26)) continue;
            o->parts[o->n_parts].type = RECIPE_PART_TEXT;
            o->parts[o->n_parts].text = t;
            o->parts[o->n_parts++].cache_control = RAW(r, rj_get(blk, "cache_control"));
        }
    } else if (sys && !rj_is_null(sys))
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "system",
                           "'system' must be a string or an array of text blocks");
    return 0;
}

static int parse_tools(recipe_request *r, rj *tools, recipe_error *err) {
    if (rj_is_array(tools)) {
        size_t n = rj_size(tools);
        r->tools = ra_alloc(&r->arena, (n ? n : 1) * sizeof *r->tools);
        if (!r->tools) return oom(err);
        for (size_t i = 0; i < n; i++) {
            static const jkey tkeys[] = {JKEY("type"),         JKEY("name"),          JKEY("description"),
                                         JKEY("input_schema"), JKEY("cache_control"), JKEY("strict")};
            rj *tv[6];
            jpick(rj_at(tools, i), tkeys, 6, tv);
            const char *type = rj_str(tv[0]);
            if (type && strcmp(type, "custom"))
                return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "tools", "tools[%zu]: unsupported tool type '%s'",
                                   i, type);
            recipe_tool *d = &r->tools[r->n_tools++];
            d->name = rj_str(tv[1]);
            if (!d->name) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "tools", "'tools[%zu].name' missing", i);
            d->description = rj_str(tv[2]);
            d->parameters = RAW(r, tv[3]);
            d->cache_control = RAW(r, tv[4]);
            d->strict = -1;
            if (rjv_bool(tv[5], "strict", &d->strict, err, "tools")) return -1;
        }
    } else if (tools && !rj_is_null(tools))
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "tools", "'tools' must be an array");
    return 0;
}

static int parse_tool_choice(recipe_request *r, rj *tc, recipe_error *err) {
    if (rj_is_object(tc)) {
        const char *type = rj_gets(tc, "type");
        if (!type) type = "";
        if (!strcmp(type, "auto")) r->tool_choice = RECIPE_TOOL_CHOICE_AUTO;
        else if (!strcmp(type, "any")) r->tool_choice = RECIPE_TOOL_CHOICE_REQUIRED;
        else if (!strcmp(type, "none")) r->tool_choice = RECIPE_TOOL_CHOICE_NONE;
        else if (!strcmp(type, "tool") && rj_gets(tc, "name")) {
            r->tool_choice = RECIPE_TOOL_CHOICE_NAMED;
            r->tool_choice_name = rj_gets(tc, "name");
        } else
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "tool_choice",
                               "'tool_choice.type' must be auto, any, none or tool (with a name)");
        int dis = -1;
        if (jget_bool(tc, "disable_parallel_tool_use", &dis, err, "tool_choice")) return -1;
        if (dis >= 0) r->parallel_tool_calls = !dis;
    } else if (tc && !rj_is_null(tc))
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "tool_choice", "'tool_choice' must be an object");
    return 0;
}

static int parse_stop_sequences(recipe_request *r, rj *ss, recipe_error *err) {
    if (rj_is_array(ss)) {
        size_t n = rj_size(ss);
        r->stop = ra_alloc(&r->arena, (n ? n : 1) * sizeof *r->stop);
        if (!r->stop) return oom(err);
        for (size_t i = 0; i < n; i++) {
            const char *s = rj_str(rj_at(ss, i));
            if (!s)
                return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "stop_sequences",
                                   "'stop_sequences[%zu]' must be a string", i);
            r->stop[r->n_stop++] = s;
        }
    } else if (ss && !rj_is_null(ss))
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "stop_sequences", "'stop_sequences' must be an array");
    return 0;
}

/* `thinking`: enabled (with a budget below max_tokens, so parsed after it), disabled or adaptive. */
static int parse_thinking(recipe_request *r, rj *v, recipe_error *err) {
    rj *th = NULL;
    if (rjv_obj(v, "thinking", &th, err, "")) return -1;
    if (th) {
        const char *type = rj_gets(th, "type");
        if (type && !strcmp(type, "enabled")) {
            rj *bt = rj_get(th, "budget_tokens");
            if (!rj_is_integer(bt) || rj_int(bt) < 1024 || rj_int(bt) >= r->max_tokens)
                return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "thinking.budget_tokens",
                                   "'thinking.budget_tokens' must be an integer >= 1024 and less than max_tokens");
            r->thinking = 1;
            r->thinking_budget = rj_int(bt);
        } else if (type && !strcmp(type, "disabled")) r->thinking = 0;
        else if (type && !strcmp(type, "adaptive")) r->thinking = 1, r->thinking_adaptive = true;
        else
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "thinking.type",
                               "'thinking.type' must be enabled, disabled or adaptive");
    }
    return 0;
}

/* A JSON output format ({"type": "json_schema", "schema": {...}}) at `path` (output_config.format, or
 * the structured-outputs beta's top-level output_format); absent or null: none. */
static int parse_format(recipe_request *r, rj *fmt, const char *path, recipe_error *err) {
    if (rj_is_absent(fmt)) return 0;
    const char *type = rj_gets(fmt, "type");
    if (!rj_is_object(fmt) || !type || strcmp(type, "json_schema"))
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path,
                           "'%s' must be {\"type\": \"json_schema\", \"schema\": {...}}", path);
    rj *schema = rj_get(fmt, "schema");
    if (!rj_is_object(schema))
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path, "'%s.schema' must be an object", path);
    if (r->format == RECIPE_FORMAT_JSON_SCHEMA)
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path,
                           "'output_config.format' and 'output_format' both set the output format; give one");
    r->format = RECIPE_FORMAT_JSON_SCHEMA;
    r->format_schema = RAW(r, schema);
    return r->format_schema ? 0 : recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
}

/* `output_config`: the reasoning effort and a JSON schema output format. */
static int parse_output_config(recipe_request *r, rj *v, recipe_error *err) {
    rj *oc = NULL;
    if (rjv_obj(v, "output_config", &oc, err, "")) return -1;
    if (oc) {
        const char *eff = rj_gets(oc, "effort");
        if (eff && !(r->reasoning_effort = effort_parse(eff)))
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "output_config.effort",
                               "unknown 'output_config.effort'");
        if (parse_format(r, rj_get(oc, "format"), "output_config.format", err)) return -1;
    }
    return 0;
}

int messages_request_parse(recipe_request *r, rj *b, unsigned flags, recipe_error *err);
int messages_request_parse(recipe_request *r, rj *b, unsigned flags, recipe_error *err) {
    /* every top-level field in one pass over the body (most optional fields are absent) */
    enum {
        A_MODEL = X_COUNT,
        A_MAX_TOKENS,
        A_MESSAGES,
        A_SYSTEM,
        A_TOOLS,
        A_TOOL_CHOICE,
        A_STOP,
        A_TEMP,
        A_TOP_P,
        A_STREAM,
        A_METADATA,
        A_THINKING,
        A_OUTPUT_CONFIG,
        A_OUTPUT_FORMAT,
        A_COUNT
    };
    static const jkey keys[A_COUNT] = {
        RECIPE_EXT_KEYS, JKEY("model"),       JKEY("max_tokens"),     JKEY("messages"),      JKEY("system"),
        JKEY("tools"),   JKEY("tool_choice"), JKEY("stop_sequences"), JKEY("temperature"),   JKEY("top_p"),
        JKEY("stream"),  JKEY("metadata"),    JKEY("thinking"),       JKEY("output_config"), JKEY("output_format")};
    rj *bv[A_COUNT];
    jpick(b, keys, A_COUNT, bv);
    if (rjv_str(bv[A_MODEL], "model", &r->model, err, "")) return -1;
    rj *mt = bv[A_MAX_TOKENS];
    if (!mt && (flags & RECIPE_PARSE_COUNT_TOKENS)) { /* count_tokens takes no max_tokens */
    } else if (!rj_is_integer(mt) || rj_int(mt) < 1)
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "max_tokens", "'max_tokens' must be a positive integer");
    else r->max_tokens = rj_int(mt);
    rj *msgs = bv[A_MESSAGES];
    if (!rj_is_array(msgs))
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "messages", "'messages' must be an array");
    if (alloc_messages(r, msgs, err)) return -1;
    if (parse_system(r, bv[A_SYSTEM], err)) return -1;
    for (size_t i = 0; i < rj_size(msgs); i++)
        if (parse_turn(r, rj_at(msgs, i), i, err)) return -1;

    if (parse_tools(r, bv[A_TOOLS], err)) return -1;
    if (parse_tool_choice(r, bv[A_TOOL_CHOICE], err)) return -1;
    if (parse_stop_sequences(r, bv[A_STOP], err)) return -1;
    if (rjv_num(bv[A_TEMP], "temperature", &r->temperature, 0, 1, err, "")) return -1;
    if (rjv_num(bv[A_TOP_P], "top_p", &r->top_p, 0, 1, err, "")) return -1;
    int stream = 0;
    if (rjv_bool(bv[A_STREAM], "stream", &stream, err, "")) return -1;
    r->stream = stream == 1;
    rj *md = NULL;
    if (rjv_obj(bv[A_METADATA], "metadata", &md, err, "")) return -1;
    if (md && jget_str(md, "user_id", &r->user, err, "metadata")) return -1;
    if (parse_thinking(r, bv[A_THINKING], err)) return -1;
    if (parse_output_config(r, bv[A_OUTPUT_CONFIG], err)) return -1;
    if (parse_format(r, bv[A_OUTPUT_FORMAT], "output_format", err)) return -1;
    return parse_extensions_v(r, bv, err);
}

/* ---------------------------------------------------------------- request encode */

static bool id_ok(const char *id) {
    if (!id || !*id) return false;
    for (const char *c = id; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
              *c == '-'))
            return false;
    return true;
}

/* Anthropic ids must match ^[a-zA-Z0-9_-]+$: other bytes become '_'; missing ids are minted. */
static const char *safe_id(recipe_arena *a, const char *id, const char *prefix, size_t idx) {
    if (id_ok(id)) return id;
    if (!id || !*id) {
        char tmp[64];
        mint_id(tmp, sizeof tmp, prefix, idx);
        return ra_strndup(a, tmp, strlen(tmp));
    }
    char *d = ra_strndup(a, id, strlen(id));
    for (char *c = d; d && *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
              *c == '-'))
            *c = '_';
    return d;
}

/* Whether a part produces a block (Anthropic rejects empty text blocks). */
static bool emits_block(const recipe_part *p) { return p->type != RECIPE_PART_TEXT || (p->text && *p->text); }

static void w_block(rw *w, recipe_arena *a, const recipe_part *p, size_t idx) {
    if (!emits_block(p)) return;
    rw_obj(w);
    switch (p->type) {
    case RECIPE_PART_TEXT:
        rw_kstr(w, "type", "text");
        rw_kstr(w, "text", p->text);
        break;
    case RECIPE_PART_IMAGE:
        rw_kstr(w, "type", "image");
        rw_kobj(w, "source");
        if (p->data && p->media_type) {
            rw_kstr(w, "type", "base64");
            rw_kstr(w, "media_type", p->media_type);
            rw_kstr(w, "data", p->data);
        } else {
            rw_kstr(w, "type", "url");
            rw_kstr(w, "url", image_url(a, p));
        }
        rw_end(w);
        break;
    case RECIPE_PART_REASONING: {
        const char *t = reasoning_text(a, p);
        rw_kstr(w, "type", "thinking");
        rw_kstr(w, "thinking", t ? t : "");
        rw_kstr(w, "signature", p->signature);
        break;
    }
    case RECIPE_PART_REDACTED:
        rw_kstr(w, "type", "redacted_thinking");
        rw_kstr(w, "data", p->data);
        break;
    case RECIPE_PART_TOOL_CALL: {
        rw_kstr(w, "type", "tool_use");
        rw_kstr(w, "id", safe_id(a, p->id, "toolu_", idx));
        rw_kstr(w, "name", p->name);
        rw_key(w, "input");
        rw_args_object(w, p->args);
        break;
    }
    case RECIPE_PART_TOOL_RESULT:
        rw_kstr(w, "type", "tool_result");
        rw_kstr(w, "tool_use_id", safe_id(a, p->id, "toolu_", idx));
        if (p->content_string) {
            const char *t = join_text(a, p->parts, p->n_parts, "");
            rw_kstr(w, "content", t ? t : "");
        } else {
            rw_karr(w, "content");
            for (size_t i = 0; i < p->n_parts; i++) w_block(w, a, &p->parts[i], i);
            rw_end(w);
        }
        if (p->is_error) rw_key(w, "is_error"), rw_bool(w, true);
        break;
    }
    rw_kraw(w, "cache_control", p->cache_control);
    rw_end(w);
}

static bool is_sys(const recipe_message *m) {
    return m->role == RECIPE_ROLE_SYSTEM || m->role == RECIPE_ROLE_DEVELOPER;
}
static bool wire_user(const recipe_message *m) { return m->role != RECIPE_ROLE_ASSISTANT; }

/* Whether any user/assistant message yields a block (system messages are hoisted). */
static bool has_turn_blocks(const recipe_request *r) {
    bool any = false;
    for (size_t i = 0; i < r->n_messages && !any; i++)
        if (!is_sys(&r->messages[i]))
            for (size_t k = 0; k < r->messages[i].n_parts && !any; k++) any = emits_block(&r->messages[i].parts[k]);
    return any;
}

/* The wire thinking mode: -1 unset, 0 disabled, 1 enabled (sets *budget, may raise *max_tokens), 2 adaptive. */
static int thinking_mode(const recipe_request *r, int64_t *max_tokens, int64_t *budget) {
    int thinking = -1;
    if (r->thinking == 1 && r->thinking_adaptive) thinking = 2;
    else if (r->thinking == 1 || (r->thinking < 0 && r->reasoning_effort > RECIPE_EFFORT_NONE)) {
        thinking = 1;
        *budget =
            r->thinking_budget != RECIPE_UNSET ? r->thinking_budget : recipe_budget_from_effort(r->reasoning_effort);
        /* Anthropic needs budget < max_tokens (both include thinking): keep the requested
         * allowance for the answer on top of the budget */
        if (*max_tokens <= *budget) *max_tokens += *budget;
    } else if (r->thinking == 0 || r->reasoning_effort == RECIPE_EFFORT_NONE) thinking = 0;
    return thinking;
}

/* system: every system/developer message hoisted */
static void w_system(rw *w, recipe_arena *a, const recipe_request *r) {
    size_t n_sys = 0;
    const recipe_message *only = NULL;
    for (size_t i = 0; i < r->n_messages; i++)
        if (is_sys(&r->messages[i])) n_sys++, only = &r->messages[i];
    if (n_sys == 1 && only->content_string) {
        const char *t = join_text(a, only->parts, only->n_parts, "");
        rw_kstr(w, "system", t ? t : "");
    } else if (n_sys) {
        rw_karr(w, "system");
        for (size_t i = 0; i < r->n_messages; i++)
            if (is_sys(&r->messages[i]))
                for (size_t k = 0; k < r->messages[i].n_parts; k++) w_block(w, a, &r->messages[i].parts[k], k);
        rw_end(w);
    }
}

/* turns: maximal runs of non-system messages with the same wire role */
static void w_turns(rw *w, recipe_arena *a, const recipe_request *r) {
    rw_karr(w, "messages");
    size_t tool_idx = 0;
    for (size_t i = 0; i < r->n_messages;) {
        if (is_sys(&r->messages[i])) {
            i++;
            continue;
        }
        bool user = wire_user(&r->messages[i]);
        size_t e = i, nmsg = 0, nblocks = 0;
        for (; e < r->n_messages; e++) {
            const recipe_message *m = &r->messages[e];
            if (is_sys(m)) continue;
            if (wire_user(m) != user) break;
            nmsg++;
            for (size_t k = 0; k < m->n_parts; k++) nblocks += emits_block(&m->parts[k]);
        }
        const recipe_message *first = &r->messages[i];
        bool single = nmsg == 1 && first->content_string && first->role != RECIPE_ROLE_TOOL && first->n_parts == 1 &&
                      first->parts[0].type == RECIPE_PART_TEXT;
        if (single || nblocks) {
            rw_obj(w);
            rw_kstr(w, "role", user ? "user" : "assistant");
            if (single) {
                rw_kstr(w, "content", first->parts[0].text ? first->parts[0].text : "");
                tool_idx++;
            } else {
                rw_karr(w, "content");
                for (size_t j = i; j < e; j++) {
                    if (is_sys(&r->messages[j])) continue;
                    for (size_t k = 0; k < r->messages[j].n_parts; k++)
                        w_block(w, a, &r->messages[j].parts[k], tool_idx++);
                }
                rw_end(w);
            }
            rw_end(w);
        }
        i = e;
    }
    rw_end(w);
}

static void w_tools(rw *w, const recipe_request *r) {
    if (!r->n_tools) return;
    rw_karr(w, "tools");
    for (size_t i = 0; i < r->n_tools; i++) {
        const recipe_tool *t = &r->tools[i];
        rw_obj(w);
        rw_kstr(w, "name", t->name);
        rw_kstr(w, "description", t->description);
        rw_key(w, "input_schema");
        if (t->parameters) rw_raw(w, t->parameters);
        else {
            rw_obj(w);
            rw_kstr(w, "type", "object");
            rw_kobj(w, "properties");
            rw_end(w);
            rw_end(w);
        }
        rw_kraw(w, "cache_control", t->cache_control);
        rw_end(w);
    }
    rw_end(w);
}

static void w_tool_choice(rw *w, const recipe_request *r) {
    const char *tc = NULL;
    switch (r->tool_choice) {
    case RECIPE_TOOL_CHOICE_NONE: tc = "none"; break;
    case RECIPE_TOOL_CHOICE_AUTO: tc = "auto"; break;
    case RECIPE_TOOL_CHOICE_REQUIRED: tc = "any"; break;
    case RECIPE_TOOL_CHOICE_NAMED: tc = "tool"; break;
    default:
        if (r->n_tools && r->parallel_tool_calls == 0) tc = "auto";
    }
    if (tc) {
        rw_kobj(w, "tool_choice");
        rw_kstr(w, "type", tc);
        if (r->tool_choice == RECIPE_TOOL_CHOICE_NAMED) rw_kstr(w, "name", r->tool_choice_name);
        if (r->parallel_tool_calls >= 0) rw_key(w, "disable_parallel_tool_use"), rw_bool(w, !r->parallel_tool_calls);
        rw_end(w);
    }
}

static void w_output_config(rw *w, const recipe_request *r) {
    bool fmt = (r->format == RECIPE_FORMAT_JSON_SCHEMA && r->format_schema) || r->format == RECIPE_FORMAT_JSON_OBJECT;
    bool eff = r->source == RECIPE_API_MESSAGES && r->reasoning_effort;
    if (fmt || eff) {
        rw_kobj(w, "output_config");
        if (fmt) {
            rw_kobj(w, "format");
            rw_kstr(w, "type", "json_schema");
            rw_key(w, "schema");
            if (r->format == RECIPE_FORMAT_JSON_SCHEMA) rw_raw(w, r->format_schema);
            else {
                rw_obj(w);
                rw_kstr(w, "type", "object");
                rw_end(w);
            }
            rw_end(w);
        }
        if (eff) rw_kstr(w, "effort", recipe_effort_name(r->reasoning_effort));
        rw_end(w);
    }
}

int messages_request_write(rw *w, const recipe_request *r, recipe_error *err);
int messages_request_write(rw *w, const recipe_request *r, recipe_error *err) {
    if (!has_turn_blocks(r))
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "messages", "no user or assistant messages to encode");
    recipe_arena a = {0};
    int64_t max_tokens = r->max_tokens != RECIPE_UNSET ? r->max_tokens : 4096;
    int64_t budget = RECIPE_UNSET;
    int thinking = thinking_mode(r, &max_tokens, &budget); /* 0 disabled, 1 enabled, 2 adaptive */
    rw_obj(w);
    rw_kstr(w, "model", r->model);
    rw_kint(w, "max_tokens", max_tokens);
    w_system(w, &a, r);
    w_turns(w, &a, r);
    w_tools(w, r);
    w_tool_choice(w, r);
    if (r->n_stop) {
        rw_karr(w, "stop_sequences");
        for (size_t i = 0; i < r->n_stop; i++) rw_str(w, r->stop[i]);
        rw_end(w);
    }
    /* OpenAI's 0-2 range is not rescaled; values above Anthropic's maximum are clamped */
    rw_kreal(w, "temperature", r->temperature > 1 ? 1 : r->temperature);
    rw_kreal(w, "top_p", r->top_p);
    rw_kint(w, "top_k", r->top_k);
    if (r->stream) rw_key(w, "stream"), rw_bool(w, true);
    if (r->user) {
        rw_kobj(w, "metadata");
        rw_kstr(w, "user_id", r->user);
        rw_end(w);
    }
    if (thinking >= 0) {
        rw_kobj(w, "thinking");
        rw_kstr(w, "type", thinking == 2 ? "adaptive" : thinking ? "enabled" : "disabled");
        if (thinking == 1) rw_kint(w, "budget_tokens", budget);
        rw_end(w);
    }
    w_output_config(w, r);
    write_extensions(w, r);
    rw_end(w);
    ra_free(&a);
    return 0;
}

static json_t *block_of(recipe_arena *a, const recipe_part *p, size_t idx) {
    rw w;
    rw_init_tree(&w);
    w_block(&w, a, p, idx);
    return rw_finish(&w);
}

/* ---------------------------------------------------------------- response */

json_t *usage_messages(const recipe_usage *u);
json_t *usage_messages(const recipe_usage *u) {
    int64_t in = u->prompt - u->cache_read - u->cache_write;
    json_t *o = json_pack("{s:I,s:I,s:I,s:I}", "input_tokens", (json_int_t)(in > 0 ? in : 0), "output_tokens",
                          (json_int_t)u->output, "cache_creation_input_tokens", (json_int_t)u->cache_write,
                          "cache_read_input_tokens", (json_int_t)u->cache_read);
    /* cinfer: input tokens (counted in input_tokens) recomputed by bounded replay */
    if (o && u->replayed > 0) json_object_set_new(o, "cinfer_replayed_input_tokens", json_integer(u->replayed));
    /* cinfer: output tokens (counted in output_tokens) that speculative decoding drafted and the model accepted */
    if (o && u->accepted_draft > 0)
        json_object_set_new(o, "cinfer_accepted_prediction_tokens", json_integer(u->accepted_draft));
    return o;
}

/* A stand-in signature for reasoning we produced: 64 hex digits derived from the text
 * (vLLM sends random hex; signatures we get back are ignored). */
void synth_signature(char out[72], const char *text, size_t len);
void synth_signature(char out[72], const char *text, size_t len) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)text[i]) * 1099511628211ull;
    for (int k = 0; k < 4; k++) snprintf(out + 16 * k, 17, "%016llx", (unsigned long long)mix64(h + (uint64_t)k));
}

json_t *messages_response_encode(const recipe_response *r, recipe_error *err);
json_t *messages_response_encode(const recipe_response *r, recipe_error *err) {
    (void)err;
    recipe_arena a = {0};
    json_t *content = json_array();
    bool calls = false;
    for (size_t i = 0; i < r->n_parts; i++) {
        const recipe_part *p = &r->parts[i];
        json_t *b;
        if (p->type == RECIPE_PART_REASONING) {
            const char *t = reasoning_text(&a, p);
            if (!t) t = "";
            char sig[72];
            if (!p->signature) synth_signature(sig, t, strlen(t));
            b = json_pack("{s:s,s:o,s:o}", "type", "thinking", "thinking", jsnew(t), "signature",
                          jsnew(p->signature ? p->signature : sig));
        } else {
            calls |= p->type == RECIPE_PART_TOOL_CALL;
            b = block_of(&a, p, i);
        }
        if (b) json_array_append_new(content, b);
    }
    recipe_finish f = calls ? RECIPE_FINISH_TOOL_CALLS : r->finish;
    json_t *o = json_object();
    jset(o, "id", jsnew(r->id ? r->id : default_id(&a, "msg_", r)));
    jset(o, "type", json_string("message"));
    jset(o, "role", json_string("assistant"));
    jset(o, "model", jsnew(r->model ? r->model : ""));
    jset(o, "content", content);
    const char *sr = recipe_finish_messages(f);
    jset(o, "stop_reason", sr ? json_string(sr) : json_null());
    jset(o, "stop_sequence",
         f == RECIPE_FINISH_STOP_STRING && r->stop_sequence ? jsnew(r->stop_sequence) : json_null());
    recipe_usage zero = {0};
    jset(o, "usage", usage_messages(r->has_usage ? &r->usage : &zero));
    ra_free(&a);
    return o;
}

int messages_response_parse(recipe_response *r, rj *b, recipe_error *err);
int messages_response_parse(recipe_response *r, rj *b, recipe_error *err) {
    r->id = rj_gets(b, "id");
    r->model = rj_gets(b, "model");
    rj *c = rj_get(b, "content");
    if (!rj_is_array(c)) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "content", "'content' must be an array");
    r->parts = ra_alloc(&r->arena, (rj_size(c) + 1) * sizeof *r->parts);
    if (!r->parts) return oom(err);
    for (size_t i = 0; i < rj_size(c); i++) {
        rj *blk = rj_at(c, i);
        const char *type = rj_gets(blk, "type");
        recipe_part *p = &r->parts[r->n_parts];
        if (!type) continue;
        if (!strcmp(type, "text") && rj_gets(blk, "text")) p->type = RECIPE_PART_TEXT, p->text = rj_gets(blk, "text");
        else if (!strcmp(type, "thinking") && rj_gets(blk, "thinking")) {
            p->type = RECIPE_PART_REASONING;
            p->text = rj_gets(blk, "thinking");
            p->signature = rj_gets(blk, "signature");
        } else if (!strcmp(type, "redacted_thinking") && rj_gets(blk, "data"))
            p->type = RECIPE_PART_REDACTED, p->data = rj_gets(blk, "data");
        else if (!strcmp(type, "tool_use") && rj_gets(blk, "name")) {
            p->type = RECIPE_PART_TOOL_CALL;
            p->id = rj_gets(blk, "id");
            p->name = rj_gets(blk, "name");
            rj *in = rj_get(blk, "input");
            p->args = in ? RAW(r, in) : "{}";
        } else continue;
        r->n_parts++;
    }
    r->finish = recipe_finish_from_messages(rj_gets(b, "stop_reason"));
    r->stop_sequence = rj_gets(b, "stop_sequence");
    rj *u = rj_get(b, "usage");
    if (rj_is_object(u)) {
        r->has_usage = true;
        r->usage.cache_read = rj_int(rj_get(u, "cache_read_input_tokens"));
        r->usage.replayed = rj_int(rj_get(u, "cinfer_replayed_input_tokens"));
        r->usage.cache_write = rj_int(rj_get(u, "cache_creation_input_tokens"));
        r->usage.prompt = rj_int(rj_get(u, "input_tokens")) + r->usage.cache_read + r->usage.cache_write;
        r->usage.output = rj_int(rj_get(u, "output_tokens"));
        r->usage.accepted_draft = rj_int(rj_get(u, "cinfer_accepted_prediction_tokens"));
    }
    return 0;
}
