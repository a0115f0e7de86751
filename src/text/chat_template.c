/* chat_template.c - public chat-template API: parse once, render many times
 * against a JSON context (jansson values -> interpreter values; the canonical-request
 * context is built by chat_template_req.c through jinja_render), GGUF
 * `tokenizer.chat_template` lookup with a ChatML fallback.
 *
 * Ownership: a chat_template owns its copy of the source and the AST arena;
 * it is immutable after parse, so concurrent renders are safe. Each render
 * uses a private arena freed before returning; the result is a malloc'd copy. */
#include "text/chat_template.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text/jinja.h"

struct chat_template {
    jtemplate t;
    char *src;
};

const char chat_template_chatml[] =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- elif message['content'] is iterable %}"
    "{%- for part in message['content'] %}{%- if part['type'] == 'text' %}{{- part['text'] }}{%- endif %}{%- endfor %}"
    "{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

int chat_template_parse(const char *text, size_t len, chat_template **out, cf_err *err) {
    *out = NULL;
    chat_template *ct = calloc(1, sizeof *ct);
    if (!ct) return cf_fail(err, "chat template: out of memory");
    jarena_init(&ct->t.arena, JINJA_MAX_ARENA);
    jjob job = {.err = err, .arena = &ct->t.arena};
    if (setjmp(job.jb)) {
        jarena_free(&ct->t.arena);
        free(ct);
        return -1;
    }
    ct->src = jstrndup(&job, text, len);
    jinja_parse(&job, &ct->t, ct->src, len);
    *out = ct;
    return 0;
}

void chat_template_free(chat_template *t) {
    if (!t) return;
    jarena_free(&t->t.arena);
    free(t);
}

const char *chat_template_source(const chat_template *t) { return t->src; }

jv jv_from_json(jjob *j, const json_t *x, int depth) {
    if (depth > JINJA_MAX_DEPTH) jfail(j, 0, "context nested too deeply");
    switch (json_typeof(x)) {
    case JSON_OBJECT: {
        jv d = jv_newdict(j, json_object_size(x));
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)x, k, v) {
            jv key = jv_str(j, k, strlen(k));
            /* keys are unique in a jansson object: append directly */
            d.u.d->k[d.u.d->n] = key;
            d.u.d->v[d.u.d->n++] = jv_from_json(j, v, depth + 1);
        }
        return d;
    }
    case JSON_ARRAY: {
        jv l = jv_newlist(j, json_array_size(x));
        for (size_t i = 0; i < json_array_size(x); i++)
            jlist_push(j, l.u.l, jv_from_json(j, json_array_get(x, i), depth + 1));
        return l;
    }
    case JSON_STRING: return jv_str(j, json_string_value(x), json_string_length(x));
    case JSON_INTEGER: return jv_int((int64_t)json_integer_value(x));
    case JSON_REAL: return jv_float(json_real_value(x));
    case JSON_TRUE: return jv_bool(true);
    case JSON_FALSE: return jv_bool(false);
    default: return jv_none();
    }
}

int jinja_render(const jtemplate *t, int64_t now, void (*fill)(jjob *j, jscope *globals, const void *arg),
                 const void *arg, char **out, size_t *out_len, cf_err *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    jarena arena;
    jarena_init(&arena, JINJA_MAX_ARENA);
    jjob job = {.err = err, .arena = &arena, .work_limit = JINJA_MAX_WORK};
    if (setjmp(job.jb)) {
        jv_set_current_job(NULL);
        jarena_free(&arena);
        return -1;
    }
    jv_set_current_job(&job);
    jscope *globals = jscope_new(&job, NULL);
    fill(&job, globals, arg);
    jbuf buf = {.limit = JINJA_MAX_OUTPUT};
    jctx c = {.job = &job, .globals = globals, .out = &buf, .now = now};
    /* top-level template code runs in its own scope above the context */
    jscope *top = jscope_new(&job, globals);
    jexec_body(&c, top, t->body, t->nbody);
    jv_set_current_job(NULL);
    char *res = malloc(buf.n + 1);
    if (!res) {
        jarena_free(&arena);
        return cf_fail(err, "chat template: out of memory");
    }
    if (buf.n) memcpy(res, buf.p, buf.n);
    res[buf.n] = 0;
    *out = res;
    if (out_len) *out_len = buf.n;
    jarena_free(&arena);
    return 0;
}

static void fill_json(jjob *j, jscope *globals, const void *arg) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)arg, k, v) jscope_set(j, globals, k, jv_from_json(j, v, 0));
}

int chat_template_render_at(const chat_template *t, const json_t *context, int64_t now, char **out, size_t *out_len,
                            cf_err *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!context || !json_is_object(context)) return cf_fail(err, "chat template: context must be a JSON object");
    return jinja_render(&t->t, now, fill_json, context, out, out_len, err);
}

const jtemplate *chat_template_jinja(const chat_template *t) { return &t->t; }

int chat_template_render(const chat_template *t, const json_t *context, char **out, size_t *out_len, cf_err *err) {
    return chat_template_render_at(t, context, (int64_t)time(NULL), out, out_len, err);
}

int chat_template_from_gguf(const gguf_file *f, chat_template **out, bool *is_fallback, cf_err *err) {
    if (is_fallback) *is_fallback = false;
    if (gguf_find_key(f, "tokenizer.chat_template") < 0) {
        if (is_fallback) *is_fallback = true;
        return chat_template_parse(chat_template_chatml, strlen(chat_template_chatml), out, err);
    }
    gguf_str s;
    if (gguf_get_str(f, "tokenizer.chat_template", &s, err) != 0) return -1;
    if (chat_template_parse(s.s, (size_t)s.len, out, err) != 0) return cf_prefix(err, "tokenizer.chat_template");
    return 0;
}
