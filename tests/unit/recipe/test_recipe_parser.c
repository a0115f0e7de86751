/* test_recipe_parser.c - the incremental output parsers on realistic raw outputs of
 * each model family (protocols.md §5): fed whole, one byte at a time and in 3-byte
 * chunks the aggregated reasoning / content / tool calls are identical and equal the
 * expectation; streamed argument fragments concatenate to valid JSON equal to the
 * expected arguments; every event text is valid UTF-8; ids are stable per seed.
 * Also: parser detection from the real chat templates under shared/fixtures/templates. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/recipe.h"
#include "testutil.h"

#define FB "\xEF\xBD\x9C"
#define SP "\xE2\x96\x81"
#define CB "<" FB "tool" SP "calls" SP "begin" FB ">"
#define CE "<" FB "tool" SP "calls" SP "end" FB ">"
#define C1 "<" FB "tool" SP "call" SP "begin" FB ">"
#define C2 "<" FB "tool" SP "call" SP "end" FB ">"
#define SEP "<" FB "tool" SP "sep" FB ">"

typedef struct {
    const char *name;
    recipe_parser_kind kind;
    unsigned flags;
    const char *input;
    const char *reasoning, *content;
    int n_calls;
    const char *calls[3][2]; /* name, args */
    const char *call_id0; /* expected id of call 0, NULL: minted */
} pcase;

