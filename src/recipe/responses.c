/* responses.c - OpenAI Responses codec: request <-> canonical, response object
 * <-> canonical (protocols.md §3). `instructions` becomes a top_level SYSTEM
 * message; adjacent reasoning / function_call / assistant message items fold
 * into ONE assistant message (as vLLM does) and keep their item ids so they
 * unfold again on the way back. Called through codec.c. */
#include <stdio.h>

#include "recipe/recipe_internal.h"
#include "recipe/writer.h"

static const char *nz(const char *s) { return s ? s : ""; }

static int oom(recipe_error *err) { return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory"); }

static int parse_parts(recipe_request *r, const rj *c, recipe_part **out, size_t *n, bool *is_string, const char *path,
                       recipe_error *err) {
    *out = NULL, *n = 0, *is_string = false;
    if (rj_is_string(c)) return string_content(&r->arena, rj_str(c), out, n, is_string, err);
    if (!rj_is_array(c))
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path, "'%s' must be a string or an array", path);
    size_t cnt = rj_size(c);
    recipe_part *ps = ra_alloc(&r->arena, (cnt ? cnt : 1) * sizeof *ps);
    if (!ps) return oom(err);
    size_t k = 0;
    for (size_t i = 0; i < cnt; i++) {
        rj *p = rj_at(c, i);
        const char *type = rj_gets(p, "type");
        char p2[RECIPE_PATH];
        path_idx(p2, sizeof p2, path, i, "");
        if (!type) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, p2, "'%s.type' missing", p2);
        if (!strcmp(type, "input_text") || !strcmp(type, "output_text") || !strcmp(type, "text")) {
            if (!rj_gets(p, "text"))
                return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, p2, "'%s.text' must be a string", p2);
            ps[k].type = RECIPE_PART_TEXT;
            ps[k++].text = rj_gets(p, "text");
        } else if (!strcmp(type, "input_image")) {
            const char *url = rj_gets(p, "image_url");
            if (!url)
                return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, p2,
                                   "'%s.image_url' must be a string (file ids are not supported)", p2);
            image_from_url(&r->arena, &ps[k], url);
            ps[k++].detail = rj_gets(p, "detail");
        } else if (!strcmp(type, "refusal")) {
            continue;
        } else
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, p2, "'%s': unsupported content part type '%s'", p2,
                               type);
    }
    *out = ps, *n = k;
    return 0;
}

/* Appends a part to the open assistant message (opening one if needed). */
static recipe_part *asst_part(recipe_request *r, recipe_message **open, size_t cap, recipe_error *err) {
    if (!*open) {
        *open = &r->messages[r->n_messages++];
        (*open)->role = RECIPE_ROLE_ASSISTANT;
        (*open)->parts = ra_alloc(&r->arena, cap * sizeof *(*open)->parts);
        if (!(*open)->parts) return oom(err), NULL;
    }
    return &(*open)->parts[(*open)->n_parts++];
}

/* An input item's fields, picked in one pass. */
enum { I_TYPE, I_ROLE, I_CONTENT, I_ID, I_NAME, I_CALL_ID, I_ARGUMENTS, I_SUMMARY, I_ENCRYPTED, I_OUTPUT, I_N };

/* A `message` item: an assistant one folds into the open assistant message; other roles stand alone. */
static int parse_message_item(recipe_request *r, rj **v, const char *role, size_t i, const char *path, size_t part_cap,
                              recipe_message **open, recipe_error *err) {
    char p2[RECIPE_PATH];
    path_idx(p2, sizeof p2, "input", i, ".content");
    recipe_part *ps;
    size_t n;
    bool is_str;
    if (!role) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path, "'%s.role' missing", path);
    if (parse_parts(r, v[I_CONTENT], &ps, &n, &is_str, p2, err)) return -1;
    if (!strcmp(role, "assistant")) {
        if (*open && (*open)->content_string) *open = NULL; /* a plain-string message stands alone */
        for (size_t k = 0; k < n; k++) {
            recipe_part *p = asst_part(r, open, part_cap + 1, err);
            if (!p) return -1;
            *p = ps[k];
            p->item_id = rj_str(v[I_ID]);
        }
        if (!*open) {
            if (!asst_part(r, open, part_cap + 1, err)) return -1;
            (*open)->n_parts = 0;
        }
        (*open)->content_string = is_str;
        if (is_str) *open = NULL;
        return 0;
    }
    *open = NULL;
    recipe_message *m = &r->messages[r->n_messages++];
    if (!strcmp(role, "user")) m->role = RECIPE_ROLE_USER;
    else if (!strcmp(role, "system")) m->role = RECIPE_ROLE_SYSTEM;
    else if (!strcmp(role, "developer")) m->role = RECIPE_ROLE_DEVELOPER;
    else
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path,
                           "'%s.role' '%s' is not user, assistant, system or developer", path, role);
    m->parts = ps, m->n_parts = n, m->content_string = is_str;
    return 0;
}

