/* test_serve_forced.c - forced tool calls (tool_choice required / named, src/serve/api_request.c
 * api_job_prepare) for every parser family, without a model: the request's prompt suffix is the
 * family's opener (with the tool name spliced in and marked as plain text where the family writes
 * the name outside the JSON; where the whole call is JSON the grammar holds the name), and the
 * output parser that consumed that
 * opener (api_job_parser) turns a model continuation in the family's own syntax into exactly one
 * call get_weather({"city": "Paris"}) with no content. Also: the opener after an open <think>
 * (the block is closed first, no reasoning), and the 400s (plain / think parser, unknown or
 * unquotable tool name, no tools). The end-to-end runs are in tests/clients/test_tool_calls.py. */
#include <stdlib.h>
#include <string.h>

#include "serve/api.h"
#include "testutil.h"

#define TOOL "{\"name\":\"get_weather\",\"input_schema\":{\"type\":\"object\"}}"
#define ARGS "{\"city\": \"Paris\"}"

static int prepare(recipe_parser_kind k, bool mistral_args, const char *choice, const char *tools, api_job *a,
                   gen_params *p, serve_error *e) {
    char body[1024];
    snprintf(body, sizeof body,
             "{\"model\":\"m\",\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"w?\"}],"
             "\"tools\":[%s],\"tool_choice\":%s}",
             tools, choice);
    api_ctx ctx = {.parser = k, .now = 1, .max_n = 8, .n_vocab = 512, .mistral_args = mistral_args};
    memset(a, 0, sizeof *a);
    memset(e, 0, sizeof *e);
    if (api_job_parse(a, RECIPE_API_MESSAGES, body, strlen(body), &ctx, p, e)) return -1;
    if (api_job_prepare(a, &ctx, p, e)) {
        gen_params_free(p);
        return -1;
    }
    return 0;
}

/* Feeds opener (via api_job_parser) + continuation; checks one call get_weather(ARGS), no text. */
static void check_call(const api_job *a, bool think, const char *cont, const char *what) {
    gen_job g;
    memset(&g, 0, sizeof g);
    g.suffix_think = think;
    const recipe_event *ev;
    size_t n;
    recipe_parser *ps = api_job_parser(a, &g, 0, &ev, &n);
    CHECK(ps != NULL);
    if (!ps) return;
    char args[256] = "", name[64] = "";
    int begins = 0, texts = 0;
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < n; i++) {
            if (ev[i].type == RECIPE_EV_TOOL_BEGIN) {
                begins++;
                snprintf(name, sizeof name, "%s", ev[i].name ? ev[i].name : "");
            } else if (ev[i].type == RECIPE_EV_TOOL_ARGS && strlen(args) + ev[i].len < sizeof args)
                strncat(args, ev[i].text, ev[i].len);
            else if ((ev[i].type == RECIPE_EV_TEXT || ev[i].type == RECIPE_EV_REASONING) && ev[i].len) texts++;
        }
        if (round == 0) recipe_parser_feed(ps, cont, strlen(cont), &ev, &n);
        else if (round == 1) recipe_parser_finish(ps, &ev, &n);
    }
    CHECKF(begins == 1 && !strcmp(name, "get_weather"), "%s: %d calls, name '%s'", what, begins, name);
    CHECKF(!strcmp(args, ARGS), "%s: args '%s'", what, args);
    CHECKF(texts == 0, "%s: %d text/reasoning events", what, texts);
    CHECK(recipe_parser_tool_calls(ps) == 1);
    recipe_parser_free(ps);
}