static const pcase k_cases[] = {
    {"think-forced-open",
     RECIPE_PARSER_THINK,
     RECIPE_PARSER_IN_REASONING,
     "Let me think.\nOK, 2+2=4.</think>\n\nThe answer is 4.",
     "Let me think.\nOK, 2+2=4.",
     "\n\nThe answer is 4.",
     0,
     {{0}},
     0},
    {"think-tags", RECIPE_PARSER_THINK, 0, "<think>\nhmm\n</think>Hello", "\nhmm\n", "Hello", 0, {{0}}, 0},
    {"think-model-repeats-start",
     RECIPE_PARSER_THINK,
     RECIPE_PARSER_IN_REASONING,
     "<think>abc</think>x",
     "abc",
     "x",
     0,
     {{0}},
     0},
    {"think-none", RECIPE_PARSER_THINK, 0, "Just text < think, a <thi", "", "Just text < think, a <thi", 0, {{0}}, 0},
    {"think-truncated",
     RECIPE_PARSER_THINK,
     RECIPE_PARSER_IN_REASONING,
     "still thinking </thi",
     "still thinking </thi",
     "",
     0,
     {{0}},
     0},
    {"r1-two-calls",
     RECIPE_PARSER_DEEPSEEK_R1,
     RECIPE_PARSER_IN_REASONING,
     "I should call the tools.</think>\n\n" CB C1 "function" SEP "get_weather\n```json\n{\"city\": \"Paris\"}\n```" C2
     "\n" C1 "function" SEP "get_time\n```json\n{}\n```" C2 CE,
     "I should call the tools.",
     "",
     2,
     {{"get_weather", "{\"city\":\"Paris\"}"}, {"get_time", "{}"}},
     0},
    {"v3-text-then-call",
     RECIPE_PARSER_DEEPSEEK_V3,
     0,
     "Let me check the weather." CB C1 "function" SEP
     "get_weather\n```json\n{\"city\": \"Paris\", \"days\": [1, 2]}\n```" C2 CE,
     "",
     "Let me check the weather.",
     1,
     {{"get_weather", "{\"city\":\"Paris\",\"days\":[1,2]}"}},
     0},
    {"v3-misspelled-begin",
     RECIPE_PARSER_DEEPSEEK_V3,
     0,
     "<" FB "tool_calls_begin" FB ">" C1 "function" SEP "f\n```json\n{\"a\": \"x```y\"}  \n```" C2 CE,
     "",
     "",
     1,
     {{"f", "{\"a\":\"x```y\"}"}},
     0},
    {"v31-two-calls",
     RECIPE_PARSER_DEEPSEEK_V31,
     0,
     CB C1 "get_weather" SEP "{\"city\": \"Paris\"}" C2 C1 "get_time" SEP "{}" C2 CE,
     "",
     "",
     2,
     {{"get_weather", "{\"city\":\"Paris\"}"}, {"get_time", "{}"}},
     0},
    {"v31-thinking",
     RECIPE_PARSER_DEEPSEEK_V31,
     RECIPE_PARSER_IN_REASONING,
     "The user asks about Paris.</think>Checking." CB C1 "get_weather" SEP "{\"city\": \"Par\\u00eds\"}" C2 CE,
     "The user asks about Paris.",
     "Checking.",
     1,
     {{"get_weather", "{\"city\":\"Par\\u00eds\"}"}},
     0},
    {"hermes-two-calls",
     RECIPE_PARSER_HERMES,
     0,
     "I'll look that up.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
     "\"c\"}}\n"
     "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
     "",
     "I'll look that up.",
     2,
     {{"get_weather", "{\"city\":\"Paris\",\"unit\":\"c\"}"}, {"get_time", "{}"}},
     0},
    {"qwen3-think-call",
     RECIPE_PARSER_HERMES,
     0,
     "<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
     "\"\xE6\x9D\xB1\xE4\xBA\xAC\", \"note\": \"a \\\"quoted\\\" } brace\"}}\n</tool_call>",
     "\nThe user wants weather.\n",
     "",
     1,
     {{"get_weather", "{\"city\":\"\xE6\x9D\xB1\xE4\xBA\xAC\",\"note\":\"a \\\"quoted\\\" } brace\"}"}},
     0},
    {"hermes-args-first-string",
     RECIPE_PARSER_HERMES,
     0,
     "<tool_call>{\"arguments\": \"{\\\"x\\\": 1}\", \"name\": \"f\"}</tool_call>",
     "",
     "",
     1,
     {{"f", "{\"x\":1}"}},
     0},
    {"hermes-unterminated",
     RECIPE_PARSER_HERMES,
     0,
     "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": 1}}",
     "",
     "",
     1,
     {{"f", "{\"q\":1}"}},
     0},
    {"hermes-not-json",
     RECIPE_PARSER_HERMES,
     0,
     "<tool_call>not json</tool_call>",
     "",
     "<tool_call>not json</tool_call>",
     0,
     {{0}},
     0},
    {"hermes-no-tools",
     RECIPE_PARSER_HERMES,
     RECIPE_PARSER_NO_TOOLS,
     "a <tool_call>{\"name\":\"f\"}</tool_call>",
     "",
     "a <tool_call>{\"name\":\"f\"}</tool_call>",
     0,
     {{0}},
     0},
    {"hermes-lt-text", RECIPE_PARSER_HERMES, 0, "x < y and <tool> <tool_", "", "x < y and <tool> <tool_", 0, {{0}}, 0},
    {"hermes-truncated-args",
     RECIPE_PARSER_HERMES,
     0,
     "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1, 2",
     "",
     "",
     1,
     {{"f", "{\"a\": [1, 2"}},
     0},
    {"llama3-json",
     RECIPE_PARSER_LLAMA3,
     0,
     "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
     "",
     "",
     1,
     {{"get_weather", "{\"city\":\"Paris\"}"}},
     0},
    {"llama3-python-tag-two",
     RECIPE_PARSER_LLAMA3,
     0,
     "<|python_tag|>{\"type\": \"function\", \"name\": \"f\", \"parameters\": {\"a\": 1}}; {\"name\": \"g\", "
     "\"parameters\": {}}",
     "",
     "",
     2,
     {{"f", "{\"a\":1}"}, {"g", "{}"}},
     0},
    {"llama3-json-not-call",
     RECIPE_PARSER_LLAMA3,
     0,
     "  {\"answer\": 42, \"name\": \"x\"}",
     "",
     "  {\"answer\": 42, \"name\": \"x\"}",
     0,
     {{0}},
     0},
    {"llama3-text", RECIPE_PARSER_LLAMA3, 0, "Hello there {not a call}", "", "Hello there {not a call}", 0, {{0}}, 0},
    {"llama3-extra-key-after-name",
     RECIPE_PARSER_LLAMA3,
     0,
     "{\"name\": \"f\", \"id\": 3, \"x\": [1, {\"y\": \"}\"}], \"parameters\": {\"a\": 1}}",
     "",
     "",
     1,
     {{"f", "{\"a\":1}"}},
     0},
    {"mistral-old",
     RECIPE_PARSER_MISTRAL,
     0,
     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": \"get_time\", "
     "\"arguments\": {}}]",
     "",
     "",
     2,
     {{"get_weather", "{\"city\":\"Paris\"}"}, {"get_time", "{}"}},
     0},
    {"mistral-v11",
     RECIPE_PARSER_MISTRAL,
     0,
     "Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{}",
     "",
     "Sure.",
     2,
     {{"get_weather", "{\"city\":\"Paris\"}"}, {"get_time", "{}"}},
     0},
    {"mistral-call-id",
     RECIPE_PARSER_MISTRAL,
     0,
     "[TOOL_CALLS]get_weather[CALL_ID]abc123XYZ[ARGS]{\"city\": \"Paris\"}",
     "",
     "",
     1,
     {{"get_weather", "{\"city\":\"Paris\"}"}},
     "abc123XYZ"},
    {"mistral-stripped-args", RECIPE_PARSER_MISTRAL, 0, "[TOOL_CALLS]f{\"a\":1}", "", "", 1, {{"f", "{\"a\":1}"}}, 0},
    {"magistral-think", RECIPE_PARSER_MISTRAL, 0, "[THINK]hmm[/THINK]Answer: 42", "hmm", "Answer: 42", 0, {{0}}, 0},
    {"plain-utf8",
     RECIPE_PARSER_PLAIN,
     0,
     "h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\xA6\x99 <think>x</think>",
     "",
     "h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\xA6\x99 <think>x</think>",
     0,
     {{0}},
     0},
};