static int parse_function_call_item(recipe_request *r, rj **v, const char *path, size_t part_cap, recipe_message **open,
                                    recipe_error *err) {
    const char *name = rj_str(v[I_NAME]), *call_id = rj_str(v[I_CALL_ID]), *args = rj_str(v[I_ARGUMENTS]);
    if (!name || !call_id)
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path, "'%s' needs string call_id and name", path);
    if (*open && (*open)->content_string) *open = NULL;
    recipe_part *p = asst_part(r, open, part_cap + 1, err);
    if (!p) return -1;
    p->type = RECIPE_PART_TOOL_CALL;
    p->id = call_id, p->name = name, p->args = args ? args : "{}";
    p->item_id = rj_str(v[I_ID]);
    return 0;
}

static int parse_reasoning_item(recipe_request *r, rj **v, size_t part_cap, recipe_message **open, recipe_error *err) {
    if (*open && (*open)->content_string) *open = NULL;
    recipe_part *p = asst_part(r, open, part_cap + 1, err);
    if (!p) return -1;
    p->type = RECIPE_PART_REASONING;
    p->item_id = rj_str(v[I_ID]);
    p->summary = RAW(r, v[I_SUMMARY]);
    p->signature = rj_str(v[I_ENCRYPTED]); /* kept for round trips; never interpreted */
    rj *c = v[I_CONTENT];
    if (rj_is_array(c)) {
        recipe_buf tb = {0};
        for (size_t k = 0; k < rj_size(c); k++) {
            const char *t = rj_gets(rj_at(c, k), "text");
            if (t) rb_puts(&tb, t);
        }
        p->text = tb.data ? ra_strndup(&r->arena, tb.data, tb.len) : "";
        recipe_buf_free(&tb);
    }
    return 0;
}

static int parse_function_call_output_item(recipe_request *r, rj **v, size_t i, const char *path, recipe_message **open,
                                           recipe_error *err) {
    *open = NULL;
    recipe_message *m = &r->messages[r->n_messages++];
    m->role = RECIPE_ROLE_TOOL;
    recipe_part *p = m->parts = ra_alloc(&r->arena, sizeof *p);
    if (!p) return oom(err);
    m->n_parts = 1;
    p->type = RECIPE_PART_TOOL_RESULT;
    p->id = rj_str(v[I_CALL_ID]);
    if (!p->id) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path, "'%s.call_id' missing", path);
    char p2[RECIPE_PATH];
    path_idx(p2, sizeof p2, "input", i, ".output");
    if (parse_parts(r, v[I_OUTPUT], &p->parts, &p->n_parts, &p->content_string, p2, err)) return -1;
    return 0;
}

/* input[i]; *open is the assistant message folding adjacent items. */
static int parse_input_item(recipe_request *r, rj *it, size_t i, size_t part_cap, recipe_message **open,
                            recipe_error *err) {
    char path[RECIPE_PATH];
    path_idx(path, sizeof path, "input", i, "");
    if (!rj_is_object(it)) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path, "'%s' must be an object", path);
    static const jkey ikeys[I_N] = {
        JKEY("type"),      JKEY("role"),    JKEY("content"),           JKEY("id"),    JKEY("name"), JKEY("call_id"),
        JKEY("arguments"), JKEY("summary"), JKEY("encrypted_content"), JKEY("output")};
    rj *v[I_N];
    jpick(it, ikeys, I_N, v);
    const char *type = rj_str(v[I_TYPE]);
    const char *role = rj_str(v[I_ROLE]);
    if (!type && role) type = "message";
    if (!type) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path, "'%s.type' missing", path);
    if (!strcmp(type, "message")) return parse_message_item(r, v, role, i, path, part_cap, open, err);
    if (!strcmp(type, "function_call")) return parse_function_call_item(r, v, path, part_cap, open, err);
    if (!strcmp(type, "reasoning")) return parse_reasoning_item(r, v, part_cap, open, err);
    if (!strcmp(type, "function_call_output")) return parse_function_call_output_item(r, v, i, path, open, err);
    return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, path, "'%s': unsupported input item type '%s'", path, type);
}

/* `instructions` (a top_level SYSTEM message) and `input` (a string: one USER message; or items). */
static int parse_input(recipe_request *r, rj *input, const char *instr, recipe_error *err) {
    size_t n_items = rj_is_array(input) ? rj_size(input) : 1;
    /* each item adds at most one message; text parts of one message item may be many */
    size_t part_cap = 0;
    for (size_t i = 0; rj_is_array(input) && i < n_items; i++) {
        rj *c = rj_get(rj_at(input, i), "content");
        part_cap += 1 + (rj_is_array(c) ? rj_size(c) : 0);
    }
    r->messages = ra_alloc(&r->arena, (n_items + 1) * sizeof *r->messages);
    if (!r->messages) return oom(err);
    if (instr) {
        recipe_message *m = &r->messages[r->n_messages++];
        m->role = RECIPE_ROLE_SYSTEM;
        m->top_level = m->content_string = true;
        m->parts = ra_alloc(&r->arena, sizeof *m->parts);
        if (!m->parts) return oom(err);
        m->parts[0].type = RECIPE_PART_TEXT;
        m->parts[0].text = instr;
        m->n_parts = 1;
    }
    if (rj_is_string(input)) {
        recipe_message *m = &r->messages[r->n_messages++];
        m->role = RECIPE_ROLE_USER;
        m->content_string = true;
        m->parts = ra_alloc(&r->arena, sizeof *m->parts);
        if (!m->parts) return oom(err);
        m->parts[0].type = RECIPE_PART_TEXT;
        m->parts[0].text = rj_str(input);
        m->n_parts = 1;
        r->input_string = true;
    }
    recipe_message *open = NULL; /* assistant message folding adjacent items */
    for (size_t i = 0; rj_is_array(input) && i < n_items; i++)
        if (parse_input_item(r, rj_at(input, i), i, part_cap, &open, err)) return -1;
    if (r->n_messages == 0) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "input", "'input' is empty");
    return 0;
}

