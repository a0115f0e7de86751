/* test_recipe_codec.c - golden tests for the protocol codecs. Every case file
 * tests/data/recipe/<case>.json (a request, a response or a canonical event
 * stream in one API's format) is converted to every API and compared
 * semantically (json_equal) with <case>.expect.json; requests in their own
 * format must round-trip to the input where docs/recipe.md says the mapping is
 * lossless; converted requests must parse again in their target format and
 * re-encode to the same JSON (a fixed point). Streams are compared event by
 * event (SSE event name + data JSON). Also: malformed requests give each API's
 * own error shape and status.
 * RECIPE_GOLDEN_UPDATE=1 rewrites the .expect.json files (review the diff!). */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/recipe.h"
#include "recipe/recipe_json.h"
#include "testutil.h"

static char g_dir[1024];
static bool g_update;

static const char *api_names[] = {"chat", "messages", "responses"};

/* SSE text -> [{"event":name|null,"data":json|string}] */
static json_t *sse_events(const char *s, size_t n) {
    json_t *arr = json_array();
    const char *end = s + n;
    while (s < end) {
        const char *blank = strstr(s, "\n\n");
        if (!blank) blank = end;
        json_t *ev = json_object();
        const char *line = s;
        while (line < blank) {
            const char *nl = memchr(line, '\n', (size_t)(blank - line));
            if (!nl) nl = blank;
            size_t ll = (size_t)(nl - line);
            if (ll >= 7 && !strncmp(line, "event: ", 7))
                json_object_set_new(ev, "event", json_stringn(line + 7, ll - 7));
            else if (ll >= 6 && !strncmp(line, "data: ", 6)) {
                json_t *d = json_loadb(line + 6, ll - 6, 0, NULL);
                json_object_set_new(ev, "data", d ? d : json_stringn(line + 6, ll - 6));
            } else if (ll && line[0] == ':') json_object_set_new(ev, "comment", json_stringn(line, ll));
            line = nl + 1;
        }
        json_array_append_new(arr, ev);
        s = blank + 2;
    }
    return arr;
}

static int parse_finish(const char *s) {
    static const char *n[] = {"none", "eos", "stop_string", "length", "tool_calls", "content_filter", "error"};
    for (int i = 0; i < 7; i++)
        if (s && !strcmp(s, n[i])) return i;
    return 0;
}

static json_t *run_stream(recipe_api api, json_t *c) {
    json_t *info = json_object_get(c, "info");
    recipe_stream_info si = {0};
    si.id = json_string_value(json_object_get(info, "id"));
    si.model = json_string_value(json_object_get(info, "model"));
    si.created = json_integer_value(json_object_get(info, "created"));
    si.prompt_tokens = json_integer_value(json_object_get(info, "prompt_tokens"));
    si.cache_read = json_integer_value(json_object_get(info, "cache_read"));
    si.include_usage = json_is_true(json_object_get(info, "include_usage"));
    recipe_stream_encoder *e = recipe_stream_encoder_new(api, &si);
    CHECK(e != NULL);
    recipe_buf out = {0};
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(c, "events"), i, j) {
        static const char *tn[] = {"reasoning", "text",   "tool_begin", "tool_args",
                                   "tool_end",  "finish", "error",      "ping"};
        recipe_event ev = {0};
        const char *t = json_string_value(json_object_get(j, "type"));
        for (int k = 0; k < 8; k++)
            if (t && !strcmp(t, tn[k])) ev.type = (recipe_event_type)k;
        ev.text = json_string_value(json_object_get(j, "text"));
        ev.len = ev.text ? strlen(ev.text) : 0;
        ev.index = (int)json_integer_value(json_object_get(j, "index"));
        ev.id = json_string_value(json_object_get(j, "id"));
        ev.name = json_string_value(json_object_get(j, "name"));
        ev.finish = (recipe_finish)parse_finish(json_string_value(json_object_get(j, "finish")));
        ev.stop_sequence = json_string_value(json_object_get(j, "stop_sequence"));
        json_t *u = json_object_get(j, "usage");
        ev.usage.prompt = json_integer_value(json_object_get(u, "prompt"));
        ev.usage.cache_read = json_integer_value(json_object_get(u, "cache_read"));
        ev.usage.output = json_integer_value(json_object_get(u, "output"));
        ev.usage.reasoning = json_integer_value(json_object_get(u, "reasoning"));
        recipe_error err;
        CHECKF(recipe_stream_encoder_event(e, &ev, &out, &err) == 0, "stream event %zu: %s", i, err.message);
    }
    CHECK(recipe_stream_encoder_done(e));
    recipe_error err;
    recipe_event extra = {.type = RECIPE_EV_TEXT, .text = "x", .len = 1};
    CHECK(recipe_stream_encoder_event(e, &extra, &out, &err) == -1); /* finished: refused */
    json_t *evs = sse_events(out.data ? out.data : "", out.len);
    recipe_buf_free(&out);
    recipe_stream_encoder_free(e);
    return evs;
}