typedef struct {
    char reasoning[1024], content[1024];
    int n_calls;
    char names[4][64], ids[4][64], args[4][512];
    int begins, ends;
    bool order_ok, utf8_ok;
} agg;

static void cat(char *dst, size_t cap, const char *s, size_t n) {
    size_t l = strlen(dst);
    if (l + n >= cap) n = cap - l - 1;
    memcpy(dst + l, s, n);
    dst[l + n] = 0;
}

static void take(agg *a, const recipe_event *ev, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const recipe_event *e = &ev[i];
        if (e->type == RECIPE_EV_REASONING || e->type == RECIPE_EV_TEXT || e->type == RECIPE_EV_TOOL_ARGS) {
            json_t *s = json_stringn(e->text, e->len); /* NULL if not valid UTF-8 */
            if (!s) a->utf8_ok = false;
            json_decref(s);
        }
        if ((e->type == RECIPE_EV_REASONING || e->type == RECIPE_EV_TEXT) && a->begins != a->ends) a->order_ok = false;
        switch (e->type) {
        case RECIPE_EV_REASONING: cat(a->reasoning, sizeof a->reasoning, e->text, e->len); break;
        case RECIPE_EV_TEXT: cat(a->content, sizeof a->content, e->text, e->len); break;
        case RECIPE_EV_TOOL_BEGIN:
            if (e->index != a->n_calls || a->begins != a->ends) a->order_ok = false;
            if (a->n_calls < 4) {
                snprintf(a->names[a->n_calls], 64, "%s", e->name);
                snprintf(a->ids[a->n_calls], 64, "%s", e->id);
            }
            a->n_calls++;
            a->begins++;
            break;
        case RECIPE_EV_TOOL_ARGS:
            if (e->index != a->n_calls - 1 || a->begins == a->ends) a->order_ok = false;
            if (e->index >= 0 && e->index < 4) cat(a->args[e->index], 512, e->text, e->len);
            break;
        case RECIPE_EV_TOOL_END:
            if (e->index != a->n_calls - 1) a->order_ok = false;
            a->ends++;
            break;
        default: a->order_ok = false;
        }
    }
}

static void run_case(const pcase *c, size_t chunk, agg *a) {
    memset(a, 0, sizeof *a);
    a->order_ok = a->utf8_ok = true;
    recipe_parser *p = recipe_parser_new(c->kind, c->flags);
    CHECK(p != NULL);
    if (!p) return;
    recipe_parser_set_id_seed(p, 42);
    const recipe_event *ev;
    size_t n, len = strlen(c->input);
    for (size_t off = 0; off < len; off += chunk) {
        size_t k = len - off < chunk ? len - off : chunk;
        recipe_parser_feed(p, c->input + off, k, &ev, &n);
        take(a, ev, n);
    }
    recipe_parser_finish(p, &ev, &n);
    take(a, ev, n);
    CHECK(recipe_parser_tool_calls(p) == a->n_calls);
    recipe_parser_free(p);
}

static bool args_match(const char *got, const char *want) {
    json_t *g = json_loads(got, JSON_DECODE_ANY, NULL), *w = json_loads(want, JSON_DECODE_ANY, NULL);
    bool ok = g && w ? json_equal(g, w) : !strcmp(got, want);
    json_decref(g);
    json_decref(w);
    return ok;
}