static int parse_tools(recipe_request *r, rj *tools, recipe_error *err) {
    if (rj_is_array(tools)) {
        size_t n = rj_size(tools);
        r->tools = ra_alloc(&r->arena, (n ? n : 1) * sizeof *r->tools);
        if (!r->tools) return oom(err);
        for (size_t i = 0; i < n; i++) {
            static const jkey tkeys[] = {JKEY("type"), JKEY("name"), JKEY("description"), JKEY("parameters"),
                                         JKEY("strict")};
            rj *tv[5];
            jpick(rj_at(tools, i), tkeys, 5, tv);
            const char *type = rj_str(tv[0]);
            if (!type || strcmp(type, "function"))
                return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "tools", "tools[%zu]: unsupported tool type '%s'",
                                   i, type ? type : "(none)");
            recipe_tool *d = &r->tools[r->n_tools++];
            d->name = rj_str(tv[1]);
            if (!d->name) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "tools", "'tools[%zu].name' missing", i);
            d->description = rj_str(tv[2]);
            d->parameters = RAW(r, tv[3]);
            d->strict = -1;
            if (rjv_bool(tv[4], "strict", &d->strict, err, "tools")) return -1;
        }
    } else if (tools && !rj_is_null(tools))
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "tools", "'tools' must be an array");
    return 0;
}

/* `text.format`: text, json_object or json_schema. */
static int parse_text_format(recipe_request *r, rj *v, recipe_error *err) {
    rj *text = NULL, *fmt = NULL;
    if (rjv_obj(v, "text", &text, err, "")) return -1;
    if (text && jget_obj(text, "format", &fmt, err, "text")) return -1;
    if (fmt) {
        const char *type = rj_gets(fmt, "type");
        if (type && !strcmp(type, "text")) r->format = RECIPE_FORMAT_TEXT;
        else if (type && !strcmp(type, "json_object")) r->format = RECIPE_FORMAT_JSON_OBJECT;
        else if (type && !strcmp(type, "json_schema") && rj_is_object(rj_get(fmt, "schema"))) {
            r->format = RECIPE_FORMAT_JSON_SCHEMA;
            r->format_name = rj_gets(fmt, "name");
            r->format_description = rj_gets(fmt, "description");
            r->format_schema = RAW(r, rj_get(fmt, "schema"));
            if (jget_bool(fmt, "strict", &r->format_strict, err, "text.format")) return -1;
        } else
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "text.format",
                               "'text.format' must be text, json_object or json_schema with a schema object");
    }
    return 0;
}

static int parse_reasoning(recipe_request *r, rj *v, recipe_error *err) {
    rj *rs = NULL;
    if (rjv_obj(v, "reasoning", &rs, err, "")) return -1;
    if (rs) {
        const char *eff = rj_gets(rs, "effort");
        if (eff && !(r->reasoning_effort = effort_parse(eff)))
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "reasoning.effort",
                               "'reasoning.effort' must be one of none, minimal, low, medium, high");
        r->reasoning_summary = rj_gets(rs, "summary");
    }
    return 0;
}