static void dump_diff(const char *what, json_t *got, json_t *want) {
    char *g = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT), *w = json_dumps(want, JSON_SORT_KEYS | JSON_COMPACT);
    fprintf(stderr, "%s\n  got:  %s\n  want: %s\n", what, g ? g : "(null)", w ? w : "(null)");
    free(g);
    free(w);
}

static void run_case(const char *file) {
    char path[1200], epath[1200];
    snprintf(path, sizeof path, "%s/%s", g_dir, file);
    snprintf(epath, sizeof epath, "%s/%.*s.expect.json", g_dir, (int)(strlen(file) - 5), file);
    json_error_t je;
    json_t *c = json_load_file(path, 0, &je);
    CHECKF(c != NULL, "%s: %s", path, je.text);
    if (!c) return;
    const char *kind = json_string_value(json_object_get(c, "kind"));
    int src = recipe_api_from_name(json_string_value(json_object_get(c, "api")));
    json_t *input = json_object_get(c, "input");
    json_t *got = json_object();
    if (!strcmp(kind, "request")) {
        recipe_request r;
        recipe_request_init(&r);
        recipe_error err;
        CHECKF(recipe_request_parse((recipe_api)src, input, &r, &err) == 0, "%s: parse: %s", file, err.message);
        for (int a = 0; a < RECIPE_API_COUNT; a++) {
            json_t *o = recipe_request_encode((recipe_api)a, &r, &err);
            CHECKF(o != NULL, "%s: encode %s: %s", file, api_names[a], err.message);
            if (!o) continue;
            /* the text encoder writes the same JSON as the tree encoder */
            recipe_buf tb = {0};
            CHECKF(recipe_request_encode_text((recipe_api)a, &r, &tb, &err) == 0, "%s: encode_text %s", file,
                   api_names[a]);
            json_t *tj = tb.data ? json_loadb(tb.data, tb.len, 0, NULL) : NULL;
            if (!json_equal(tj, o)) {
                CHECKF(0, "%s: %s text encoding differs from the tree encoding", file, api_names[a]);
                dump_diff("text vs tree", tj, o);
            }
            json_decref(tj);
            recipe_buf_free(&tb);
            /* fixed point: the converted request parses in its format and re-encodes identically */
            recipe_request r2;
            recipe_request_init(&r2);
            CHECKF(recipe_request_parse((recipe_api)a, o, &r2, &err) == 0, "%s: reparse %s: %s", file, api_names[a],
                   err.message);
            json_t *o2 = recipe_request_encode((recipe_api)a, &r2, &err);
            if (!json_equal(o, o2)) {
                CHECKF(0, "%s: %s not a fixed point", file, api_names[a]);
                dump_diff("fixed point", o2, o);
            }
            json_decref(o2);
            recipe_request_free(&r2);
            json_object_set_new(got, api_names[a], o);
        }
        json_t *canon = recipe_request_dump(&r);
        json_object_set_new(got, "canonical", canon);
        recipe_request_free(&r);
        if (json_is_true(json_object_get(c, "lossless"))) {
            json_t *rt = json_object_get(got, api_names[src]);
            if (!json_equal(rt, input)) {
                CHECKF(0, "%s: round trip through canonical is not lossless", file);
                dump_diff("round trip", rt, input);
            }
        }
    } else if (!strcmp(kind, "response")) {
        recipe_response r;
        recipe_response_init(&r);
        recipe_error err;
        CHECKF(recipe_response_parse((recipe_api)src, input, &r, &err) == 0, "%s: parse: %s", file, err.message);
        for (int a = 0; a < RECIPE_API_COUNT; a++) {
            json_t *o = recipe_response_encode((recipe_api)a, &r, NULL, &err);
            CHECKF(o != NULL, "%s: encode %s", file, api_names[a]);
            if (o) json_object_set_new(got, api_names[a], o);
        }
        recipe_response_free(&r);
        if (json_is_true(json_object_get(c, "lossless"))) {
            json_t *rt = json_object_get(got, api_names[src]);
            if (!json_equal(rt, input)) {
                CHECKF(0, "%s: response round trip is not lossless", file);
                dump_diff("round trip", rt, input);
            }
        }
    } else {
        for (int a = 0; a < RECIPE_API_COUNT; a++) json_object_set_new(got, api_names[a], run_stream((recipe_api)a, c));
    }
    if (g_update) {
        CHECK(json_dump_file(got, epath, JSON_INDENT(1) | JSON_SORT_KEYS) == 0);
    } else {
        json_t *want = json_load_file(epath, 0, &je);
        CHECKF(want != NULL, "%s: %s", epath, je.text);
        const char *k;
        json_t *v;
        json_object_foreach(want, k, v) {
            json_t *g = json_object_get(got, k);
            if (!json_equal(g, v)) {
                CHECKF(0, "%s: %s differs from %s", file, k, epath);
                dump_diff(k, g, v);
            }
        }
        CHECKF(json_object_size(want) == json_object_size(got), "%s: expectation keys", file);
        json_decref(want);
    }
    json_decref(got);
    json_decref(c);
}