static void test_cases(void) {
    for (size_t i = 0; i < sizeof k_cases / sizeof *k_cases; i++) {
        const pcase *c = &k_cases[i];
        agg whole, bytes, three;
        run_case(c, 1u << 30, &whole);
        run_case(c, 1, &bytes);
        run_case(c, 3, &three);
        CHECKF(!strcmp(whole.reasoning, c->reasoning), "%s: reasoning [%s]", c->name, whole.reasoning);
        CHECKF(!strcmp(whole.content, c->content), "%s: content [%s]", c->name, whole.content);
        CHECKF(whole.n_calls == c->n_calls, "%s: %d calls", c->name, whole.n_calls);
        CHECKF(whole.order_ok && whole.begins == whole.ends, "%s: event order", c->name);
        for (int k = 0; k < c->n_calls && k < whole.n_calls; k++) {
            CHECKF(!strcmp(whole.names[k], c->calls[k][0]), "%s: call %d name [%s]", c->name, k, whole.names[k]);
            CHECKF(args_match(whole.args[k], c->calls[k][1]), "%s: call %d args [%s]", c->name, k, whole.args[k]);
            if (strcmp(c->name, "hermes-truncated-args")) {
                json_t *j = json_loads(whole.args[k], 0, NULL);
                CHECKF(json_is_object(j), "%s: call %d args not a JSON object: [%s]", c->name, k, whole.args[k]);
                json_decref(j);
            }
        }
        if (c->call_id0) CHECKF(!strcmp(whole.ids[0], c->call_id0), "%s: id [%s]", c->name, whole.ids[0]);
        else if (whole.n_calls) CHECKF(!strncmp(whole.ids[0], "call_", 5), "%s: id [%s]", c->name, whole.ids[0]);
        const agg *others[2] = {&bytes, &three};
        for (int o = 0; o < 2; o++) {
            const agg *b = others[o];
            CHECKF(!strcmp(whole.reasoning, b->reasoning) && !strcmp(whole.content, b->content) &&
                       whole.n_calls == b->n_calls,
                   "%s: chunked (%s) differs: reasoning [%s] content [%s] calls %d", c->name, o ? "3" : "1",
                   b->reasoning, b->content, b->n_calls);
            for (int k = 0; k < whole.n_calls && k < 4; k++)
                CHECKF(!strcmp(whole.names[k], b->names[k]) && !strcmp(whole.args[k], b->args[k]) &&
                           !strcmp(whole.ids[k], b->ids[k]),
                       "%s: chunked call %d differs: [%s] [%s]", c->name, k, b->names[k], b->args[k]);
            CHECKF(b->order_ok && b->utf8_ok, "%s: chunked order/utf8", c->name);
        }
        CHECKF(whole.utf8_ok, "%s: utf8", c->name);
    }
}

/* The marker tail must be held back, not emitted as content, while it may still be a marker. */
static void test_holdback(void) {
    recipe_parser *p = recipe_parser_new(RECIPE_PARSER_HERMES, 0);
    const recipe_event *ev;
    size_t n;
    recipe_parser_feed(p, "Hello <tool_", 12, &ev, &n);
    CHECK(n == 1 && ev[0].type == RECIPE_EV_TEXT && ev[0].len == 5 && !memcmp(ev[0].text, "Hello", 5));
    recipe_parser_feed(p, "ca", 2, &ev, &n);
    CHECK(n == 0);
    recipe_parser_feed(p, "ll>{\"name\": \"f\"", 15, &ev, &n);
    CHECK(n == 1 && ev[0].type == RECIPE_EV_TOOL_BEGIN && !strcmp(ev[0].name, "f"));
    recipe_parser_feed(p, ", \"arguments\": {\"a\"", 19, &ev, &n);
    CHECK(n == 1 && ev[0].type == RECIPE_EV_TOOL_ARGS && ev[0].len == 4 && !memcmp(ev[0].text, "{\"a\"", 4));
    recipe_parser_free(p);

    p = recipe_parser_new(RECIPE_PARSER_DEEPSEEK_V31, 0);
    recipe_parser_feed(p, "ok <" FB "tool" SP "ca", strlen("ok <" FB "tool" SP "ca"), &ev, &n);
    CHECK(n == 1 && ev[0].len == 2);
    recipe_parser_feed(p, "\xE2\x96", 2, &ev, &n); /* half a UTF-8 sequence */
    CHECK(n == 0);
    recipe_parser_finish(p, &ev, &n);
    CHECK(n == 1 && ev[0].type == RECIPE_EV_TEXT); /* not a marker after all: flushed as content */
    recipe_parser_free(p);
}