int responses_request_parse(recipe_request *r, rj *b, recipe_error *err);
int responses_request_parse(recipe_request *r, rj *b, recipe_error *err) {
    /* every top-level field in one pass over the body (most optional fields are absent) */
    enum {
        R_MODEL = S_COUNT,
        R_INPUT,
        R_INSTRUCTIONS,
        R_TOOLS,
        R_TOOL_CHOICE,
        R_MAX_OUTPUT_TOKENS,
        R_TEXT,
        R_REASONING,
        R_PREVIOUS,
        R_STORE,
        R_TRUNCATION,
        R_INCLUDE,
        R_COUNT
    };
    static const jkey keys[R_COUNT] = {RECIPE_COMMON_KEYS,
                                       JKEY("model"),
                                       JKEY("input"),
                                       JKEY("instructions"),
                                       JKEY("tools"),
                                       JKEY("tool_choice"),
                                       JKEY("max_output_tokens"),
                                       JKEY("text"),
                                       JKEY("reasoning"),
                                       JKEY("previous_response_id"),
                                       JKEY("store"),
                                       JKEY("truncation"),
                                       JKEY("include")};
    rj *bv[R_COUNT];
    jpick(b, keys, R_COUNT, bv);
    if (rjv_str(bv[R_MODEL], "model", &r->model, err, "")) return -1;
    rj *input = bv[R_INPUT];
    const char *instr = NULL;
    if (rjv_str(bv[R_INSTRUCTIONS], "instructions", &instr, err, "")) return -1;
    if (!rj_is_string(input) && !rj_is_array(input))
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "input", "'input' must be a string or an array of items");
    if (parse_input(r, input, instr, err)) return -1;

    if (parse_tools(r, bv[R_TOOLS], err)) return -1;
    if (tool_choice_parse_openai(r, bv[R_TOOL_CHOICE], true, err)) return -1;
    if (parse_common_sampling_v(r, bv, err)) return -1;
    if (rjv_int(bv[R_MAX_OUTPUT_TOKENS], "max_output_tokens", &r->max_tokens, 1, INT32_MAX, err, "")) return -1;
    if (parse_text_format(r, bv[R_TEXT], err)) return -1;
    if (parse_reasoning(r, bv[R_REASONING], err)) return -1;
    if (rjv_str(bv[R_PREVIOUS], "previous_response_id", &r->previous_response_id, err, "")) return -1;
    if (rjv_bool(bv[R_STORE], "store", &r->store, err, "")) return -1;
    if (rjv_str(bv[R_TRUNCATION], "truncation", &r->truncation, err, "")) return -1;
    rj *inc = bv[R_INCLUDE];
    if (inc && !rj_is_null(inc) && !rj_is_array(inc))
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "include", "'include' must be an array");
    r->include = RAW(r, inc);
    return 0;
}

/* ---------------------------------------------------------------- request encode */

static json_t *input_parts(recipe_arena *a, const recipe_part *ps, size_t n, const char *text_type) {
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        if (ps[i].type == RECIPE_PART_TEXT) {
            json_t *p = json_pack("{s:s,s:o}", "type", text_type, "text", jsnew(ps[i].text));
            if (!strcmp(text_type, "output_text")) jset(p, "annotations", json_array());
            json_array_append_new(arr, p);
        } else if (ps[i].type == RECIPE_PART_IMAGE) {
            json_t *p = json_pack("{s:s,s:o}", "type", "input_image", "image_url", jsnew(image_url(a, &ps[i])));
            jset_str(p, "detail", ps[i].detail);
            json_array_append_new(arr, p);
        }
    }
    return arr;
}

static json_t *reasoning_item(recipe_arena *a, const recipe_part *p, bool keep_sig, const char *minted) {
    json_t *it = json_object();
    jset(it, "type", json_string("reasoning"));
    jset_str(it, "id", p->item_id ? p->item_id : minted);
    jset(it, "summary", p->summary ? raw_json(p->summary) : json_array());
    const char *t = p->text ? p->text : p->summary ? NULL : reasoning_text(a, p);
    if (t) jset(it, "content", json_pack("[{s:s,s:o}]", "type", "reasoning_text", "text", jsnew(t)));
    if (keep_sig) jset_str(it, "encrypted_content", p->signature);
    return it;
}

/* The Responses object's echo of the request's tools (always an array) and tool_choice
 * (default "auto"), through the writer's tree backend: the same JSON as the request encoder. */
static json_t *responses_tools(const recipe_request *r) {
    rw w;
    rw_init_tree(&w);
    rw_arr(&w);
    for (size_t i = 0; r && i < r->n_tools; i++) write_tool_openai(&w, &r->tools[i], true);
    rw_end(&w);
    return rw_finish(&w);
}

static json_t *responses_tool_choice(const recipe_request *r) {
    rw w;
    rw_init_tree(&w);
    if (!r || !write_tool_choice_openai(&w, r, true)) rw_str(&w, "auto");
    return rw_finish(&w);
}

json_t *responses_text_format(const recipe_request *r);
json_t *responses_text_format(const recipe_request *r) {
    if (!r || r->format == RECIPE_FORMAT_UNSET) return NULL;
    json_t *f = json_object();
    if (r->format == RECIPE_FORMAT_TEXT) jset(f, "type", json_string("text"));
    else if (r->format == RECIPE_FORMAT_JSON_OBJECT) jset(f, "type", json_string("json_object"));
    else {
        jset(f, "type", json_string("json_schema"));
        jset_str(f, "name", r->format_name ? r->format_name : "response");
        jset_str(f, "description", r->format_description);
        jset(f, "schema", raw_json(r->format_schema));
        jset_tri(f, "strict", r->format_strict);
    }
    return json_pack("{s:o}", "format", f);
}

json_t *responses_reasoning(const recipe_request *r);
json_t *responses_reasoning(const recipe_request *r) {
    if (!r) return NULL;
    recipe_effort eff = r->reasoning_effort;
    if (!eff && r->thinking == 1 && r->thinking_budget != RECIPE_UNSET)
        eff = recipe_effort_from_budget(r->thinking_budget);
    if (!eff && !r->reasoning_summary) return NULL;
    json_t *o = json_object();
    jset_str(o, "effort", recipe_effort_name(eff));
    jset_str(o, "summary", r->reasoning_summary);
    return o;
}