static void test_golden(void) {
    DIR *d = opendir(g_dir);
    CHECKF(d != NULL, "open %s", g_dir);
    if (!d) return;
    char *names[256];
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 256) {
        size_t l = strlen(de->d_name);
        if (l > 5 && !strcmp(de->d_name + l - 5, ".json") && !strstr(de->d_name, ".expect."))
            names[n++] = strdup(de->d_name);
    }
    closedir(d);
    CHECK(n >= 10);
    for (int i = 0; i < n; i++) {
        run_case(names[i]);
        free(names[i]);
    }
}

/* Malformed requests -> an error in the API's own shape and status. */
static void test_errors(void) {
    static const struct {
        recipe_api api;
        const char *body;
        const char *param;
    } bad[] = {
        {RECIPE_API_CHAT, "{\"model\":\"m\"}", "messages"},
        {RECIPE_API_CHAT, "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", "messages[0]"},
        {RECIPE_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":3}", "temperature"},
        {RECIPE_API_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", "stop"},
        {RECIPE_API_CHAT, "{\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}", "messages[0]"},
        {RECIPE_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"sometimes\"}",
         "tool_choice"},
        {RECIPE_API_MESSAGES, "{\"model\":\"m\",\"messages\":[]}", "max_tokens"},
        {RECIPE_API_MESSAGES, "{\"max_tokens\":10,\"messages\":[{\"role\":\"system\",\"content\":\"x\"}]}",
         "messages[0]"},
        {RECIPE_API_MESSAGES,
         "{\"max_tokens\":2000,\"messages\":[],\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":4000}}",
         "thinking.budget_tokens"},
        {RECIPE_API_MESSAGES,
         "{\"max_tokens\":10,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"video\"}]}]}",
         "messages[0].content[0]"},
        {RECIPE_API_RESPONSES, "{\"model\":\"m\"}", "input"},
        {RECIPE_API_RESPONSES, "{\"input\":[{\"type\":\"item_reference\",\"id\":\"x\"}]}", "input[0]"},
        {RECIPE_API_RESPONSES, "{\"input\":\"x\",\"tools\":[{\"type\":\"web_search\"}]}", "tools"},
        {RECIPE_API_RESPONSES, "{\"input\":\"x\",\"reasoning\":{\"effort\":\"extreme\"}}", "reasoning.effort"},
        /* issue 14 §4.6: wrong types are refused, never ignored */
        {RECIPE_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":5}", "tools"},
        {RECIPE_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":5}", "tool_choice"},
        {RECIPE_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":5}",
         "response_format"},
        {RECIPE_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true,\"stream_options\":5}",
         "stream_options"},
        {RECIPE_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream_options\":{}}",
         "stream_options"},
        /* logit_bias keys: canonical decimal token ids only */
        {RECIPE_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\" 1\":1}}",
         "logit_bias"},
        {RECIPE_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"01\":1}}",
         "logit_bias"},
        {RECIPE_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"-0\":1}}",
         "logit_bias"},
        {RECIPE_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"+1\":1}}",
         "logit_bias"},
        {RECIPE_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"\":1}}",
         "logit_bias"},
        {RECIPE_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"1\":101}}",
         "logit_bias"},
        {RECIPE_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"1\":\"a\"}}",
         "logit_bias"},
        {RECIPE_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"2147483648\":1}}",
         "logit_bias"},
        /* vLLM extras: typed */
        {RECIPE_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"min_tokens\":-1}", "min_tokens"},
        {RECIPE_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"ignore_eos\":1}", "ignore_eos"},
        {RECIPE_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop_token_ids\":[1,-2]}",
         "stop_token_ids"},
        {RECIPE_API_MESSAGES, "{\"max_tokens\":5,\"messages\":[],\"skip_special_tokens\":\"no\"}",
         "skip_special_tokens"},
        {RECIPE_API_RESPONSES, "{\"input\":\"x\",\"include_stop_str_in_output\":0}", "include_stop_str_in_output"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *b = json_loads(bad[i].body, 0, NULL);
        CHECK(b != NULL);
        recipe_request r;
        recipe_request_init(&r);
        recipe_error err;
        memset(&err, 0, sizeof err);
        int rc = recipe_request_parse(bad[i].api, b, &r, &err);
        CHECKF(rc == -1, "bad[%zu] accepted", i);
        CHECKF(!strcmp(err.param, bad[i].param), "bad[%zu]: param [%s] message [%s]", i, err.param, err.message);
        CHECK(recipe_error_status(bad[i].api, &err) == 400);
        json_t *eb = recipe_error_body(bad[i].api, &err, "req_1");
        if (bad[i].api == RECIPE_API_MESSAGES) {
            CHECK(!strcmp(json_string_value(json_object_get(eb, "type")), "error"));
            CHECK(!strcmp(json_string_value(json_object_get(json_object_get(eb, "error"), "type")),
                          "invalid_request_error"));
            CHECK(json_is_string(json_object_get(json_object_get(eb, "error"), "message")));
            CHECK(!strcmp(json_string_value(json_object_get(eb, "request_id")), "req_1"));
        } else {
            json_t *e = json_object_get(eb, "error");
            CHECK(!strcmp(json_string_value(json_object_get(e, "type")), "invalid_request_error"));
            CHECK(json_is_string(json_object_get(e, "message")));
            CHECK(!strcmp(json_string_value(json_object_get(e, "param")), bad[i].param));
            CHECK(json_object_get(e, "code") != NULL);
        }
        json_decref(eb);
        recipe_request_free(&r);
        json_decref(b);
    }
    recipe_error e = {.kind = RECIPE_ERR_OVERLOADED};
    snprintf(e.message, sizeof e.message, "busy");
    CHECK(recipe_error_status(RECIPE_API_MESSAGES, &e) == 529);
    CHECK(recipe_error_status(RECIPE_API_CHAT, &e) == 503);
    json_t *eb = recipe_error_body(RECIPE_API_MESSAGES, &e, NULL);
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(eb, "error"), "type")), "overloaded_error"));
    json_decref(eb);
    e.kind = RECIPE_ERR_CONTEXT_LENGTH;
    eb = recipe_error_body(RECIPE_API_CHAT, &e, NULL);
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(eb, "error"), "code")), "context_length_exceeded"));
    json_decref(eb);
}

