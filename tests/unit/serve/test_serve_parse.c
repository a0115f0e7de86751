/* test_serve_parse.c - the server's model-independent layers:
 *  - Chat through recipe (api_job_parse): field mapping (max_completion_tokens wins over
 *    max_tokens, developer -> system, text parts concatenated, stop as string or list with empty
 *    strings dropped, logit_bias, vLLM extensions), and rejections with their status and param
 *    (issue 14 §4.6: wrong types for tools / tool_choice / response_format, empty model,
 *    non-canonical logit_bias keys, structured outputs);
 *  - Completions through recipe (api_completion_parse): prompt forms and rejections;
 *  - serve_error_json: the error object's exact shape;
 *  - the streamed text of Chat / Completions chunks (recipe's OpenAI writer) is valid JSON for
 *    every kind of text, one chunk per choice;
 *  - metrics: histogram buckets are cumulative in the Prometheus text, and
 *    weighted observations count. */
#include <string.h>

#include "serve/api.h"
#include "serve/metrics.h"
#include "testutil.h"
#include "text/chat_template.h"

static const struct { int32_t n_vocab, max_n; } LIM = {.n_vocab = 512, .max_n = 8};

/* p->req points into *a: free a after using p. */
static int chat_a(const char *body, api_job *a, gen_params *p, serve_error *e) {
    memset(e, 0, sizeof *e);
    memset(a, 0, sizeof *a);
    api_ctx ctx = {.parser = RECIPE_PARSER_PLAIN, .max_n = LIM.max_n, .n_vocab = LIM.n_vocab};
    return api_job_parse(a, RECIPE_API_CHAT, body, strlen(body), &ctx, p, e);
}

/* As the server: parse, then the output-side settings (structured output, forced calls). */
static int chat(const char *body, gen_params *p, serve_error *e) {
    api_job a;
    api_ctx ctx = {.parser = RECIPE_PARSER_PLAIN, .max_n = LIM.max_n, .n_vocab = LIM.n_vocab};
    int rc = chat_a(body, &a, p, e);
    if (!rc && api_job_prepare(&a, &ctx, p, e)) {
        gen_params_free(p);
        rc = -1;
    }
    api_job_free(&a);
    return rc;
}

/* The template variables of p's request, as a small template prints them. */
static char *render_vars(const gen_params *p) {
    static const char tpl[] =
        "{% for m in messages %}{{ m.role }}={{ m.content }}"
        "{% if m.tool_calls %}[{{ m.tool_calls[0].function.name }}:"
        "{{ m.tool_calls[0].function.arguments.city }}]{% endif %}"
        "{% if m.tool_call_id %}#{{ m.tool_call_id }}{% endif %};{% endfor %}"
        "{% if tools %}tools={{ tools[0].function.name }}/{{ tools[0].function.parameters.type }};{% endif %}"
        "{% if enable_thinking is defined %}think={{ enable_thinking }};{% endif %}"
        "{{ add_generation_prompt }}{{ bos_token }}";
    chat_template *t = NULL;
    cf_err err = {0};
    char *out = NULL;
    if (chat_template_parse(tpl, sizeof tpl - 1, &t, &err)) return NULL;
    chat_template_req in = {.req = p->req, .add_generation_prompt = true, .bos_token = "<s>"};
    if (chat_template_render_req(t, &in, &out, NULL, &err)) out = NULL;
    chat_template_free(t);
    return out;
}

static int cmpl(const char *body, gen_params *p, serve_error *e) {
    memset(e, 0, sizeof *e);
    api_ctx ctx = {.parser = RECIPE_PARSER_PLAIN, .max_n = LIM.max_n, .n_vocab = LIM.n_vocab};
    api_job a;
    memset(&a, 0, sizeof a);
    int rc = api_completion_parse(&a, body, strlen(body), &ctx, p, e);
    api_job_free(&a);
    return rc;
}

