/* chat_template_req.c - render contexts straight from recipe's canonical request (see
 * chat_template.h, chat_template_render_req): the interpreter values are built from the
 * recipe structs, pointing at the request's own strings (its arena outlives the render); only
 * the JSON texts the request keeps opaque (tool arguments, tool schemas, chat_template_kwargs)
 * are parsed, with jansson, for the duration of the render.
 * The mapping is the one cinfer serve used to build as JSON messages (docs/serve.md): roles
 * system/developer -> "system"; content = TEXT parts concatenated; assistant reasoning ->
 * reasoning_content (the last one); tool calls -> tool_calls with arguments as an object when
 * they parse as one, else the text; tool -> {role, content, tool_call_id}; dict keys in that
 * order. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text/chat_template.h"
#include "text/jinja.h"

#define MAX_PARSED 4096 /* JSON texts parsed per render (tool calls + tools + kwargs); more: kept as text */

typedef struct req_fill {
    const chat_template_req *in;
    json_t **parsed; /* owned until the render ends */
    size_t n_parsed;
} req_fill;

/* JSON text -> value (kept alive until the render ends); NULL when not JSON or over the cap. */
static json_t *parse_kept(req_fill *f, const char *text) {
    if (!text || f->n_parsed >= MAX_PARSED) return NULL;
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    if (v) f->parsed[f->n_parsed++] = v;
    return v;
}

/* TEXT parts concatenated, in the render's arena (a single part is not copied). */
static jv parts_text(jjob *j, const recipe_part *ps, size_t n) {
    size_t k = 0, last = 0, total = 0;
    for (size_t i = 0; i < n; i++)
        if (ps[i].type == RECIPE_PART_TEXT && ps[i].text) k++, last = i, total += strlen(ps[i].text);
    if (k == 0) return jv_str(j, "", 0);
    if (k == 1) return jv_str(j, ps[last].text, total);
    jbuf b = {.limit = JINJA_MAX_OUTPUT};
    for (size_t i = 0; i < n; i++)
        if (ps[i].type == RECIPE_PART_TEXT && ps[i].text) jbuf_puts(j, &b, ps[i].text);
    return jbuf_take(j, &b);
}

static void set(jjob *j, jv d, const char *k, jv v) { jdict_set(j, d.u.d, jv_cstr(j, k), v); }

static jv tool_call(jjob *j, req_fill *f, const recipe_part *p) {
    json_t *a = parse_kept(f, p->args);
    jv args = a && json_is_object(a) ? jv_from_json(j, a, 1) : jv_cstr(j, p->args ? p->args : "{}");
    jv fn = jv_newdict(j, 2), tc = jv_newdict(j, 3);
    set(j, fn, "name", jv_cstr(j, p->name ? p->name : ""));
    set(j, fn, "arguments", args);
    set(j, tc, "id", jv_cstr(j, p->id ? p->id : ""));
    set(j, tc, "type", jv_cstr(j, "function"));
    set(j, tc, "function", fn);
    return tc;
}

static jv message(jjob *j, req_fill *f, const recipe_message *m, const char *content) {
    jv d = jv_newdict(j, 5);
    set(j, d, "role", jv_cstr(j, recipe_role_template_name(m->role)));
    if (m->role == RECIPE_ROLE_TOOL) {
        const recipe_part *r = m->n_parts ? &m->parts[0] : NULL;
        set(j, d, "content",
            content ? jv_cstr(j, content)
            : r     ? parts_text(j, r->parts, r->n_parts)
                    : jv_str(j, "", 0));
        set(j, d, "tool_call_id", jv_cstr(j, r && r->id ? r->id : ""));
        return d;
    }
    set(j, d, "content", content ? jv_cstr(j, content) : parts_text(j, m->parts, m->n_parts));
    if (m->name) set(j, d, "name", jv_cstr(j, m->name));
    jv calls = {.t = JV_UNDEF};
    for (size_t k = 0; k < m->n_parts; k++) {
        const recipe_part *p = &m->parts[k];
        if (p->type == RECIPE_PART_REASONING && p->text && m->role == RECIPE_ROLE_ASSISTANT)
            set(j, d, "reasoning_content", jv_cstr(j, p->text));
        if (p->type != RECIPE_PART_TOOL_CALL) continue;
        if (calls.t == JV_UNDEF) calls = jv_newlist(j, 2);
        jlist_push(j, calls.u.l, tool_call(j, f, p));
    }
    if (calls.t != JV_UNDEF) set(j, d, "tool_calls", calls);
    return d;
}

