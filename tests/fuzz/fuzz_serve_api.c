/* fuzz_serve_api.c - libFuzzer harness for the server's recipe-backed request
 * path (src/serve/api.c) without a model or the network: Anthropic Messages,
 * OpenAI Responses (with a response store holding one conversation, so
 * previous_response_id lookups run), Chat, and count_tokens bodies.
 *
 * Input: the first byte picks the API, the rest is the HTTP body. Parsing may
 * reject the body, but must not crash or leak; a rejection carries a 4xx/5xx
 * status and its error JSON formats in the API's shape; an accepted request
 * gives the generation core a non-empty conversation whose template context renders
 * and sampling values in range, and a structured-output spec (formats, guided_*, forced and
 * strict tool calls) that names its field and compiles or fails with a message; a forced
 * tool_choice (api_job_prepare) either
 * fails in the API's shape or gives a prompt suffix equal to the parser's
 * opener with its plain (tool name) range inside it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/api.h"
#include "text/chat_template.h"

/* The template reads p->req (a continuation's earlier turns merged in) and renders it. */
static void check_params(const gen_params *p) {
    if (p->req) {
        if (p->req->n_messages == 0) abort();
        static const char tpl[] = "{% for m in messages %}{{ m.role }}{{ m.content }}{% if m.tool_calls %}"
                                  "{{ m.tool_calls | tojson }}{% endif %}{% endfor %}{{ tools | tojson }}";
        static chat_template *t;
        cf_err err = {0};
        if (!t && chat_template_parse(tpl, sizeof tpl - 1, &t, &err)) abort();
        chat_template_req in = {.req = p->req, .add_generation_prompt = true};
        char *out = NULL;
        if (chat_template_render_req(t, &in, &out, NULL, &err) == 0) free(out);
    } else abort(); /* every API (count_tokens too) hands the template the canonical request */
    for (int32_t i = 0; i < p->n_stop; i++)
        if (!p->stop[i] || !p->stop[i][0]) abort();
    if (!(p->sampling.temperature >= 0 && p->sampling.temperature <= 2)) abort();
    if (!(p->sampling.top_p >= 0 && p->sampling.top_p <= 1)) abort();
    if (p->max_tokens < 0) abort();
}

/* A structured-output spec names its field, a JSON Schema is JSON, and it compiles or fails with a
 * message (within a small limit: the grammar library's own harnesses fuzz the compilers). */
static void check_grammar(const gen_params *p) {
    const structured_spec *s = &p->grammar;
    if (!s->kind) return;
    if (!s->param[0] || (s->kind != CINFER_GRAMMAR_JSON_OBJECT && !s->text)) abort();
    if (s->kind == CINFER_GRAMMAR_JSON_SCHEMA) {
        json_t *j = json_loads(s->text, 0, NULL);
        if (!j) abort();
        json_decref(j);
    }
    cinfer_grammar_spec spec = {.kind = s->kind, .text = s->text, .len = s->len};
    cinfer_grammar_limits lim = {.max_compile_ms = 50, .max_rules = 20000};
    cinfer_grammar_error ge = {0};
    cinfer_grammar *g = cinfer_grammar_compile(&spec, &lim, &ge);
    if (!g && !ge.msg[0]) abort();
    cinfer_grammar_release(g);
}

static void check_error(recipe_api api, const serve_error *e) {
    if (e->status < 400 || e->status > 599 || !e->message[0]) abort();
    int status;
    char *s = api_error_json(api, e, "req_1", &status);
    if (!s) abort();
    free(s);
}

static response_store *store(void) {
    static response_store *st; /* the harness's one store, kept across inputs */
    if (!st) {
        st = rstore_new(4, 1 << 20, 1e9);
        json_t *c = json_pack("[{s:s, s:s}, {s:s, s:s}]", "role", "user", "content", "hi", "role", "assistant",
                              "content", "hello");
        if (!st || !c || rstore_put(st, "resp_1", NULL, c, "{}", 0)) abort();
        json_decref(c);
    }
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int mode = data[0] % 4;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    api_ctx ctx = {.parser = (recipe_parser_kind)(data[0] / 4 % RECIPE_PARSER_COUNT),
                   .store = store(),
                   .now = 1,
                   .max_n = 8,
                   .n_vocab = 512};
    gen_params p;
    serve_error e = {0};
    if (mode == 3) {
        api_job ca;
        memset(&ca, 0, sizeof ca);
        if (api_count_tokens_parse(&ca, body, len, &ctx, &p, &e)) check_error(RECIPE_API_MESSAGES, &e);
        else {
            check_params(&p);
            gen_params_free(&p);
        }
        api_job_free(&ca);
        return 0;
    }
    recipe_api api = mode == 0 ? RECIPE_API_MESSAGES : mode == 1 ? RECIPE_API_RESPONSES : RECIPE_API_CHAT;
    api_job a = {0};
    snprintf(a.id, sizeof a.id, "resp_x");
    ctx.mistral_args = data[0] & 0x80;
    if (api_job_parse(&a, api, body, len, &ctx, &p, &e)) check_error(api, &e);
    else if (a.active && api_job_prepare(&a, &ctx, &p, &e)) { /* forced tool_choice */ check_error(api, &e);
        gen_params_free(&p);
    } else {
        check_params(&p);
        check_grammar(&p);
        if (p.prompt_suffix &&
            (p.suffix_plain_from > p.suffix_plain_to || p.suffix_plain_to > strlen(p.prompt_suffix) || !a.forced ||
             strcmp(a.forced, p.prompt_suffix)))
            abort();
        gen_params_free(&p);
    }
    api_job_free(&a);
    return 0;
}
