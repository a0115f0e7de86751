/* bench_recipe.c - protocol conversions per second on one core: a ~2 KB Chat
 * Completions request (system prompt, a few turns, two tool calls and their
 * results, three tool definitions, sampling options) converted to Anthropic
 * Messages and to OpenAI Responses, and those back to Chat. One "conversion" =
 * JSON text in -> canonical request (recipe_request_parse_text) -> JSON text out
 * (recipe_request_encode_text): what a protocol gateway does per request. Times
 * are thread CPU time, so other load on the machine inflates them less than wall
 * time would. Also reported: the jansson entry point (a tree in, serialized and
 * parsed), the jansson-tree encoder, jansson's own json_loads of the same body for
 * comparison, and the output parser's throughput.
 * Usage: bench_recipe [-s SECONDS | SECONDS] (seconds per measurement, default 1; see --help). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_cli.h"
#include "cinfer/recipe.h"
#include "recipe/recipe_json.h"

static const char k_usage[] =
    "usage: bench_recipe [-s SECONDS] [SECONDS]\n"
    "Protocol conversions per second on one core (Chat <-> Messages, Chat <-> Responses, ~2 KB request),\n"
    "the jansson entry points and the output parser. Not a test: numbers depend on the machine.\n"
    "  -s, --seconds S   seconds per measurement, 0.001..3600 (default 1; also the one positional argument)\n"
    "  -h, --help        this text\n";

static const char k_req[] =
    "{\"model\":\"cinfer-default\",\"messages\":["
    "{\"role\":\"system\",\"content\":\"You are a careful assistant. Answer concisely, cite tool results, and never "
    "invent "
    "data. When a tool is needed, call it with precise arguments. Prefer metric units and ISO dates.\"},"
    "{\"role\":\"user\",\"content\":\"I am planning a trip to Paris next week. What will the weather be like, and what "
    "time "
    "is it there right now? Also suggest two museums that are open late on Wednesdays.\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_0001\",\"type\":\"function\",\"function\":"
    "{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\",\\\"days\\\":7,\\\"unit\\\":\\\"celsius\\\"}"
    "\"}},"
    "{\"id\":\"call_0002\",\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"arguments\":\"{\\\"tz\\\":"
    "\\\"Europe/Paris\\\"}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"call_0001\",\"content\":\"Mon 14/9 C light rain; Tue 16/10 C cloudy; Wed "
    "18/11 C sunny; "
    "Thu 17/12 C showers; Fri 15/9 C windy; Sat 19/12 C sunny; Sun 20/13 C sunny\"},"
    "{\"role\":\"tool\",\"tool_call_id\":\"call_0002\",\"content\":\"2026-11-29T11:42:00+01:00\"},"
    "{\"role\":\"assistant\",\"content\":\"Expect mild, mostly dry weather (9-20 C) with rain early in the week. It is "
    "11:42 in "
    "Paris now. The Louvre and the Musee d'Orsay are both open late on Wednesdays... wait, let me double check "
    "Orsay.\"},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Please double check and also tell me which of them "
    "is "
    "closer to the Eiffel Tower, with walking times.\"}]}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather forecast for a "
    "city\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\","
    "\"minimum\":1,"
    "\"maximum\":14},\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]}},\"required\":[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"description\":\"Current local time in a time zone\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"tz\":{\"type\":\"string\"}},\"required\":[\"tz\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"opening_hours\",\"description\":\"Opening hours of a venue\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"venue\":{\"type\":\"string\"},\"day\":{\"type\":\"string\"}}"
    ","
    "\"required\":[\"venue\"]}}}],"
    "\"tool_choice\":\"auto\",\"temperature\":0.6,\"top_p\":0.95,\"max_completion_tokens\":1024,\"stop\":[\"</"
    "answer>\"],"
    "\"seed\":1234,\"stream\":true,\"stream_options\":{\"include_usage\":true},\"user\":\"user-42\"}";

/* CPU time of this thread: "per core" figures that other processes on the machine do not inflate */
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef enum { IN_TEXT, IN_TREE } in_kind;
typedef enum { OUT_TEXT, OUT_TREE } out_kind;