/* vLLM extras and logit_bias: parsed into the canonical request by every format, re-emitted by
 * every request encoder. */
static void test_extras(void) {
    static const char *const bodies[RECIPE_API_COUNT] = {
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],",
        "{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],",
        "{\"input\":\"x\",",
    };
    static const char extras[] = "\"min_tokens\":3,\"ignore_eos\":true,\"include_stop_str_in_output\":false,"
                                 "\"skip_special_tokens\":false,\"stop_token_ids\":[7,0],\"priority\":-2,"
                                 "\"guided_regex\":\"a+\"}";
    for (int api = 0; api < RECIPE_API_COUNT; api++) {
        char body[512];
        snprintf(body, sizeof body, "%s%s", bodies[api], extras);
        recipe_request r;
        recipe_request_init(&r);
        recipe_error err;
        int rc = recipe_request_parse_text((recipe_api)api, body, strlen(body), 0, &r, &err);
        CHECKF(rc == 0, "%s: %s", body, err.message);
        CHECK(r.min_tokens == 3 && r.ignore_eos == 1 && r.include_stop_str_in_output == 0 &&
              r.skip_special_tokens == 0 && r.priority == -2);
        CHECK(r.n_stop_token_ids == 2 && r.stop_token_ids[0] == 7 && r.stop_token_ids[1] == 0);
        CHECK(r.guided_field && !strcmp(r.guided_field, "guided_regex") && r.guided && !strcmp(r.guided, "\"a+\""));
        for (int to = 0; to < RECIPE_API_COUNT && rc == 0; to++) { /* every encoder keeps them */
            recipe_buf out = {0};
            CHECK(recipe_request_encode_text((recipe_api)to, &r, &out, &err) == 0);
            CHECKF(out.data && strstr(out.data, "\"min_tokens\":3") && strstr(out.data, "\"ignore_eos\":true") &&
                       strstr(out.data, "\"stop_token_ids\":[7,0]") && strstr(out.data, "\"guided_regex\":\"a+\"") &&
                       strstr(out.data, "\"priority\":-2") && strstr(out.data, "\"skip_special_tokens\":false"),
                   "%d -> %d: %s", api, to, out.data ? out.data : "");
            recipe_buf_free(&out);
        }
        recipe_request_free(&r);
    }
    recipe_request r;
    recipe_request_init(&r);
    recipe_error err;
    const char *b = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"0\":-100,\"17\":2.5}}";
    CHECK(recipe_request_parse_text(RECIPE_API_CHAT, b, strlen(b), 0, &r, &err) == 0);
    CHECK(r.n_bias == 2 && r.bias[0].token == 0 && r.bias[0].bias == -100 && r.bias[1].token == 17 &&
          r.bias[1].bias == 2.5);
    recipe_request_free(&r);
}