static void test_families(void) {
    static const struct {
        recipe_parser_kind k;
        bool mistral_args;
        const char *required_suffix, *required_cont, *named_suffix, *named_cont;
    } cases[] = {
        /* the whole call is JSON (the grammar holds the name): the opener has no name in it */
        {RECIPE_PARSER_HERMES, false, "<tool_call>\n",
         "{\"name\": \"get_weather\", \"arguments\": " ARGS "}</tool_call>", "<tool_call>\n",
         "{\"name\": \"get_weather\", \"arguments\": " ARGS "}</tool_call>"},
        {RECIPE_PARSER_LLAMA3, false, "", "{\"name\": \"get_weather\", \"parameters\": " ARGS "}", "",
         "{\"name\": \"get_weather\", \"parameters\": " ARGS "}"},
        {RECIPE_PARSER_MISTRAL, false, "[TOOL_CALLS]", "[{\"name\": \"get_weather\", \"arguments\": " ARGS "}]",
         "[TOOL_CALLS]", "[{\"name\": \"get_weather\", \"arguments\": " ARGS "}]"},
        /* the name is written outside the JSON: spliced into the opener (one tool: required too) */
        {RECIPE_PARSER_MISTRAL, true, "[TOOL_CALLS]get_weather[ARGS]", ARGS, "[TOOL_CALLS]get_weather[ARGS]", ARGS},
        {RECIPE_PARSER_DEEPSEEK_V3, false,
         "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n",
         ARGS "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
         "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n",
         ARGS "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
        {RECIPE_PARSER_DEEPSEEK_R1, false,
         "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n",
         ARGS "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
         "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n",
         ARGS "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
        {RECIPE_PARSER_DEEPSEEK_V31, false, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>",
         ARGS "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
         "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>",
         ARGS "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *kn = recipe_parser_name(cases[i].k);
        for (int named = 0; named < 2; named++) {
            api_job a;
            gen_params p;
            serve_error e;
            int rc = prepare(cases[i].k, cases[i].mistral_args,
                             named ? "{\"type\":\"tool\",\"name\":\"get_weather\"}" : "{\"type\":\"any\"}", TOOL, &a,
                             &p, &e);
            CHECKF(rc == 0, "%s: %s", kn, e.message);
            if (rc) {
                api_job_free(&a);
                continue;
            }
            const char *want = named ? cases[i].named_suffix : cases[i].required_suffix;
            CHECKF(p.prompt_suffix && !strcmp(p.prompt_suffix, want), "%s %s: suffix '%s'", kn,
                   named ? "named" : "required", p.prompt_suffix ? p.prompt_suffix : "(none)");
            CHECK(a.forced && p.prompt_suffix && !strcmp(a.forced, p.prompt_suffix));
            CHECK(p.keep_ids);
            if (p.prompt_suffix && strstr(want, "get_weather")) /* spliced name: the plain range is exactly it */
                CHECK(p.suffix_plain_to - p.suffix_plain_from == strlen("get_weather") &&
                      !memcmp(p.prompt_suffix + p.suffix_plain_from, "get_weather", strlen("get_weather")));
            check_call(&a, false, named ? cases[i].named_cont : cases[i].required_cont, kn);
            gen_params_free(&p);
            api_job_free(&a);
        }
    }
}

static void test_open_think(void) {
    /* the prompt ended with <think>: "</think>\n\n" goes first, the parser starts in reasoning */
    api_job a;
    gen_params p;
    serve_error e;
    int rc = prepare(RECIPE_PARSER_HERMES, false, "{\"type\":\"any\"}", TOOL, &a, &p, &e);
    CHECKF(rc == 0, "%s", e.message);
    if (rc) return;
    CHECK(p.suffix_think && !strcmp(p.suffix_think, "</think>\n\n"));
    a.flags |= RECIPE_PARSER_IN_REASONING;
    check_call(&a, true, "{\"name\": \"get_weather\", \"arguments\": " ARGS "}</tool_call>", "hermes in <think>");
    gen_params_free(&p);
    api_job_free(&a);
    rc = prepare(RECIPE_PARSER_LLAMA3, false, "{\"type\":\"any\"}", TOOL, &a, &p, &e);
    CHECK(rc == 0 && !p.suffix_think); /* no <think> block in that family */
    if (!rc) gen_params_free(&p);
    api_job_free(&a);
}

static void test_errors(void) {
    static const struct {
        recipe_parser_kind k;
        const char *choice, *tools, *msg;
    } cases[] = {
        {RECIPE_PARSER_PLAIN, "{\"type\":\"any\"}", TOOL, "--tool-call-parser"},
        {RECIPE_PARSER_THINK, "{\"type\":\"tool\",\"name\":\"get_weather\"}", TOOL, "format is unknown"},
        {RECIPE_PARSER_HERMES, "{\"type\":\"tool\",\"name\":\"get_time\"}", TOOL, "'get_time', which is not in tools"},
        {RECIPE_PARSER_DEEPSEEK_V31, "{\"type\":\"tool\",\"name\":\"a\\\"b\"}",
         "{\"name\":\"a\\\"b\",\"input_schema\":{\"type\":\"object\"}}", "quote"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        api_job a;
        gen_params p;
        serve_error e;
        int rc = prepare(cases[i].k, false, cases[i].choice, cases[i].tools, &a, &p, &e);
        CHECKF(rc != 0 && e.status == 400 && !strcmp(e.param, "tool_choice") && strstr(e.message, cases[i].msg),
               "case %zu: rc %d status %d param '%s' message '%s'", i, rc, e.status, e.param, e.message);
        if (!rc) gen_params_free(&p);
        api_job_free(&a);
    }
    /* auto / none: nothing forced */
    api_job a;
    gen_params p;
    serve_error e;
    int rc = prepare(RECIPE_PARSER_PLAIN, false, "{\"type\":\"auto\"}", TOOL, &a, &p, &e);
    CHECK(rc == 0 && !p.prompt_suffix && !a.forced);
    if (!rc) gen_params_free(&p);
    api_job_free(&a);
}

int main(void) {
    test_families();
    test_open_think();
    test_errors();
    return test_finish();
}