/* src (api a) -> canonical -> api b. Returns conversions per CPU second. */
static double rate(const char *src_text, const json_t *src_tree, recipe_api a, recipe_api b, in_kind in, out_kind out_k,
                   double secs) {
    recipe_request r;
    recipe_request_init(&r);
    recipe_buf out = {0};
    size_t len = strlen(src_text);
    long n = 0;
    double t0 = now(), t;
    do {
        for (int i = 0; i < 256; i++) {
            int rc = in == IN_TEXT ? recipe_request_parse_text(a, src_text, len, 0, &r, NULL)
                                   : recipe_request_parse(a, src_tree, &r, NULL);
            if (rc) abort();
            if (out_k == OUT_TEXT) {
                out.len = 0;
                if (recipe_request_encode_text(b, &r, &out, NULL)) abort();
            } else {
                json_t *o = recipe_request_encode(b, &r, NULL);
                if (!o) abort();
                json_decref(o);
            }
        }
        n += 256;
        t = now() - t0;
    } while (t < secs);
    recipe_request_free(&r);
    recipe_buf_free(&out);
    return (double)n / t;
}

/* median and best of 5 measurements of secs/5 each (other load on the shared VM moves single runs) */
typedef struct {
    double median, best;
} stat5;

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static stat5 rate5(const char *src_text, recipe_api a, recipe_api b, double secs) {
    double r[5];
    for (int i = 0; i < 5; i++) r[i] = rate(src_text, NULL, a, b, IN_TEXT, OUT_TEXT, secs / 5);
    qsort(r, 5, sizeof *r, cmp_d);
    return (stat5){r[2], r[4]};
}

/* jansson's json_loads of the same body, for scale */
static double loads_rate(const char *text, double secs) {
    long n = 0;
    double t0 = now(), t;
    do {
        for (int i = 0; i < 64; i++) {
            json_t *j = json_loads(text, 0, NULL);
            if (!j) abort();
            json_decref(j);
        }
        n += 64;
        t = now() - t0;
    } while (t < secs);
    return (double)n / t;
}

static double parser_mbps(double secs) {
    static const char out[] =
        "<think>\nThe user wants the weather in Paris and the time. I will call both tools.\n</think>\n\n"
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 7}}\n</tool_call>\n"
        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"Europe/Paris\"}}\n</tool_call>";
    size_t len = strlen(out), bytes = 0;
    double t0 = now(), t;
    do {
        recipe_parser *p = recipe_parser_new(RECIPE_PARSER_HERMES, 0);
        const recipe_event *ev;
        size_t n;
        for (size_t off = 0; off < len; off += 4)
            recipe_parser_feed(p, out + off, len - off < 4 ? len - off : 4, &ev, &n);
        recipe_parser_finish(p, &ev, &n);
        recipe_parser_free(p);
        bytes += len;
        t = now() - t0;
    } while (t < secs);
    return (double)bytes / t / 1e6;
}

/* JSON text of `req` in api b (malloc'd) */
static char *convert_text(const char *text, recipe_api a, recipe_api b) {
    recipe_request r;
    recipe_request_init(&r);
    recipe_buf out = {0};
    if (recipe_request_parse_text(a, text, strlen(text), 0, &r, NULL) ||
        recipe_request_encode_text(b, &r, &out, NULL) || !out.data) {
        recipe_request_free(&r);
        recipe_buf_free(&out);
        return NULL;
    }
    recipe_request_free(&r);
    char *s = strndup(out.data, out.len);
    recipe_buf_free(&out);
    return s;
}