static void w_input_parts(rw *w, recipe_arena *a, const recipe_part *ps, size_t n, const char *text_type) {
    rw_arr(w);
    for (size_t i = 0; i < n; i++) {
        if (ps[i].type == RECIPE_PART_TEXT) {
            rw_obj(w);
            rw_kstr(w, "type", text_type);
            rw_kstr(w, "text", ps[i].text);
            if (!strcmp(text_type, "output_text")) rw_karr(w, "annotations"), rw_end(w);
            rw_end(w);
        } else if (ps[i].type == RECIPE_PART_IMAGE) {
            rw_obj(w);
            rw_kstr(w, "type", "input_image");
            rw_kstr(w, "image_url", image_url(a, &ps[i]));
            rw_kstr(w, "detail", ps[i].detail);
            rw_end(w);
        }
    }
    rw_end(w);
}

/* instructions: the top-level system messages, joined */
static void w_instructions(rw *w, recipe_arena *a, const recipe_request *r) {
    recipe_buf ib = {0};
    for (size_t i = 0; i < r->n_messages; i++) {
        const recipe_message *m = &r->messages[i];
        if (!m->top_level) continue;
        const char *t = join_text(a, m->parts, m->n_parts, "\n");
        if (!t) continue;
        if (ib.len) rb_puts(&ib, "\n");
        rb_puts(&ib, t);
    }
    if (ib.data) rw_key(w, "instructions"), rw_strn(w, ib.data, ib.len);
    recipe_buf_free(&ib);
}

static void w_reasoning_item(rw *w, recipe_arena *a, const recipe_part *p, const char *minted, bool keep_sig) {
    rw_obj(w);
    rw_kstr(w, "type", "reasoning");
    rw_kstr(w, "id", p->item_id ? p->item_id : minted);
    rw_key(w, "summary");
    if (p->summary) rw_raw(w, p->summary);
    else rw_arr(w), rw_end(w);
    const char *t = p->text ? p->text : p->summary ? NULL : reasoning_text(a, p);
    if (t) {
        rw_karr(w, "content");
        rw_obj(w);
        rw_kstr(w, "type", "reasoning_text");
        rw_kstr(w, "text", t);
        rw_end(w);
        rw_end(w);
    }
    if (keep_sig) rw_kstr(w, "encrypted_content", p->signature);
    rw_end(w);
}

/* An assistant message (messages[i]) unfolds into reasoning, function_call and message items. */
static void w_assistant_items(rw *w, recipe_arena *a, const recipe_message *m, size_t i, bool keep_sig) {
    for (size_t k = 0; k < m->n_parts;) {
        const recipe_part *p = &m->parts[k];
        if (p->type == RECIPE_PART_REASONING) {
            char minted[64];
            mint_id(minted, sizeof minted, "rs_", i * 1000 + k);
            w_reasoning_item(w, a, p, minted, keep_sig);
            k++;
        } else if (p->type == RECIPE_PART_TOOL_CALL) {
            rw_obj(w);
            rw_kstr(w, "type", "function_call");
            rw_kstr(w, "id", p->item_id);
            rw_kstr(w, "call_id", p->id);
            rw_kstr(w, "name", p->name);
            rw_kstr(w, "arguments", p->args ? p->args : "{}");
            rw_end(w);
            k++;
        } else if (p->type == RECIPE_PART_TEXT) {
            size_t e = k + 1; /* consecutive text parts of the same item */
            while (e < m->n_parts && m->parts[e].type == RECIPE_PART_TEXT &&
                   ((!p->item_id && !m->parts[e].item_id) ||
                    (p->item_id && m->parts[e].item_id && !strcmp(p->item_id, m->parts[e].item_id))))
                e++;
            rw_obj(w);
            rw_kstr(w, "type", "message");
            rw_kstr(w, "role", "assistant");
            rw_kstr(w, "id", p->item_id);
            rw_key(w, "content");
            if (m->content_string && keep_sig) rw_str(w, nz(join_text(a, p, e - k, "")));
            else w_input_parts(w, a, p, e - k, "output_text");
            rw_end(w);
            k = e;
        } else k++; /* redacted thinking / images: no Responses counterpart */
    }
}

/* The input items array: one item per non-top-level message, assistant messages unfolded. */
static void w_input_items(rw *w, recipe_arena *a, const recipe_request *r, bool keep_sig) {
    rw_karr(w, "input");
    for (size_t i = 0; i < r->n_messages; i++) {
        const recipe_message *m = &r->messages[i];
        if (m->top_level) continue;
        switch (m->role) {
        case RECIPE_ROLE_SYSTEM:
        case RECIPE_ROLE_DEVELOPER:
        case RECIPE_ROLE_USER:
            rw_obj(w);
            rw_kstr(w, "type", "message");
            rw_kstr(w, "role",
                    m->role == RECIPE_ROLE_USER     ? "user"
                    : m->role == RECIPE_ROLE_SYSTEM ? "system"
                                                    : "developer");
            rw_key(w, "content");
            if (m->content_string) rw_str(w, nz(join_text(a, m->parts, m->n_parts, "")));
            else w_input_parts(w, a, m->parts, m->n_parts, "input_text");
            rw_end(w);
            break;
        case RECIPE_ROLE_ASSISTANT: w_assistant_items(w, a, m, i, keep_sig); break;
        case RECIPE_ROLE_TOOL: {
            const recipe_part *p = m->n_parts ? &m->parts[0] : NULL;
            if (!p) break;
            rw_obj(w);
            rw_kstr(w, "type", "function_call_output");
            rw_kstr(w, "call_id", p->id);
            rw_key(w, "output");
            if (p->content_string) rw_str(w, nz(join_text(a, p->parts, p->n_parts, "")));
            else w_input_parts(w, a, p->parts, p->n_parts, "input_text");
            rw_end(w);
            break;
        }
        }
    }
    rw_end(w);
}