static jv tools(jjob *j, req_fill *f, const recipe_request *r) {
    jv l = jv_newlist(j, r->n_tools);
    for (size_t i = 0; i < r->n_tools; i++) {
        const recipe_tool *t = &r->tools[i];
        jv fn = jv_newdict(j, 3), tool = jv_newdict(j, 2);
        set(j, fn, "name", jv_cstr(j, t->name ? t->name : ""));
        if (t->description) set(j, fn, "description", jv_cstr(j, t->description));
        json_t *ps = parse_kept(f, t->parameters);
        jv params;
        if (ps) params = jv_from_json(j, ps, 1);
        else {
            params = jv_newdict(j, 1);
            set(j, params, "type", jv_cstr(j, "object"));
        }
        set(j, fn, "parameters", params);
        set(j, tool, "type", jv_cstr(j, "function"));
        set(j, tool, "function", fn);
        jlist_push(j, l.u.l, tool);
    }
    return l;
}

static void fill_req(jjob *j, jscope *g, const void *arg) {
    req_fill *f = (req_fill *)arg;
    const chat_template_req *in = f->in;
    const recipe_request *r = in->req;
    json_t *kw = parse_kept(f, r->chat_template_kwargs);
    const char *k;
    json_t *v;
    if (json_is_object(kw)) json_object_foreach(kw, k, v) jscope_set(j, g, k, jv_from_json(j, v, 0));
    int think = chat_template_thinking(r);
    if (think >= 0 && !json_object_get(kw, "enable_thinking")) jscope_set(j, g, "enable_thinking", jv_bool(think));
    jv msgs = jv_newlist(j, r->n_messages);
    for (int pass = 0; pass < 2; pass++) /* top-level system text first, then the rest */
        for (size_t i = 0; i < r->n_messages; i++)
            if (r->messages[i].top_level == (pass == 0))
                jlist_push(j, msgs.u.l, message(j, f, &r->messages[i], in->content ? in->content[i] : NULL));
    jscope_set(j, g, "messages", msgs);
    jscope_set(j, g, "add_generation_prompt", jv_bool(in->add_generation_prompt));
    jscope_set(j, g, "bos_token", jv_cstr(j, in->bos_token ? in->bos_token : ""));
    jscope_set(j, g, "eos_token", jv_cstr(j, in->eos_token ? in->eos_token : ""));
    if (r->n_tools && r->tool_choice != RECIPE_TOOL_CHOICE_NONE) jscope_set(j, g, "tools", tools(j, f, r));
}

int chat_template_render_req(const chat_template *t, const chat_template_req *in, char **out, size_t *out_len,
                             cf_err *err) {
    req_fill f = {.in = in, .parsed = calloc(MAX_PARSED, sizeof(json_t *))};
    if (!f.parsed) return cf_fail(err, "chat template: out of memory");
    int rc = jinja_render(chat_template_jinja(t), (int64_t)time(NULL), fill_req, &f, out, out_len, err);
    for (size_t i = 0; i < f.n_parsed; i++) json_decref(f.parsed[i]);
    free(f.parsed);
    return rc;
}

char *chat_template_message_text(const recipe_message *m) {
    const recipe_part *ps = m->parts;
    size_t n = m->n_parts, total = 0;
    if (m->role == RECIPE_ROLE_TOOL) {
        ps = m->n_parts ? m->parts[0].parts : NULL;
        n = m->n_parts ? m->parts[0].n_parts : 0;
    }
    for (size_t i = 0; i < n; i++)
        if (ps[i].type == RECIPE_PART_TEXT && ps[i].text) total += strlen(ps[i].text);
    char *s = malloc(total + 1);
    if (!s) return NULL;
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        if (ps[i].type == RECIPE_PART_TEXT && ps[i].text) {
            size_t l = strlen(ps[i].text);
            memcpy(s + at, ps[i].text, l);
            at += l;
        }
    s[at] = 0;
    return s;
}

int chat_template_thinking(const recipe_request *r) {
    int think = r->thinking;
    if (r->reasoning_effort == RECIPE_EFFORT_NONE) think = 0;
    else if (think < 0 && r->reasoning_effort != RECIPE_EFFORT_UNSET) think = 1;
    return think;
}