/* Parses the command line into *secs. Returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, double *secs) {
    static const struct option longs[] = {
        {"seconds", required_argument, NULL, 's'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    const char *s_arg = NULL;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":s:h", longs, NULL)) != -1) {
        if (c == 'h') {
            fputs(k_usage, stdout);
            return 0;
        }
        if (c == 's') s_arg = optarg;
        else return bench_bad_option("bench_recipe", c, argv);
    }
    if (optind < argc) s_arg = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "bench_recipe: unexpected argument '%s' (see bench_recipe --help)\n", argv[optind]);
        return BENCH_USAGE_ERROR;
    }
    if (s_arg && bench_parse_double("bench_recipe", "SECONDS", s_arg, 0.001, 3600, secs)) return BENCH_USAGE_ERROR;
    return -1;
}

int main(int argc, char **argv) {
    double secs = 1.0;
    int prc = parse_args(argc, argv, &secs);
    if (prc >= 0) return prc;
    char *msgs = convert_text(k_req, RECIPE_API_CHAT, RECIPE_API_MESSAGES);
    char *resp = convert_text(k_req, RECIPE_API_CHAT, RECIPE_API_RESPONSES);
    json_t *chat_tree = json_loads(k_req, 0, NULL);
    if (!msgs || !resp || !chat_tree) return 1;
    double w0 = wall(), c0 = now();
    printf("request: %zu bytes of Chat Completions JSON (Messages form %zu, Responses form %zu); figures are per "
           "CPU-second of one thread\n",
           strlen(k_req), strlen(msgs), strlen(resp));
    printf("one conversion = JSON text in -> canonical request -> JSON text out; median (best) of 5 runs\n");
    stat5 cm = rate5(k_req, RECIPE_API_CHAT, RECIPE_API_MESSAGES, secs);
    stat5 mc = rate5(msgs, RECIPE_API_MESSAGES, RECIPE_API_CHAT, secs);
    stat5 cr = rate5(k_req, RECIPE_API_CHAT, RECIPE_API_RESPONSES, secs);
    stat5 rc = rate5(resp, RECIPE_API_RESPONSES, RECIPE_API_CHAT, secs);
    printf("  chat -> messages   : %9.0f /s  %6.2f us  (best %.0f /s)\n", cm.median, 1e6 / cm.median, cm.best);
    printf("  messages -> chat   : %9.0f /s  %6.2f us  (best %.0f /s)\n", mc.median, 1e6 / mc.median, mc.best);
    printf("  chat -> responses  : %9.0f /s  %6.2f us  (best %.0f /s)\n", cr.median, 1e6 / cr.median, cr.best);
    printf("  responses -> chat  : %9.0f /s  %6.2f us  (best %.0f /s)\n", rc.median, 1e6 / rc.median, rc.best);
    double mean = 4.0 / (1 / cm.median + 1 / mc.median + 1 / cr.median + 1 / rc.median);
    double best = 4.0 / (1 / cm.best + 1 / mc.best + 1 / cr.best + 1 / rc.best);
    printf("  all four directions: %.0f conversions/s (best %.0f; target >= 200000)\n", mean, best);
    double tm = rate(k_req, NULL, RECIPE_API_CHAT, RECIPE_API_MESSAGES, IN_TEXT, OUT_TREE, secs);
    double tr = rate(k_req, NULL, RECIPE_API_CHAT, RECIPE_API_RESPONSES, IN_TEXT, OUT_TREE, secs);
    printf("  jansson tree out instead of text: chat -> messages %.0f /s, chat -> responses %.0f /s\n", tm, tr);
    double jm = rate(k_req, chat_tree, RECIPE_API_CHAT, RECIPE_API_MESSAGES, IN_TREE, OUT_TEXT, secs);
    printf("  jansson tree in (recipe_request_parse: serialize + parse), text out: chat -> messages %.0f /s\n", jm);
    printf("  for scale, jansson json_loads of the same Chat body alone: %.0f /s\n", loads_rate(k_req, secs));
    printf("output parser (hermes, 4-byte deltas): %.1f MB/s\n", parser_mbps(secs));
    printf("(CPU %.1f s over %.1f s wall: %.0f%% of one core was ours)\n", now() - c0, wall() - w0,
           100 * (now() - c0) / (wall() - w0));
    json_decref(chat_tree);
    free(msgs);
    free(resp);
    return 0;
}