static void w_text_format(rw *w, const recipe_request *r) {
    if (r->format == RECIPE_FORMAT_UNSET) return;
    rw_kobj(w, "text");
    rw_kobj(w, "format");
    if (r->format == RECIPE_FORMAT_TEXT) rw_kstr(w, "type", "text");
    else if (r->format == RECIPE_FORMAT_JSON_OBJECT) rw_kstr(w, "type", "json_object");
    else {
        rw_kstr(w, "type", "json_schema");
        rw_kstr(w, "name", r->format_name ? r->format_name : "response");
        rw_kstr(w, "description", r->format_description);
        rw_kraw(w, "schema", r->format_schema);
        rw_ktri(w, "strict", r->format_strict);
    }
    rw_end(w);
    rw_end(w);
}

static void w_reasoning(rw *w, const recipe_request *r) {
    recipe_effort eff = r->reasoning_effort;
    if (!eff && r->thinking == 1 && r->thinking_budget != RECIPE_UNSET)
        eff = recipe_effort_from_budget(r->thinking_budget);
    if (eff || r->reasoning_summary) {
        rw_kobj(w, "reasoning");
        rw_kstr(w, "effort", recipe_effort_name(eff));
        rw_kstr(w, "summary", r->reasoning_summary);
        rw_end(w);
    }
}

int responses_request_write(rw *w, const recipe_request *r, recipe_error *err);
int responses_request_write(rw *w, const recipe_request *r, recipe_error *err) {
    size_t n_plain = 0;
    const recipe_message *plain = NULL;
    for (size_t i = 0; i < r->n_messages; i++)
        if (!r->messages[i].top_level) n_plain++, plain = &r->messages[i];
    if (n_plain == 0) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "input", "no input items to encode");
    recipe_arena a = {0};
    bool keep_sig = r->source == RECIPE_API_RESPONSES;
    rw_obj(w);
    rw_kstr(w, "model", r->model);
    w_instructions(w, &a, r);
    if (r->input_string && n_plain == 1 && plain->role == RECIPE_ROLE_USER && plain->content_string)
        rw_kstr(w, "input", nz(join_text(&a, plain->parts, plain->n_parts, "")));
    else w_input_items(w, &a, r, keep_sig);
    if (r->n_tools) {
        rw_karr(w, "tools");
        for (size_t i = 0; i < r->n_tools; i++) write_tool_openai(w, &r->tools[i], true);
        rw_end(w);
    }
    if (r->tool_choice != RECIPE_TOOL_CHOICE_UNSET) {
        rw_key(w, "tool_choice");
        write_tool_choice_openai(w, r, true);
    }
    rw_ktri(w, "parallel_tool_calls", r->parallel_tool_calls);
    w_text_format(w, r);
    w_reasoning(w, r);
    rw_kint(w, "max_output_tokens", r->max_tokens);
    rw_kreal(w, "temperature", r->temperature);
    rw_kreal(w, "top_p", r->top_p);
    rw_kint(w, "top_k", r->top_k);
    rw_kint(w, "top_logprobs", r->top_logprobs);
    if (r->stream) rw_key(w, "stream"), rw_bool(w, true);
    rw_kstr(w, "user", r->user);
    rw_kraw(w, "metadata", r->metadata);
    rw_kstr(w, "previous_response_id", r->previous_response_id);
    rw_ktri(w, "store", r->store);
    rw_kraw(w, "include", r->include);
    rw_kstr(w, "truncation", r->truncation);
    write_extensions(w, r);
    rw_end(w);
    ra_free(&a);
    return 0;
}

/* ---------------------------------------------------------------- response object */

json_t *usage_responses(const recipe_usage *u);
json_t *usage_responses(const recipe_usage *u) {
    json_t *o = json_pack("{s:I,s:{s:I},s:I,s:{s:I},s:I}", "input_tokens", (json_int_t)u->prompt,
                          "input_tokens_details", "cached_tokens", (json_int_t)u->cache_read, "output_tokens",
                          (json_int_t)u->output, "output_tokens_details", "reasoning_tokens", (json_int_t)u->reasoning,
                          "total_tokens", (json_int_t)(u->prompt + u->output));
    if (o && u->replayed > 0) /* cinfer: bounded replay */
        json_object_set_new(json_object_get(o, "input_tokens_details"), "replayed_tokens", json_integer(u->replayed));
    if (o && u->accepted_draft > 0) /* speculative decoding: Chat's name, in the output details */
        json_object_set_new(json_object_get(o, "output_tokens_details"), "accepted_prediction_tokens",
                            json_integer(u->accepted_draft));
    return o;
}