/* Completions requests (RECIPE_PARSE_COMPLETIONS): prompt forms, logprobs, the recorded fields. */
static void test_completions_parse(void) {
    static const struct {
        const char *body;
        const char *prompt;
        size_t n_ids;
    } ok[] = {
        {"{\"prompt\":\"Once\"}", "Once", 0},
        {"{\"prompt\":[\"Once\"]}", "Once", 0},
        {"{\"prompt\":[1,403,407]}", NULL, 3},
        {"{\"prompt\":[[1,2]]}", NULL, 2},
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        recipe_request r;
        recipe_request_init(&r);
        recipe_error err;
        int rc = recipe_request_parse_text(RECIPE_API_CHAT, ok[i].body, strlen(ok[i].body), RECIPE_PARSE_COMPLETIONS,
                                           &r, &err);
        CHECKF(rc == 0 && r.completion && r.n_messages == 0, "%s: %s", ok[i].body, err.message);
        if (ok[i].prompt) CHECK(r.prompt && !strcmp(r.prompt, ok[i].prompt) && r.prompt_len == strlen(ok[i].prompt));
        else CHECK(!r.prompt && r.n_prompt_ids == ok[i].n_ids && r.prompt_ids[0] == 1);
        recipe_buf out = {0};
        CHECK(recipe_request_encode_text(RECIPE_API_CHAT, &r, &out, &err) == -1); /* no messages to encode */
        recipe_buf_free(&out);
        recipe_request_free(&r);
    }
    const char *b = "{\"prompt\":\"x\",\"logprobs\":3,\"echo\":true,\"suffix\":\"y\",\"best_of\":2,\"n\":2,"
                    "\"stop\":\"END\",\"min_tokens\":1,\"logit_bias\":{\"5\":-1}}";
    recipe_request r;
    recipe_request_init(&r);
    recipe_error err;
    CHECK(recipe_request_parse_text(RECIPE_API_CHAT, b, strlen(b), RECIPE_PARSE_COMPLETIONS, &r, &err) == 0);
    CHECK(r.logprobs == 1 && r.top_logprobs == 3 && r.echo == 1 && r.suffix && !strcmp(r.suffix, "y") &&
          r.best_of == 2 && r.n == 2 && r.n_stop == 1 && r.min_tokens == 1 && r.n_bias == 1 && r.bias[0].token == 5);
    recipe_request_free(&r);
    static const struct {
        const char *body, *param;
    } bad[] = {
        {"{}", "prompt"},
        {"{\"prompt\":[\"a\",\"b\"]}", "prompt"},
        {"{\"prompt\":[1,-1]}", "prompt"},
        {"{\"prompt\":5}", "prompt"},
        {"{\"prompt\":\"x\",\"logprobs\":true}", "logprobs"},
        {"{\"prompt\":\"x\",\"top_logprobs\":2}", "top_logprobs"},
        {"{\"prompt\":\"x\",\"echo\":1}", "echo"},
        {"{\"prompt\":\"x\",\"suffix\":1}", "suffix"},
        {"{\"prompt\":\"x\",\"stream_options\":{}}", "stream_options"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        recipe_request_init(&r);
        int rc = recipe_request_parse_text(RECIPE_API_CHAT, bad[i].body, strlen(bad[i].body), RECIPE_PARSE_COMPLETIONS,
                                           &r, &err);
        CHECKF(rc == -1 && !strcmp(err.param, bad[i].param), "%s: rc %d param [%s]", bad[i].body, rc, err.param);
        recipe_request_free(&r);
    }
}

/* The OpenAI writer: two choices side by side with logprobs, the last finish ends the stream;
 * the Completions body and Chat choices with logprobs. */
static void test_openai_writer(void) {
    recipe_logprob alt[2] = {{.token = "a", .len = 1, .logprob = -0.5}, {.token = "\xe2\x80", .len = 2, .logprob = -2}};
    recipe_logprob lp[2] = {{.token = "a", .len = 1, .logprob = -0.5, .top = alt, .n_top = 2},
                            {.token = "\xe2\x80", .len = 2, .logprob = -1.25, .top = alt, .n_top = 2}};
    for (int completion = 0; completion < 2; completion++) {
        recipe_stream_info info = {
            .id = "x-1", .model = "m", .created = 5, .include_usage = true, .n_choices = 2, .completion = completion};
        recipe_stream_encoder *e = recipe_stream_encoder_new(RECIPE_API_CHAT, &info);
        CHECK(e != NULL);
        if (!e) continue;
        recipe_buf out = {0};
        recipe_error err;
        recipe_event t1 = {.type = RECIPE_EV_TEXT, .text = "a", .len = 1, .choice = 1, .logprobs = lp, .n_logprobs = 2};
        recipe_event f0 = {.type = RECIPE_EV_FINISH, .finish = RECIPE_FINISH_EOS, .choice = 0};
        recipe_event f1 = {.type = RECIPE_EV_FINISH,
                           .finish = RECIPE_FINISH_CANCELLED,
                           .choice = 1,
                           .has_usage = true,
                           .usage = {.prompt = 3, .output = 4}};
        CHECK(recipe_stream_encoder_event(e, &t1, &out, &err) == 0);
        CHECK(recipe_stream_encoder_event(e, &f0, &out, &err) == 0 && !recipe_stream_encoder_done(e));
        CHECK(recipe_stream_encoder_event(e, &f0, &out, &err) == -1); /* choice 0 already finished */
        CHECK(recipe_stream_encoder_event(e, &f1, &out, &err) == 0 && recipe_stream_encoder_done(e));
        const char *d = out.data ? out.data : "";
        if (completion)
            CHECKF(strstr(d, "\"object\":\"text_completion\"") && strstr(d, "\"index\":1,\"text\":\"a\"") &&
                       strstr(d, "\"tokens\":[\"a\",\"bytes:\\\\xe2\\\\x80\"]") && strstr(d, "\"text_offset\":[0,1]") &&
                       strstr(d, "\"finish_reason\":\"abort\"") && !strstr(d, "\"role\""),
                   "%s", d);
        else
            CHECKF(strstr(d, "{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}") &&
                       strstr(d, "{\"index\":1,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}") &&
                       strstr(d, "\"bytes\":[226,128]") && strstr(d, "\"finish_reason\":\"abort\""),
                   "%s", d);
        CHECK(strstr(d, "\"usage\":{\"prompt_tokens\":3") != NULL);
        CHECK(strlen(d) >= 14 && !strcmp(d + strlen(d) - 14, "data: [DONE]\n\n"));
        recipe_buf_free(&out);
        recipe_stream_encoder_free(e);
    }
    recipe_part p0 = {.type = RECIPE_PART_TEXT, .text = "hi"};
    recipe_choice cs[2] = {
        {.parts = &p0, .n_parts = 1, .finish = RECIPE_FINISH_LENGTH, .logprobs = lp, .n_logprobs = 1},
        {.parts = &p0,
         .n_parts = 1,
         .finish = RECIPE_FINISH_STOP_STRING,
         .stop_sequence = "S",
         .logprobs = lp,
         .n_logprobs = 0}};
    for (int completion = 0; completion < 2; completion++) {
        recipe_response r;
        recipe_response_init(&r);
        r.id = "x-2";
        r.model = "m";
        r.choices = cs;
        r.n_choices = 2;
        r.completion = completion;
        recipe_buf out = {0};
        recipe_error err;
        CHECK(recipe_response_encode_text(RECIPE_API_CHAT, &r, NULL, &out, &err) == 0);
        json_t *o = out.data ? json_loads(out.data, 0, NULL) : NULL;
        json_t *c0 = json_array_get(json_object_get(o, "choices"), 0),
               *c1 = json_array_get(json_object_get(o, "choices"), 1);
        CHECKF(json_array_size(json_object_get(o, "choices")) == 2, "%s", out.data ? out.data : "");
        CHECK(!strcmp(json_string_value(json_object_get(c0, "finish_reason")), "length"));
        CHECK(!strcmp(json_string_value(json_object_get(c1, "stop_reason")), "S"));
        if (completion) {
            CHECK(!strcmp(json_string_value(json_object_get(c1, "text")), "hi"));
            CHECK(json_array_size(json_object_get(json_object_get(c0, "logprobs"), "tokens")) == 1);
        } else {
            CHECK(json_array_size(json_object_get(json_object_get(c0, "logprobs"), "content")) == 1);
            CHECK(json_array_size(json_object_get(json_object_get(c1, "logprobs"), "content")) == 0);
        }
        json_decref(o);
        recipe_buf_free(&out);
        recipe_response_free(&r);
    }
}

/* recipe_buf: out of memory is sticky (an impossible size stands in for a failed realloc). */
static void test_buf_sticky(void) {
    recipe_buf b = {0};
    CHECK(recipe_buf_append(&b, "ab", 2) == 0 && !b.failed);
    CHECK(recipe_buf_append(&b, "x", SIZE_MAX / 2 + 1) == -1 && b.failed);
    CHECK(b.len == 2 && !strcmp(b.data, "ab")); /* what fit before stays */
    CHECK(recipe_buf_append(&b, "c", 1) == -1 && b.len == 2); /* later appends fail too */
    recipe_buf_free(&b);
    CHECK(!b.failed && recipe_buf_append(&b, "c", 1) == 0 && !strcmp(b.data, "c"));
    recipe_buf_free(&b);
}

static void test_mappings(void) {
    CHECK(recipe_effort_from_budget(4096) == RECIPE_EFFORT_HIGH);
    CHECK(recipe_effort_from_budget(2048) == RECIPE_EFFORT_MEDIUM);
    CHECK(recipe_effort_from_budget(1024) == RECIPE_EFFORT_LOW);
    CHECK(recipe_effort_from_budget(10) == RECIPE_EFFORT_MINIMAL);
    CHECK(recipe_finish_from_messages("pause_turn") == RECIPE_FINISH_EOS);
    CHECK(recipe_finish_from_messages("model_context_window_exceeded") == RECIPE_FINISH_LENGTH);
    CHECK(recipe_finish_from_messages("refusal") == RECIPE_FINISH_CONTENT_FILTER);
    CHECK(recipe_finish_from_messages("whatever") == RECIPE_FINISH_EOS);
    CHECK(!strcmp(recipe_finish_chat(RECIPE_FINISH_STOP_STRING), "stop"));
    CHECK(!strcmp(recipe_finish_messages(RECIPE_FINISH_STOP_STRING), "stop_sequence"));
    CHECK(recipe_api_from_name("anthropic") == RECIPE_API_MESSAGES);
    /* a reused request object: parse twice, second parse fully replaces the first */
    recipe_request r;
    recipe_request_init(&r);
    json_t *a = json_loads("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"seed\":1}", 0, NULL);
    json_t *b = json_loads("{\"messages\":[{\"role\":\"user\",\"content\":\"b\"}]}", 0, NULL);
    CHECK(recipe_request_parse(RECIPE_API_CHAT, a, &r, NULL) == 0 && r.seed == 1);
    CHECK(recipe_request_parse(RECIPE_API_CHAT, b, &r, NULL) == 0 && r.seed == RECIPE_UNSET);
    CHECK(r.n_messages == 1 && !strcmp(r.messages[0].parts[0].text, "b"));
    recipe_request_free(&r);
    json_decref(a);
    json_decref(b);
}

int main(void) {
    const char *f = __FILE__;
    const char *cut = strstr(f, "tests/unit/recipe/");
    snprintf(g_dir, sizeof g_dir, "%.*stests/data/recipe", cut ? (int)(cut - f) : 0, f);
    if (getenv("CINFER_SRC")) snprintf(g_dir, sizeof g_dir, "%s/tests/data/recipe", getenv("CINFER_SRC"));
    g_update = getenv("RECIPE_GOLDEN_UPDATE") != NULL;
    test_golden();
    test_errors();
    test_extras();
    test_buf_sticky();
    test_completions_parse();
    test_openai_writer();
    test_mappings();
    return test_finish();
}