static void test_chat_fields(void) {
    gen_params p;
    serve_error e;
    api_job a;
    int rc = chat_a(
        "{\"model\":\"m\",\"messages\":[{\"role\":\"developer\",\"content\":\"be brief\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"ab\"},{\"type\":\"text\",\"text\":\"cd\"}]},"
        "{\"role\":\"assistant\",\"content\":null}],"
        "\"max_tokens\":5,\"max_completion_tokens\":7,\"temperature\":0.5,\"top_p\":0.9,\"n\":3,"
        "\"stop\":[\"x\",\"\",\"yz\"],\"seed\":-1,\"logit_bias\":{\"17\":-100,\"3\":2.5},"
        "\"logprobs\":true,\"top_logprobs\":4,\"stream\":true,\"stream_options\":{\"include_usage\":true},"
        "\"top_k\":-1,\"min_p\":0.1,\"priority\":-3,\"repetition_penalty\":1.2,\"cache_salt\":\"t1\",\"user\":\"u\","
        "\"unknown\":[1],"
        "\"min_tokens\":2,\"ignore_eos\":true,\"include_stop_str_in_output\":true,\"skip_special_tokens\":false,"
        "\"stop_token_ids\":[5,9]}",
        &a, &p, &e);
    CHECKF(rc == 0, "%s", e.message);
    if (rc) return api_job_free(&a);
    CHECK(p.kind == GEN_CHAT && !strcmp(p.model, "m"));
    char *vars = render_vars(&p); /* the template reads the canonical request */
    CHECKF(vars && !strcmp(vars, "system=be brief;user=abcd;assistant=;True<s>"), "%s", vars ? vars : "(null)");
    free(vars);
    CHECK(p.max_tokens == 7);
    CHECK(p.sampling.temperature == 0.5f && p.sampling.top_p == 0.9f && p.n == 3);
    CHECK(p.n_stop == 2 && !strcmp(p.stop[0], "x") && !strcmp(p.stop[1], "yz"));
    CHECK(p.has_seed && p.sampling.seed == UINT64_MAX);
    CHECK(p.sampling.n_bias == 2 && p.sampling.bias == NULL); /* bias pointer is set at submit */
    CHECK(p.bias[0].token == 17 && p.bias[0].bias == -100.0f);
    CHECK(p.logprobs && p.top_logprobs == 4 && p.stream && p.include_usage);
    CHECK(p.sampling.top_k == 0 && p.sampling.min_p == 0.1f && p.sampling.repetition_penalty == 1.2f);
    CHECK(!strcmp(p.cache_salt, "t1") && !strcmp(p.user, "u"));
    CHECK(p.priority == -3);
    CHECK(p.min_tokens == 2 && p.ignore_eos && p.include_stop_str && p.keep_special);
    CHECK(p.n_stop_ids == 2 && p.stop_ids[0] == 5 && p.stop_ids[1] == 9);
    gen_params_free(&p);
    api_job_free(&a);

    /* tool calls (arguments as an object), tool results, tools, thinking for the template */
    rc = chat_a(
        "{\"messages\":[{\"role\":\"user\",\"content\":\"w?\"},{\"role\":\"assistant\",\"content\":null,"
        "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"get\",\"arguments\":"
        "\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"21\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get\",\"parameters\":{\"type\":\"object\"}}}],"
        "\"reasoning_effort\":\"none\"}",
        &a, &p, &e);
    CHECKF(rc == 0, "%s", e.message);
    vars = rc ? NULL : render_vars(&p);
    CHECKF(vars && !strcmp(vars, "user=w?;assistant=[get:Paris];tool=21#c1;tools=get/object;think=False;True<s>"), "%s",
           vars ? vars : "(null)");
    free(vars);
    gen_params_free(&p);
    api_job_free(&a);

    rc = chat("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stop\":\"END\"}", &p, &e);
    CHECK(rc == 0 && p.n_stop == 1 && !strcmp(p.stop[0], "END"));
    CHECK(p.n == 1 && p.sampling.temperature == 1.0f && p.max_tokens == 0 && !p.model && !p.has_seed);
    gen_params_free(&p);
}