/* Output items for a response's parts; ids minted from the response id + position. */
json_t *responses_output(const recipe_response *r, const char *resp_id);
json_t *responses_output(const recipe_response *r, const char *resp_id) {
    recipe_arena a = {0};
    json_t *out = json_array();
    uint64_t seed = 0;
    for (const char *s = resp_id; s && *s; s++) seed = seed * 131 + (unsigned char)*s;
    for (size_t k = 0; k < r->n_parts;) {
        const recipe_part *p = &r->parts[k];
        char minted[64];
        if (p->type == RECIPE_PART_REASONING) {
            mint_id(minted, sizeof minted, "rs_", seed + k);
            json_array_append_new(out, reasoning_item(&a, p, false, minted));
            k++;
        } else if (p->type == RECIPE_PART_TOOL_CALL) {
            mint_id(minted, sizeof minted, "fc_", seed + k);
            json_t *it = json_object();
            jset(it, "type", json_string("function_call"));
            jset_str(it, "id", p->item_id ? p->item_id : minted);
            jset_str(it, "call_id", p->id ? p->id : minted + 3);
            jset_str(it, "name", p->name);
            jset_str(it, "arguments", p->args ? p->args : "{}");
            jset(it, "status", json_string("completed"));
            json_array_append_new(out, it);
            k++;
        } else if (p->type == RECIPE_PART_TEXT) {
            size_t e = k + 1;
            while (e < r->n_parts && r->parts[e].type == RECIPE_PART_TEXT) e++;
            mint_id(minted, sizeof minted, "msg_", seed + k);
            json_t *it = json_object();
            jset(it, "type", json_string("message"));
            jset_str(it, "id", p->item_id ? p->item_id : minted);
            jset(it, "status", json_string("completed"));
            jset(it, "role", json_string("assistant"));
            jset(it, "content", input_parts(&a, p, e - k, "output_text"));
            json_array_append_new(out, it);
            k = e;
        } else k++;
    }
    ra_free(&a);
    return out;
}

/* The settings a response object echoes, from the request (defaults without one). */
void responses_echo(json_t *o, const recipe_request *req);
void responses_echo(json_t *o, const recipe_request *req) {
    recipe_arena a = {0};
    const char *instr = NULL;
    for (size_t i = 0; req && i < req->n_messages; i++)
        if (req->messages[i].top_level) instr = join_text(&a, req->messages[i].parts, req->messages[i].n_parts, "\n");
    jset(o, "instructions", instr ? jsnew(instr) : json_null());
    jset(o, "max_output_tokens", req && req->max_tokens != RECIPE_UNSET ? json_integer(req->max_tokens) : json_null());
    jset(o, "metadata", req && req->metadata ? raw_json(req->metadata) : json_object());
    jset(o, "parallel_tool_calls", json_boolean(!req || req->parallel_tool_calls != 0));
    jset(o, "previous_response_id", req && req->previous_response_id ? jsnew(req->previous_response_id) : json_null());
    json_t *rs = responses_reasoning(req);
    jset(o, "reasoning", rs ? rs : json_pack("{s:n,s:n}", "effort", "summary"));
    jset(o, "store", json_boolean(!req || req->store != 0));
    jset(o, "temperature", req && !isnan(req->temperature) ? json_real(req->temperature) : json_real(1.0));
    json_t *tf = responses_text_format(req);
    jset(o, "text", tf ? tf : json_pack("{s:{s:s}}", "format", "type", "text"));
    jset(o, "tool_choice", responses_tool_choice(req));
    jset(o, "tools", responses_tools(req));
    jset(o, "top_p", req && !isnan(req->top_p) ? json_real(req->top_p) : json_real(1.0));
    jset(o, "truncation", json_string(req && req->truncation ? req->truncation : "disabled"));
    jset(o, "user", req && req->user ? jsnew(req->user) : json_null());
    ra_free(&a);
}

/* status / incomplete_details / error for a finish value */
void responses_status(json_t *o, recipe_finish f, const char *error_message);
void responses_status(json_t *o, recipe_finish f, const char *error_message) {
    const char *status = "completed";
    json_t *inc = json_null(), *er = json_null();
    if (f == RECIPE_FINISH_NONE) status = "in_progress";
    else if (f == RECIPE_FINISH_LENGTH || f == RECIPE_FINISH_CANCELLED)
        status = "incomplete", json_decref(inc), inc = json_pack("{s:s}", "reason", "max_output_tokens");
    else if (f == RECIPE_FINISH_CONTENT_FILTER)
        status = "incomplete", json_decref(inc), inc = json_pack("{s:s}", "reason", "content_filter");
    else if (f == RECIPE_FINISH_ERROR)
        status = "failed", json_decref(er),
        er = json_pack("{s:s,s:o}", "code", "server_error", "message",
                       jsnew(error_message ? error_message : "generation failed"));
    jset(o, "status", json_string(status));
    jset(o, "error", er);
    jset(o, "incomplete_details", inc);
}