/* Invalid UTF-8 in the model output never reaches an event: it becomes U+FFFD. */
static void test_invalid_utf8(void) {
    recipe_parser *p = recipe_parser_new(RECIPE_PARSER_THINK, 0);
    const recipe_event *ev;
    size_t n;
    recipe_parser_feed(p, "<think>a\xcf\xff b\xe4", 13, &ev, &n);
    for (size_t i = 0; i < n; i++) {
        json_t *j = json_stringn(ev[i].text, ev[i].len);
        CHECK(j != NULL);
        json_decref(j);
    }
    recipe_parser_finish(p, &ev, &n);
    CHECK(n == 1 && ev[0].type == RECIPE_EV_REASONING);
    json_t *j = n ? json_stringn(ev[0].text, ev[0].len) : NULL;
    CHECK(j != NULL && !strcmp(json_string_value(j), "\xEF\xBF\xBD")); /* the truncated tail */
    json_decref(j);
    recipe_parser_free(p);
}

/* No output at all, for every kind and flag: finish gives nothing. */
static void test_empty(void) {
    for (int k = 0; k < RECIPE_PARSER_COUNT; k++)
        for (unsigned f = 0; f < 4; f++) {
            recipe_parser *p = recipe_parser_new((recipe_parser_kind)k, f);
            const recipe_event *ev;
            size_t n;
            recipe_parser_feed(p, "", 0, &ev, &n);
            CHECK(n == 0);
            recipe_parser_finish(p, &ev, &n);
            CHECK(n == 0);
            recipe_parser_free(p);
        }
}

static void test_names(void) {
    for (int k = 0; k < RECIPE_PARSER_COUNT; k++)
        CHECK(recipe_parser_from_name(recipe_parser_name((recipe_parser_kind)k)) == k);
    CHECK(recipe_parser_from_name("qwen3") == RECIPE_PARSER_HERMES);
    CHECK(recipe_parser_from_name("nope") == -1);
}

static void test_detect(void) {
    static const struct {
        const char *file;
        recipe_parser_kind want;
    } t[] = {
        {"deepseek-ai-DeepSeek-V3.1.jinja", RECIPE_PARSER_DEEPSEEK_V31},
        {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", RECIPE_PARSER_DEEPSEEK_R1},
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", RECIPE_PARSER_DEEPSEEK_R1},
        {"llama-cpp-deepseek-r1.jinja", RECIPE_PARSER_DEEPSEEK_R1},
        {"Qwen-Qwen2.5-7B-Instruct.jinja", RECIPE_PARSER_HERMES},
        {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", RECIPE_PARSER_HERMES},
        {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", RECIPE_PARSER_HERMES},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", RECIPE_PARSER_LLAMA3},
        {"meta-llama-Llama-3.2-3B-Instruct.jinja", RECIPE_PARSER_LLAMA3},
        {"meta-llama-Llama-3.3-70B-Instruct.jinja", RECIPE_PARSER_LLAMA3},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", RECIPE_PARSER_MISTRAL},
        {"google-gemma-2-2b-it.jinja", RECIPE_PARSER_PLAIN},
        {"microsoft-Phi-3.5-mini-instruct.jinja", RECIPE_PARSER_PLAIN},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "fixtures/templates/%s", t[i].file);
        size_t len;
        char *txt = read_file(shared_path(rel), &len);
        CHECKF(txt != NULL, "read %s", rel);
        if (!txt) continue;
        recipe_parser_kind k = recipe_parser_detect(txt, NULL);
        CHECKF(k == t[i].want, "%s: detected %s", t[i].file, recipe_parser_name(k));
        free(txt);
    }
    CHECK(recipe_parser_detect(NULL, "qwen3") == RECIPE_PARSER_HERMES);
    CHECK(recipe_parser_detect(NULL, "deepseek2") == RECIPE_PARSER_DEEPSEEK_V3);
    CHECK(recipe_parser_detect(NULL, NULL) == RECIPE_PARSER_PLAIN);
}

int main(void) {
    test_cases();
    test_holdback();
    test_invalid_utf8();
    test_empty();
    test_names();
    test_detect();
    return test_finish();
}