static void test_completion_prompts(void) {
    gen_params p;
    serve_error e;
    CHECK(cmpl("{\"prompt\":\"Once\"}", &p, &e) == 0 && p.prompt && !strcmp(p.prompt, "Once") && p.prompt_len == 4);
    gen_params_free(&p);
    CHECK(cmpl("{\"prompt\":[\"Once\"]}", &p, &e) == 0 && p.prompt && !strcmp(p.prompt, "Once"));
    gen_params_free(&p);
    CHECK(cmpl("{\"prompt\":[1,403,407]}", &p, &e) == 0 && p.n_prompt_ids == 3 && p.prompt_ids[1] == 403);
    gen_params_free(&p);
    CHECK(cmpl("{\"prompt\":[[1,2]],\"logprobs\":3}", &p, &e) == 0 && p.n_prompt_ids == 2 && p.logprobs &&
          p.top_logprobs == 3);
    gen_params_free(&p);
}

typedef struct bad_case {
    int completion;
    const char *body;
    int status;
    const char *param;
} bad_case;

static void test_rejections(void) {
    static const bad_case cases[] = {
        {0, "{", 400, ""},
        {0, "[]", 400, ""},
        {0, "{\"messages\":[]}", 400, "messages"},
        {0, "{\"messages\":\"hi\"}", 400, "messages"},
        {0, "{\"messages\":[{\"role\":\"user\"}]}", 400, "messages[0]"},
        {0, "{\"messages\":[{\"role\":\"bot\",\"content\":\"x\"}]}", 400, "messages[0]"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\"}]}]}", 400, "messages[0]"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":2.5}", 400, "temperature"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_p\":0}", 400, "top_p"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":9}", 400, "n"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":0}", 400, "max_tokens"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":2.5}", 400, "max_tokens"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[\"a\",2]}", 400, "stop"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"512\":1}}", 400, "logit_bias"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"a\":1}}", 400, "logit_bias"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}", 400, "top_logprobs"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":21,\"logprobs\":true}", 400,
         "top_logprobs"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":false,\"stream_options\":{}}", 400,
         "stream_options"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":\"yes\"}", 400, "stream"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"cache_salt\":\"\"}", 400, "cache_salt"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"model\":5}", 400, "model"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":5}", 400, "tools"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":5}", 400, "tool_choice"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":5}", 400, "response_format"},
        /* structured output: two constraints, ignore_eos with one, a bad shape */
        {0,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_object\"},"
         "\"guided_regex\":\"a\"}",
         400, "guided_regex"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"guided_json\":{},\"ignore_eos\":true}", 400,
         "ignore_eos"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"guided_choice\":[]}", 400, "guided_choice"},
        {0,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\",\"function\":{"
         "\"name\":\"f\"}}],\"tool_choice\":\"required\"}",
         400, "tool_choice"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"model\":\"\"}", 400, "model"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\" 1\":1}}", 400, "logit_bias"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"01\":1}}", 400, "logit_bias"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"-0\":1}}", 400, "logit_bias"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop_token_ids\":[512]}", 400, "stop_token_ids"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"min_tokens\":9,\"max_tokens\":3}", 400,
         "min_tokens"},
        {0, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"ignore_eos\":\"yes\"}", 400, "ignore_eos"},
        {1, "{}", 400, "prompt"},
        {1, "{\"prompt\":[\"a\",\"b\"]}", 400, "prompt"},
        {1, "{\"prompt\":[1,512]}", 400, "prompt"},
        {1, "{\"prompt\":\"x\",\"echo\":true}", 400, "echo"},
        {1, "{\"prompt\":\"x\",\"suffix\":\"y\"}", 400, "suffix"},
        {1, "{\"prompt\":\"x\",\"best_of\":2}", 400, "best_of"},
        {1, "{\"prompt\":\"x\",\"min_tokens\":\"2\"}", 400, "min_tokens"},
        {1, "{\"prompt\":\"x\",\"guided_regex\":\"a\",\"ignore_eos\":true}", 400, "ignore_eos"},
        {1, "{\"prompt\":\"x\",\"guided_regex\":\"a\",\"structured_outputs\":{\"regex\":\"b\"}}", 400,
         "structured_outputs.regex"},
        {1, "{\"prompt\":\"x\",\"logit_bias\":{\"01\":1}}", 400, "logit_bias"},
        {1, "{\"prompt\":\"x\",\"model\":\"\"}", 400, "model"},
        {1, "{\"prompt\":\"x\",\"logprobs\":true}", 400, "logprobs"},
        {1, "{\"prompt\":[1,-1]}", 400, "prompt"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gen_params p;
        serve_error e;
        int rc = cases[i].completion ? cmpl(cases[i].body, &p, &e) : chat(cases[i].body, &p, &e);
        CHECKF(rc == -1, "accepted: %s", cases[i].body);
        if (rc == 0) {
            gen_params_free(&p);
            continue;
        }
        CHECKF(e.status == cases[i].status && !strcmp(e.param, cases[i].param) && e.message[0],
               "%s: status %d param '%s' (%s)", cases[i].body, e.status, e.param, e.message);
    }
}

static void test_error_json(void) {
    serve_error e;
    serve_fail(&e, 404, "invalid_request_error", "model_not_found", "model", "no such model '%s'", "x");
    char *s = serve_error_json(&e);
    CHECKF(s && !strcmp(s, "{\"error\":{\"message\":\"no such model 'x'\",\"type\":\"invalid_request_error\","
                           "\"param\":\"model\",\"code\":\"model_not_found\"}}"),
           "%s", s ? s : "(null)");
    json_t *j = s ? json_loads(s, 0, NULL) : NULL;
    json_t *err = json_object_get(j, "error");
    CHECK(json_object_size(err) == 4);
    CHECK(!strcmp(json_string_value(json_object_get(err, "message")), "no such model 'x'"));
    CHECK(!strcmp(json_string_value(json_object_get(err, "code")), "model_not_found"));
    json_decref(j);
    free(s);
    serve_bad(&e, NULL, "bad \xff bytes"); /* not UTF-8: still a valid error object */
    s = serve_error_json(&e);
    j = s ? json_loads(s, 0, NULL) : NULL;
    CHECK(j && json_is_null(json_object_get(json_object_get(j, "error"), "param")));
    json_decref(j);
    free(s);
}

/* Every kind of text streams as a valid chunk of its choice (Chat delta.content / Completions text). */
static void test_stream_chunks(void) {
    static const char *const texts[] = {"hello", " a \"quoted\" \\ back/slash", "line\nbreak\ttab\r\b\f",
                                        "\x01\x1f ctl \x7f del", "caf\xc3\xa9 \xf0\x9f\xa6\x99 \xe2\x80\xa8"};
    for (int completion = 0; completion < 2; completion++)
        for (int usage = 0; usage < 2; usage++) {
            recipe_stream_info info = {.id = "chatcmpl-\"x\"",
                                       .model = "m\\odel",
                                       .created = 1795948958,
                                       .include_usage = usage,
                                       .n_choices = 3,
                                       .completion = completion};
            recipe_stream_encoder *enc = recipe_stream_encoder_new(RECIPE_API_CHAT, &info);
            CHECK(enc != NULL);
            if (!enc) continue;
            recipe_buf out = {0};
            recipe_error re;
            for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
                recipe_event ev = {
                    .type = RECIPE_EV_TEXT, .text = texts[t], .len = strlen(texts[t]), .choice = (int)t % 3};
                out.len = 0;
                CHECK(recipe_stream_encoder_event(enc, &ev, &out, &re) == 0);
                const char *last = out.data; /* the last event: escaped text holds no raw newline */
                for (const char *q = out.data; q && (q = strstr(q, "\n\ndata: ")); q += 2) last = q + 2;
                json_t *o = last ? json_loads(last + 6, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
                CHECKF(o != NULL, "%s", out.data ? out.data : "");
                json_t *ch = json_array_get(json_object_get(o, "choices"), 0);
                CHECK(json_integer_value(json_object_get(ch, "index")) == (json_int_t)(t % 3));
                const char *got = completion
                                      ? json_string_value(json_object_get(ch, "text"))
                                      : json_string_value(json_object_get(json_object_get(ch, "delta"), "content"));
                CHECKF(got && !strcmp(got, texts[t]), "%s", last);
                CHECK(!strcmp(json_string_value(json_object_get(o, "object")),
                              completion ? "text_completion" : "chat.completion.chunk"));
                CHECK(usage ? json_is_null(json_object_get(o, "usage")) : !json_object_get(o, "usage"));
                json_decref(o);
            }
            recipe_buf_free(&out);
            recipe_stream_encoder_free(enc);
        }
}

static void test_metrics(void) {
    metrics m;
    metrics_init(&m);
    metrics_observe(&m.ttft, 0.003, 1);
    metrics_observe(&m.ttft, 0.5, 2);
    metrics_observe(&m.ttft, 1000, 1);
    metrics_request_done(&m, 200);
    metrics_request_done(&m, 200);
    metrics_request_done(&m, 429);
    cinfer_engine_stats st = {0};
    st.cached_tokens = 30;
    st.prompt_tokens_computed = 10;
    st.kv_blocks_used = 3;
    st.kv_rings_total = 8;
    st.kv_rings_used = 2;
    st.swa_state_hits = 5;
    st.swa_state_misses = 2;
    st.swa_state_evictions = 1;
    st.swa_state_bytes = 4096;
    st.kv_blocks_total = 4;
    m.model_name = "m";
    char *txt;
    size_t len;
    CHECK(metrics_render(&m, &st, NULL, &txt, &len) == 0);
    if (!txt) return;
    CHECK(strlen(txt) == len);
    CHECK(strstr(txt, "cinfer_requests_total{model_name=\"m\",status=\"200\"} 2\n") != NULL);
    CHECK(strstr(txt, "cinfer_requests_total{model_name=\"m\",status=\"429\"} 1\n") != NULL);
    CHECK(strstr(txt, "cinfer_time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.001\"} 0\n") != NULL);
    CHECK(strstr(txt, "cinfer_time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.005\"} 1\n") != NULL);
    CHECK(strstr(txt, "cinfer_time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.5\"} 3\n") != NULL);
    CHECK(strstr(txt, "cinfer_time_to_first_token_seconds_bucket{model_name=\"m\",le=\"80\"} 3\n") != NULL);
    CHECK(strstr(txt, "cinfer_time_to_first_token_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 4\n") != NULL);
    CHECK(strstr(txt, "cinfer_time_to_first_token_seconds_count{model_name=\"m\"} 4\n") != NULL);
    CHECK(strstr(txt, "cinfer_kv_blocks_used{model_name=\"m\"} 3\n") != NULL);
    CHECK(strstr(txt, "cinfer_kv_window_rings_total{model_name=\"m\"} 8\n") != NULL);
    CHECK(strstr(txt, "cinfer_kv_window_rings_used{model_name=\"m\"} 2\n") != NULL);
    CHECK(strstr(txt, "cinfer_swa_state_hits_total{model_name=\"m\"} 5\n") != NULL);
    CHECK(strstr(txt, "cinfer_swa_state_misses_total{model_name=\"m\"} 2\n") != NULL);
    CHECK(strstr(txt, "cinfer_swa_state_evictions_total{model_name=\"m\"} 1\n") != NULL);
    CHECK(strstr(txt, "cinfer_swa_state_bytes{model_name=\"m\"} 4096\n") != NULL);
    CHECK(strstr(txt, "cinfer_prefix_cache_hit_ratio{model_name=\"m\"} 0.75\n") != NULL);
    CHECK(strstr(txt, "cinfer_kv_cache_usage_ratio{model_name=\"m\"} 0.75\n") != NULL);
    CHECK(strstr(txt, "cinfer_build_info{model_name=\"m\",version=\"") != NULL);
    CHECK(strstr(txt, "# TYPE cinfer_inter_token_latency_seconds histogram\n") != NULL);
    free(txt);
}

/* What each structured-output source becomes (serve/structured.c): the grammar spec's kind, the
 * field its errors name, its text; forced tool calls with the Hermes parser: the opener in the prompt
 * suffix and the JSON grammar of the rest of the call. */
static void test_structured(void) {
    static const char tool_a[] = "{\"type\":\"function\",\"function\":{\"name\":\"a\",\"parameters\":{\"type\":"
                                 "\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}}}}}";
    static const char tool_b[] = "{\"type\":\"function\",\"function\":{\"name\":\"b\"}}";
    char two[512], one_named[512], one_req[512];
    snprintf(two, sizeof two,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[%s,%s],"
             "\"tool_choice\":\"required\"}",
             tool_a, tool_b);
    snprintf(one_named, sizeof one_named,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[%s,%s],"
             "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"a\"}},"
             "\"response_format\":{\"type\":\"json_object\"}}",
             tool_a, tool_b);
    snprintf(one_req, sizeof one_req,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[%s],"
             "\"tool_choice\":\"required\"}",
             tool_b);
    const struct {
        const char *body;
        cinfer_grammar_kind kind;
        const char *param, *text, *suffix;
    } cases[] = {
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\","
         "\"json_schema\":{\"name\":\"n\",\"strict\":true,\"schema\":{\"type\":\"integer\"}}}}",
         CINFER_GRAMMAR_JSON_SCHEMA, "response_format.json_schema.schema", "{\"type\":\"integer\"}", NULL},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_object\"}}",
         CINFER_GRAMMAR_JSON_OBJECT, "response_format", NULL, NULL},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"guided_choice\":[\"y\",\"n\\\"\"]}",
         CINFER_GRAMMAR_CHOICE, "guided_choice", "[\"y\",\"n\\\"\"]", NULL},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"structured_outputs\":{\"grammar\":\"root ::= "
         "\\\"a\\\"\"}}",
         CINFER_GRAMMAR_GBNF, "structured_outputs.grammar", "root ::= \"a\"", NULL},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"text\":\"hi\",\"guided_regex\":\"[0-9]+\"}",
         CINFER_GRAMMAR_REGEX, "guided_regex", "[0-9]+", NULL},
        {two, CINFER_GRAMMAR_JSON_SCHEMA, "tools",
         "{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"a\"},\"arguments\":{\"type\":"
         "\"object\","
         "\"properties\":{\"x\":{\"type\":\"integer\"}}}},\"required\":[\"name\",\"arguments\"],"
         "\"additionalProperties\":"
         "false},{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"b\"},\"arguments\":{\"type\":\"object\"}},"
         "\"required\":[\"name\",\"arguments\"],\"additionalProperties\":false}]}",
         "<tool_call>\n"},
        {one_named, CINFER_GRAMMAR_JSON_SCHEMA, "tools[0].function.parameters",
         "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"a\"},\"arguments\":{\"type\":\"object\","
         "\"properties\":{\"x\":{\"type\":\"integer\"}}}},\"required\":[\"name\",\"arguments\"],"
         "\"additionalProperties\":"
         "false}",
         "<tool_call>\n"},
        {one_req, CINFER_GRAMMAR_JSON_SCHEMA, "tools[0].function.parameters",
         "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"b\"},\"arguments\":{\"type\":\"object\"}},"
         "\"required\":[\"name\",\"arguments\"],\"additionalProperties\":false}",
         "<tool_call>\n"},
    };
    api_ctx ctx = {.parser = RECIPE_PARSER_HERMES, .max_n = LIM.max_n, .n_vocab = LIM.n_vocab};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        gen_params p;
        serve_error e;
        api_job a;
        memset(&a, 0, sizeof a);
        memset(&e, 0, sizeof e);
        int rc = api_job_parse(&a, RECIPE_API_CHAT, cases[i].body, strlen(cases[i].body), &ctx, &p, &e);
        a.kind = RECIPE_PARSER_HERMES;
        if (!rc) rc = api_job_prepare(&a, &ctx, &p, &e);
        CHECKF(rc == 0, "%s: %s", cases[i].body, e.message);
        if (rc == 0) {
            CHECKF(p.grammar.kind == cases[i].kind && !strcmp(p.grammar.param, cases[i].param), "%zu: kind %d param %s",
                   i, (int)p.grammar.kind, p.grammar.param);
            CHECKF(!cases[i].text || (p.grammar.text && !strcmp(p.grammar.text, cases[i].text)), "%zu: %s", i,
                   p.grammar.text ? p.grammar.text : "(null)");
            CHECKF(!cases[i].suffix || (p.prompt_suffix && !strcmp(p.prompt_suffix, cases[i].suffix)), "%zu: '%s'", i,
                   p.prompt_suffix ? p.prompt_suffix : "(null)");
            CHECK(p.think_budget < 0); /* constrained: no reasoning budget */
            gen_params_free(&p);
        }
        api_job_free(&a);
    }
    /* strict tools under tool_choice auto: a lazy grammar (Hermes), else 400 naming strict */
    char strict[600];
    snprintf(strict, sizeof strict,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[%s,{\"type\":\"function\","
             "\"function\":{\"name\":\"s\",\"strict\":true,\"parameters\":{\"type\":\"object\",\"properties\":{}}}}]}",
             tool_a);
    for (int k = 0; k < 3; k++) {
        gen_params p;
        serve_error e;
        api_job a;
        memset(&a, 0, sizeof a);
        memset(&e, 0, sizeof e);
        char body[700];
        snprintf(body, sizeof body, "%.*s%s}", (int)strlen(strict) - 1, strict,
                 k == 2 ? ",\"response_format\":{\"type\":\"json_object\"}" : "");
        api_ctx c = {.parser = k == 1 ? RECIPE_PARSER_LLAMA3 : RECIPE_PARSER_HERMES, .max_n = 4, .n_vocab = 512};
        int rc = api_job_parse(&a, RECIPE_API_CHAT, body, strlen(body), &c, &p, &e);
        if (!rc) rc = api_job_prepare(&a, &c, &p, &e);
        if (k == 0) {
            CHECKF(
                rc == 0 && p.grammar.trigger && !strcmp(p.grammar.trigger, "<tool_call>") && !p.prompt_suffix &&
                    strstr(p.grammar.text, "{\"const\":\"a\"},\"arguments\":{\"type\":\"object\"}}") &&
                    strstr(p.grammar.text, "{\"const\":\"s\"},\"arguments\":{\"type\":\"object\",\"properties\":{}}"),
                "%s", rc ? e.message : p.grammar.text);
        } else {
            CHECKF(rc == -1 && !strcmp(e.param, "tools[1].function.strict"), "%d: %s (%s)", k, e.param, e.message);
        }
        if (!rc) gen_params_free(&p);
        api_job_free(&a);
    }
}

int main(void) {
    test_chat_fields();
    test_completion_prompts();
    test_rejections();
    test_structured();
    test_error_json();
    test_stream_chunks();
    test_metrics();
    return test_finish();
}