json_t *responses_response_encode(const recipe_response *r, const recipe_request *req, recipe_error *err);
json_t *responses_response_encode(const recipe_response *r, const recipe_request *req, recipe_error *err) {
    (void)err;
    recipe_arena a = {0};
    json_t *o = json_object();
    const char *id = r->id ? r->id : default_id(&a, "resp_", r);
    jset(o, "id", jsnew(id));
    jset(o, "object", json_string("response"));
    jset(o, "created_at", json_integer(r->created));
    responses_status(o, r->finish, r->error_message);
    jset(o, "model", jsnew(r->model ? r->model : ""));
    jset(o, "output", responses_output(r, id));
    responses_echo(o, req);
    recipe_usage zero = {0};
    jset(o, "usage", usage_responses(r->has_usage ? &r->usage : &zero));
    ra_free(&a);
    return o;
}

int responses_response_parse(recipe_response *r, rj *b, recipe_error *err);
int responses_response_parse(recipe_response *r, rj *b, recipe_error *err) {
    r->id = rj_gets(b, "id");
    r->model = rj_gets(b, "model");
    rj *ca = rj_get(b, "created_at");
    if (rj_is_integer(ca)) r->created = rj_int(ca);
    rj *out = rj_get(b, "output");
    if (!rj_is_array(out)) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "output", "'output' must be an array");
    size_t cap = 1;
    for (size_t i = 0; i < rj_size(out); i++) {
        rj *c = rj_get(rj_at(out, i), "content");
        cap += 1 + (rj_is_array(c) ? rj_size(c) : 0);
    }
    r->parts = ra_alloc(&r->arena, cap * sizeof *r->parts);
    if (!r->parts) return oom(err);
    bool calls = false;
    for (size_t i = 0; i < rj_size(out); i++) {
        rj *it = rj_at(out, i);
        const char *type = rj_gets(it, "type");
        if (!type) continue;
        if (!strcmp(type, "message")) {
            rj *c = rj_get(it, "content");
            for (size_t k = 0; rj_is_array(c) && k < rj_size(c); k++) {
                const char *t = rj_gets(rj_at(c, k), "text");
                if (!t) continue;
                recipe_part *p = &r->parts[r->n_parts++];
                p->type = RECIPE_PART_TEXT, p->text = t, p->item_id = rj_gets(it, "id");
            }
        } else if (!strcmp(type, "function_call")) {
            recipe_part *p = &r->parts[r->n_parts++];
            p->type = RECIPE_PART_TOOL_CALL;
            p->id = rj_gets(it, "call_id"), p->name = rj_gets(it, "name"), p->item_id = rj_gets(it, "id");
            p->args = rj_gets(it, "arguments") ? rj_gets(it, "arguments") : "{}";
            if (!p->name) return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "output", "output[%zu].name missing", i);
            calls = true;
        } else if (!strcmp(type, "reasoning")) {
            recipe_part *p = &r->parts[r->n_parts++];
            p->type = RECIPE_PART_REASONING;
            p->item_id = rj_gets(it, "id");
            rj *s = rj_get(it, "summary");
            if (rj_is_array(s) && rj_size(s)) p->summary = RAW(r, s);
            rj *c = rj_get(it, "content");
            recipe_buf tb = {0};
            for (size_t k = 0; rj_is_array(c) && k < rj_size(c); k++) {
                const char *t = rj_gets(rj_at(c, k), "text");
                if (t) rb_puts(&tb, t);
            }
            p->text = tb.data ? ra_strndup(&r->arena, tb.data, tb.len) : NULL;
            recipe_buf_free(&tb);
        }
    }
    const char *status = rj_gets(b, "status");
    r->status = status;
    const char *reason = rj_gets(rj_get(b, "incomplete_details"), "reason");
    if (status && !strcmp(status, "failed")) {
        r->finish = RECIPE_FINISH_ERROR;
        r->error_message = rj_gets(rj_get(b, "error"), "message");
    } else if (status && !strcmp(status, "incomplete"))
        r->finish = reason && !strcmp(reason, "content_filter") ? RECIPE_FINISH_CONTENT_FILTER : RECIPE_FINISH_LENGTH;
    else if (status && strcmp(status, "completed")) r->finish = RECIPE_FINISH_NONE;
    else r->finish = calls ? RECIPE_FINISH_TOOL_CALLS : RECIPE_FINISH_EOS;
    rj *u = rj_get(b, "usage");
    if (rj_is_object(u)) {
        r->has_usage = true;
        r->usage.prompt = rj_int(rj_get(u, "input_tokens"));
        r->usage.cache_read = rj_int(rj_get(rj_get(u, "input_tokens_details"), "cached_tokens"));
        r->usage.replayed = rj_int(rj_get(rj_get(u, "input_tokens_details"), "replayed_tokens"));
        r->usage.output = rj_int(rj_get(u, "output_tokens"));
        r->usage.reasoning = rj_int(rj_get(rj_get(u, "output_tokens_details"), "reasoning_tokens"));
        r->usage.accepted_draft = rj_int(rj_get(rj_get(u, "output_tokens_details"), "accepted_prediction_tokens"));
    }
    return 0;
}
