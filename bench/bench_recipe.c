/* bench_recipe.c - protocol conversions per second on one core: a ~2 KB Chat
 * Completions request (system prompt, a few turns, a tool call and its result,
 * two tool definitions, sampling options) converted to Anthropic Messages and to
 * OpenAI Responses and back. One "conversion" = parse the source JSON tree into
 * the canonical request + encode the target JSON tree (what the server does once
 * per request, after its JSON parse). Also reported: the same with text in/out
 * (json_loads + convert + json_dumps), and the output parser's throughput.
 * Usage: bench_recipe [seconds per measurement, default 1]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cinfer/recipe.h"

static const char k_req[] =
    "{\"model\":\"cinfer-default\",\"messages\":["
    "{\"role\":\"system\",\"content\":\"You are a careful assistant. Answer concisely, cite tool results, and never invent "
    "data. When a tool is needed, call it with precise arguments. Prefer metric units and ISO dates.\"},"
    "{\"role\":\"user\",\"content\":\"I am planning a trip to Paris next week. What will the weather be like, and what time "
    "is it there right now? Also suggest two museums that are open late on Wednesdays.\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_0001\",\"type\":\"function\",\"function\":"
    "{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\",\\\"days\\\":7,\\\"unit\\\":\\\"celsius\\\"}\"}},"
    "{\"id\":\"call_0002\",\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"arguments\":\"{\\\"tz\\\":\\\"Europe/Paris\\\"}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"call_0001\",\"content\":\"Mon 14/9 C light rain; Tue 16/10 C cloudy; Wed 18/11 C sunny; "
    "Thu 17/12 C showers; Fri 15/9 C windy; Sat 19/12 C sunny; Sun 20/13 C sunny\"},"
    "{\"role\":\"tool\",\"tool_call_id\":\"call_0002\",\"content\":\"2026-11-29T11:42:00+01:00\"},"
    "{\"role\":\"assistant\",\"content\":\"Expect mild, mostly dry weather (9-20 C) with rain early in the week. It is 11:42 in "
    "Paris now. The Louvre and the Musee d'Orsay are both open late on Wednesdays... wait, let me double check Orsay.\"},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Please double check and also tell me which of them is "
    "closer to the Eiffel Tower, with walking times.\"}]}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather forecast for a city\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\",\"minimum\":1,"
    "\"maximum\":14},\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]}},\"required\":[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"description\":\"Current local time in a time zone\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"tz\":{\"type\":\"string\"}},\"required\":[\"tz\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"opening_hours\",\"description\":\"Opening hours of a venue\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"venue\":{\"type\":\"string\"},\"day\":{\"type\":\"string\"}},"
    "\"required\":[\"venue\"]}}}],"
    "\"tool_choice\":\"auto\",\"temperature\":0.6,\"top_p\":0.95,\"max_completion_tokens\":1024,\"stop\":[\"</answer>\"],"
    "\"seed\":1234,\"stream\":true,\"stream_options\":{\"include_usage\":true},\"user\":\"user-42\"}";

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* chat -> target -> chat, tree in / tree out; returns conversions per second (2 per round) */
static double tree_rate(json_t *src, recipe_api target, double secs) {
    recipe_request a, b;
    recipe_request_init(&a);
    recipe_request_init(&b);
    long rounds = 0;
    double t0 = now(), t;
    do {
        for (int i = 0; i < 256; i++) {
            if (recipe_request_parse(RECIPE_API_CHAT, src, &a, NULL)) abort();
            json_t *o = recipe_request_encode(target, &a, NULL);
            if (!o || recipe_request_parse(target, o, &b, NULL)) abort();
            json_t *back = recipe_request_encode(RECIPE_API_CHAT, &b, NULL);
            if (!back) abort();
            recipe_request_reset(&b); /* drops its reference to o */
            json_decref(o);
            json_decref(back);
        }
        rounds += 256;
        t = now() - t0;
    } while (t < secs);
    recipe_request_free(&a);
    recipe_request_free(&b);
    return 2.0 * (double)rounds / t;
}

static double text_rate(recipe_api target, double secs) {
    recipe_request a;
    recipe_request_init(&a);
    long rounds = 0;
    double t0 = now(), t;
    do {
        for (int i = 0; i < 64; i++) {
            json_t *src = json_loads(k_req, 0, NULL);
            if (!src || recipe_request_parse(RECIPE_API_CHAT, src, &a, NULL)) abort();
            json_t *o = recipe_request_encode(target, &a, NULL);
            char *s = json_dumps(o, JSON_COMPACT);
            if (!s) abort();
            free(s);
            json_decref(o);
            recipe_request_reset(&a);
            json_decref(src);
        }
        rounds += 64;
        t = now() - t0;
    } while (t < secs);
    recipe_request_free(&a);
    return (double)rounds / t;
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
        for (size_t off = 0; off < len; off += 4) recipe_parser_feed(p, out + off, len - off < 4 ? len - off : 4, &ev, &n);
        recipe_parser_finish(p, &ev, &n);
        recipe_parser_free(p);
        bytes += len;
        t = now() - t0;
    } while (t < secs);
    return (double)bytes / t / 1e6;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    json_t *src = json_loads(k_req, 0, NULL);
    if (!src) return 1;
    printf("request: %zu bytes of Chat Completions JSON\n", strlen(k_req));
    double m = tree_rate(src, RECIPE_API_MESSAGES, secs), r = tree_rate(src, RECIPE_API_RESPONSES, secs);
    printf("chat -> messages -> chat:   %9.0f conversions/s (%.2f us each; target >= 200k/s)\n", m, 1e6 / m);
    printf("chat -> responses -> chat:  %9.0f conversions/s (%.2f us each; target >= 200k/s)\n", r, 1e6 / r);
    printf("text in/out (json_loads + chat->messages + json_dumps): %9.0f requests/s\n", text_rate(RECIPE_API_MESSAGES, secs));
    printf("text in/out (json_loads + chat->responses + json_dumps): %9.0f requests/s\n", text_rate(RECIPE_API_RESPONSES, secs));
    printf("output parser (hermes, 4-byte deltas): %.1f MB/s\n", parser_mbps(secs));
    json_decref(src);
    return 0;
}
