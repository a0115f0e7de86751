/* test_benchserve.c - the offline parts of `cinfer bench serve`: the SSE
 * parser (every split of a stream gives the same events; CRLF, CR, comments,
 * multi-line data), stream events of all four APIs including usage and
 * cached-token fields, request bodies, percentiles, trace parsing and the
 * prefix-hit bound (hand-made trace, then the real conversation trace: 37.4%
 * at 512-token blocks), trace replay content (shared hash ids -> identical
 * token and text prefixes, planned times = scaled timestamps), workload
 * determinism, conversation grouping and the conversations workload (turn k =
 * line k's own content, clamped think times, filters), and SVG escaping. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "benchserve/api.h"
#include "benchserve/conversations.h"
#include "benchserve/sse.h"
#include "benchserve/stats.h"
#include "benchserve/svg.h"
#include "benchserve/textgen.h"
#include "benchserve/trace.h"
#include "benchserve/workload.h"
#include "testutil.h"

typedef struct collected {
    bs_buf log;
    int n;
} collected;

static int collect(void *arg, const char *event, const char *data, size_t len) {
    collected *c = arg;
    c->n++;
    bs_buf_printf(&c->log, "[%s|%.*s]", event, (int)len, data);
    return 0;
}

static void test_sse(void) {
    const char *stream = ": comment\r\ndata: {\"a\":1}\r\n\r\nevent: message_start\ndata: x\ndata:y\n\n"
                         "event: only-name\n\ndata: [DONE]\r\rdata:  two spaces\nid: 7\n\n";
    const char *want = "[|{\"a\":1}][message_start|x\ny][|[DONE]][| two spaces]";
    size_t n = strlen(stream);
    for (size_t split = 0; split <= n; split++) {
        bs_sse s = {0};
        collected c = {0};
        CHECK(bs_sse_feed(&s, stream, split, collect, &c) == 0);
        CHECK(bs_sse_feed(&s, stream + split, n - split, collect, &c) == 0);
        CHECKF(!strcmp(bs_buf_str(&c.log), want), "split %zu: %s", split, bs_buf_str(&c.log));
        bs_sse_free(&s);
        bs_buf_free(&c.log);
    }
    /* byte by byte */
    bs_sse s = {0};
    collected c = {0};
    for (size_t i = 0; i < n; i++) bs_sse_feed(&s, stream + i, 1, collect, &c);
    CHECK(!strcmp(bs_buf_str(&c.log), want));
    CHECK(c.n == 4);
    bs_sse_free(&s);
    bs_buf_free(&c.log);
}

static int feed_events(bs_stream *st, const char *const *ev, size_t n) {
    int tokens = 0;
    for (size_t i = 0; i < n; i += 2) {
        int r = bs_stream_event(st, ev[i], ev[i + 1], strlen(ev[i + 1]));
        if (r > 0) tokens += r;
        if (r < 0) return -1;
    }
    return tokens;
}

static void test_streams(void) {
    const char *chat[] = {
        "",
        "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],\"usage\":null}",
        "",
        "{\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"hm\"}}]}",
        "",
        "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}",
        "",
        "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"}}]}",
        "",
        ("{\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":3,"
         "\"prompt_tokens_details\":{\"cached_tokens\":32}}}"),
        "",
        "[DONE]"};
    bs_stream st = {.api = BS_API_CHAT};
    CHECK(feed_events(&st, chat, 12) == 3);
    CHECK(st.finished && st.have_usage && !st.failed);
    CHECK(st.prompt_tokens == 40 && st.cached_tokens == 32 && st.output_tokens == 3);
    CHECK(!strcmp(bs_buf_str(&st.text), "Hello"));
    bs_stream_free(&st);

    const char *comp[] = {"", "{\"choices\":[{\"text\":\"a\"}]}",
                          "", "{\"choices\":[{\"text\":\"b\"}]}",
                          "", "{\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}",
                          "", "[DONE]"};
    st = (bs_stream){.api = BS_API_COMPLETIONS};
    CHECK(feed_events(&st, comp, 8) == 2);
    CHECK(st.finished && st.prompt_tokens == 5 && st.cached_tokens == 0 && st.output_tokens == 2);
    bs_stream_free(&st);

    const char *msgs[] = {
        "message_start",
        ("{\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":8,\"output_tokens\":1,"
         "\"cache_read_input_tokens\":48,\"cache_creation_input_tokens\":0}}}"),
        "content_block_start",
        "{\"type\":\"content_block_start\",\"index\":0}",
        "content_block_delta",
        "{\"type\":\"content_block_delta\",\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"t\"}}",
        "content_block_delta",
        "{\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}",
        "message_delta",
        "{\"type\":\"message_delta\",\"usage\":{\"output_tokens\":4}}",
        "message_stop",
        "{\"type\":\"message_stop\"}"};
    st = (bs_stream){.api = BS_API_MESSAGES};
    CHECK(feed_events(&st, msgs, 12) == 2);
    CHECK(st.finished && st.prompt_tokens == 56 && st.cached_tokens == 48 && st.output_tokens == 4);
    CHECK(!strcmp(bs_buf_str(&st.text), "Hi"));
    bs_stream_free(&st);

    const char *resp[] = {"response.created",
                          "{\"type\":\"response.created\"}",
                          "response.output_text.delta",
                          "{\"type\":\"response.output_text.delta\",\"delta\":\"ok\"}",
                          "response.completed",
                          ("{\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":20,"
                           "\"input_tokens_details\":{\"cached_tokens\":16},\"output_tokens\":1}}}")};
    st = (bs_stream){.api = BS_API_RESPONSES};
    CHECK(feed_events(&st, resp, 6) == 1);
    CHECK(st.finished && st.prompt_tokens == 20 && st.cached_tokens == 16 && st.output_tokens == 1);
    bs_stream_free(&st);

    st = (bs_stream){.api = BS_API_CHAT};
    const char *bad = "{\"error\":{\"message\":\"boom\"}}";
    CHECK(bs_stream_event(&st, "", bad, strlen(bad)) == -1 && st.failed && strstr(st.error, "boom"));
    CHECK(bs_stream_event(&st, "", "{not json", 9) == -1);
    bs_stream_free(&st);
}

static void test_bodies(void) {
    const char *m[] = {"hi", "", "more"};
    bs_prompt p = {.system = "sys", .msgs = m, .n_msgs = 3};
    bs_gen_opts g = {.model = "x", .max_tokens = 7, .temperature = -1};
    for (int a = 0; a < 4; a++) {
        bs_buf b = {0};
        CHECK(bs_api_body((bs_api)a, &p, &g, &b) == 0);
        json_t *o = json_loads(bs_buf_str(&b), 0, NULL);
        CHECKF(json_is_object(o), "api %d body %s", a, bs_buf_str(&b));
        CHECK(json_is_true(json_object_get(o, "stream")));
        CHECK(json_integer_value(json_object_get(o, a == BS_API_RESPONSES ? "max_output_tokens" : "max_tokens")) == 7);
        CHECK(!json_object_get(o, "temperature"));
        if (a == BS_API_CHAT) {
            CHECK(json_array_size(json_object_get(o, "messages")) == 4);
            CHECK(json_is_true(json_object_get(json_object_get(o, "stream_options"), "include_usage")));
        }
        if (a == BS_API_COMPLETIONS)
            CHECK(!strcmp(json_string_value(json_object_get(o, "prompt")), "sys\nhi\n\nmore\n"));
        if (a == BS_API_MESSAGES) {
            CHECK(!strcmp(json_string_value(json_object_get(o, "system")), "sys"));
            json_t *asst = json_array_get(json_object_get(o, "messages"), 1);
            CHECK(!strcmp(json_string_value(json_object_get(asst, "role")), "assistant"));
            CHECK(!strcmp(json_string_value(json_object_get(asst, "content")), " "));
        }
        json_decref(o);
        bs_buf_free(&b);
    }
    int32_t ids[] = {5, 6, 7};
    bs_prompt q = {.ids = ids, .n_ids = 3};
    bs_buf b = {0};
    CHECK(bs_api_body(BS_API_COMPLETIONS, &q, &g, &b) == 0);
    CHECK(strstr(bs_buf_str(&b), "\"prompt\":[5,6,7]") != NULL);
    bs_buf_free(&b);
}

static void test_stats(void) {
    double v[] = {5, 1, 4, 2, 3};
    bs_summary s = bs_summarize(v, 5);
    CHECK(s.n == 5 && s.mean == 3 && s.p50 == 3 && s.min == 1 && s.max == 5);
    CHECK(fabs(s.p90 - 4.6) < 1e-12 && fabs(s.p99 - 4.96) < 1e-12);
    bs_summary e = bs_summarize(NULL, 0);
    CHECK(e.n == 0 && e.p99 == 0);
}

static const char *write_tmp(const char *tag, const char *text) {
    static char path[256];
    temp_path(path, sizeof path, tag);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

static void test_trace(void) {
    /* r0: blocks A B (1000 tokens); r1: A B C; r2: A D; r3: X B (B alone does not hit: not a prefix chain) */
    const char *t = "{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 10, \"hash_ids\": [1, 2]}\n"
                    "{\"timestamp\": 500, \"input_length\": 1300, \"output_length\": 20, \"hash_ids\": [1, 2, 3]}\n"
                    "\n"
                    "{\"timestamp\": 1500, \"input_length\": 600, \"output_length\": 30, \"hash_ids\": [1, 4]}\n"
                    "{\"timestamp\": 2000, \"input_length\": 1024, \"output_length\": 40, \"hash_ids\": [9, 2]}\n";
    bs_trace tr;
    cf_err err;
    CHECK(bs_trace_load(write_tmp("trace", t), 0, &tr, &err) == 0);
    CHECK(tr.n == 4 && tr.reqs[1].n_hash == 3 && tr.reqs[1].hash[2] == 3 && tr.reqs[3].t_ms == 2000);
    bs_trace_stats s;
    CHECK(bs_trace_stats_compute(&tr, 512, &s, &err) == 0);
    CHECK(s.input_tokens == 1000 + 1300 + 600 + 1024 && s.output_tokens == 100);
    CHECK(s.hit_tokens == 1024 + 512); /* r1 hits A B, r2 hits A, r3 nothing */
    CHECK(s.blocks == 9 && s.unique_blocks == 5 && s.duration_s == 2.0);
    CHECK(bs_trace_scaled_input(&tr.reqs[0], 32) == 63 && bs_trace_scaled_input(&tr.reqs[3], 32) == 64);
    bs_trace_free(&tr);
    CHECK(bs_trace_load(write_tmp("trace1", t), 2, &tr, &err) == 0 && tr.n == 2);
    bs_trace_free(&tr);

    const char *bad[] = {"{\"timestamp\": 0}\n",
                         "not json\n",
                         "{\"timestamp\": 0, \"input_length\": 2000, \"output_length\": 1, \"hash_ids\": [1]}\n",
                         ("{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n"
                          "{\"timestamp\": 4, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n"),
                         "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [-1]}\n",
                         ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = 0;
        CHECKF(bs_trace_load(write_tmp("bad", bad[i]), 0, &tr, &err) == -1 && err.msg[0], "bad trace %zu", i);
    }
    CHECK(bs_trace_load("/nonexistent/trace.jsonl", 0, &tr, &err) == -1);

    CHECK(bs_trace_load(shared_path("traces/mooncake_conversation_trace.jsonl"), 0, &tr, &err) == 0);
    CHECK(bs_trace_stats_compute(&tr, 512, &s, &err) == 0);
    CHECK(s.requests == 12031);
    CHECKF(fabs(100 * s.hit_ratio - 37.4) < 0.05, "bound %.3f%%", 100 * s.hit_ratio);
    bs_trace_free(&tr);
}

/* Requests sharing leading hash ids share exactly that many leading blocks of content. */
static void test_trace_replay(void) {
    const char *t = "{\"timestamp\": 100, \"input_length\": 1500, \"output_length\": 10, \"hash_ids\": [7, 8, 9]}\n"
                    "{\"timestamp\": 300, \"input_length\": 1100, \"output_length\": 900, \"hash_ids\": [7, 8, 5]}\n"
                    "{\"timestamp\": 1100, \"input_length\": 100, \"output_length\": 20, \"hash_ids\": [7]}\n";
    const char *path = write_tmp("replay", t);
    for (int ids = 0; ids < 2; ids++) {
        bs_wl_opts o = {.kind = BS_WL_TRACE,
                        .seed = 1,
                        .trace_path = path,
                        .block = 16,
                        .time_scale = 2,
                        .max_output = 100,
                        .token_ids = ids,
                        .tok_lo = 3,
                        .tok_hi = 500};
        bs_workload w;
        cf_err err;
        CHECK(bs_workload_build(&o, &w, &err) == 0);
        CHECK(w.n == 3 && w.s[0].arrival == 0 && fabs(w.s[1].arrival - 0.1) < 1e-12 &&
              fabs(w.s[2].arrival - 0.5) < 1e-12);
        CHECK(w.s[0].max_tokens[0] == 10 && w.s[1].max_tokens[0] == 100);
        for (size_t i = 0; i < 3; i++) CHECK(bs_workload_begin_turn(&w, i, &err) == 0);
        if (ids) {
            CHECK(w.s[0].n_ids == 47 && w.s[1].n_ids == 35 && w.s[2].n_ids == 4);
            CHECK(!memcmp(w.s[0].ids, w.s[1].ids, 32 * sizeof(int32_t)));
            CHECK(memcmp(w.s[0].ids + 32, w.s[1].ids + 32, 3 * sizeof(int32_t)) != 0);
            CHECK(!memcmp(w.s[0].ids, w.s[2].ids, 4 * sizeof(int32_t)));
            for (size_t k = 0; k < w.s[0].n_ids; k++) CHECK(w.s[0].ids[k] >= 3 && w.s[0].ids[k] < 500);
        } else {
            const char *a = bs_buf_str(&w.s[0].msgs[0]), *b = bs_buf_str(&w.s[1].msgs[0]);
            bs_buf two = {0};
            textgen_block_text(&two, 7, 16);
            textgen_block_text(&two, 8, 16);
            CHECK(!strncmp(a, two.p, two.len) && !strncmp(b, two.p, two.len));
            CHECK(strcmp(a + two.len, b + two.len) != 0);
            size_t words = 0;
            for (const char *p = a; *p; p++) words += *p == ' ';
            CHECK(words == 47);
            bs_buf_free(&two);
        }
        bs_workload_free(&w);
    }
}

static void test_workloads(void) {
    for (int kind = BS_WL_SYNTHETIC; kind <= BS_WL_AGENT; kind++) {
        bs_wl_opts o = {.kind = (bs_wl_kind)kind,
                        .seed = 42,
                        .requests = 5,
                        .input_len = 40,
                        .output_len = 8,
                        .uniform = 1,
                        .sessions = 3,
                        .turns = 3,
                        .system_len = 30,
                        .user_len = 5,
                        .tool_len = 10,
                        .think_s = 1,
                        .rate = 10};
        bs_workload a, b;
        cf_err err;
        CHECK(bs_workload_build(&o, &a, &err) == 0 && bs_workload_build(&o, &b, &err) == 0);
        CHECK(a.n == (kind <= BS_WL_CODE ? 5u : 3u));
        for (size_t i = 0; i < a.n; i++) {
            CHECK(a.s[i].arrival == b.s[i].arrival && (i == 0 || a.s[i].arrival > a.s[i - 1].arrival));
            for (long k = 0; k < a.s[i].n_turns; k++) {
                CHECK(bs_workload_begin_turn(&a, i, &err) == 0 && bs_workload_begin_turn(&b, i, &err) == 0);
                CHECK(a.s[i].max_tokens[k] >= 4 && a.s[i].max_tokens[k] <= 12);
                CHECK(a.s[i].think[k] == b.s[i].think[k]);
                if (kind == BS_WL_AGENT && k) CHECK(a.s[i].think[k] >= 0.5 && a.s[i].think[k] < 1.5);
                const bs_buf *ma = &a.s[i].msgs[a.s[i].n_msgs - 1], *mb = &b.s[i].msgs[b.s[i].n_msgs - 1];
                CHECK(ma->len > 0 && !strcmp(bs_buf_str(ma), bs_buf_str(mb)));
                if (k + 1 < a.s[i].n_turns) {
                    bs_workload_add_answer(&a, i, "ans", &err);
                    bs_workload_add_answer(&b, i, "ans", &err);
                }
            }
            CHECK(bs_workload_begin_turn(&a, i, &err) == -1);
            if (kind >= BS_WL_CHAT) CHECK(!strcmp(bs_buf_str(&a.s[i].system), bs_buf_str(&a.s[0].system)));
        }
        if (kind >= BS_WL_CHAT) {
            const char **scratch = NULL;
            size_t cap = 0;
            bs_prompt p = bs_workload_prompt(&a, 1, &scratch, &cap);
            CHECK(p.n_msgs == 5 && p.system && !strcmp(p.msgs[1], "ans"));
            if (kind == BS_WL_AGENT) CHECK(!strncmp(p.msgs[2], "Tool result:", 12));
            free(scratch);
        }
        bs_workload_free(&a);
        bs_workload_free(&b);
    }
}

/* Synthetic prompts with a shared prefix: the first share x length token ids of a request are one
 * of the pool's prefixes (both pool entries drawn among 12 requests, each drawn more than once), the
 * rest its own; bad combinations are refused. */
static void test_shared_prefix(void) {
    bs_wl_opts o = {.kind = BS_WL_SYNTHETIC,
                    .seed = 7,
                    .requests = 12,
                    .input_len = 64,
                    .output_len = 4,
                    .prefix_share = 0.5,
                    .prefix_pool = 2,
                    .token_ids = 1,
                    .tok_lo = 3,
                    .tok_hi = 30000};
    bs_workload w;
    cf_err err;
    CHECK(bs_workload_build(&o, &w, &err) == 0);
    int32_t first[2][32];
    int seen[2] = {0, 0}, rests_equal = 0;
    for (size_t i = 0; i < w.n; i++) {
        CHECK(bs_workload_begin_turn(&w, i, &err) == 0 && w.s[i].n_ids == 64);
        int p = 0; /* the prefix seen before that this one equals, else a new one */
        while (p < 2 && seen[p] && memcmp(w.s[i].ids, first[p], sizeof first[p])) p++;
        CHECK(p < 2);
        if (p == 2) break;
        if (!seen[p]) memcpy(first[p], w.s[i].ids, sizeof first[p]);
        CHECK(!memcmp(w.s[i].ids, first[p], sizeof first[p])); /* one of at most two prefixes */
        seen[p]++;
        if (i > 0 && !memcmp(w.s[i].ids + 32, w.s[0].ids + 32, 32 * sizeof(int32_t))) rests_equal++;
    }
    CHECK(seen[0] >= 2 && seen[1] >= 2 && memcmp(first[0], first[1], sizeof first[0]));
    CHECK(rests_equal == 0);
    bs_workload_free(&w);
    bs_wl_opts bad = o;
    bad.prefix_pool = 0;
    CHECK(bs_workload_build(&bad, &w, &err) == -1 && strstr(err.msg, "both"));
    bad = o;
    bad.prefix_share = 1.5;
    CHECK(bs_workload_build(&bad, &w, &err) == -1 && strstr(err.msg, "[0, 1]"));
    bad = o;
    bad.kind = BS_WL_CHAT;
    bad.sessions = bad.turns = 1;
    CHECK(bs_workload_build(&bad, &w, &err) == -1 && strstr(err.msg, "synthetic workload only"));
}

static void test_svg_escape(void) {
    bs_buf b = {0};
    svg_escape(&b, "a<b>&\"c'\x01");
    CHECK(!strcmp(bs_buf_str(&b), "a&lt;b&gt;&amp;&quot;c&apos; "));
    bs_buf_free(&b);
}

/* Lines continue the earlier line sharing their longest proper prefix of >= 2 hash ids. */
static void test_conversations(void) {
    const char *t = "{\"timestamp\": 0, \"input_length\": 1200, \"output_length\": 10, \"hash_ids\": [0, 1, 2]}\n"
                    "{\"timestamp\": 1000, \"input_length\": 2000, \"output_length\": 20, \"hash_ids\": [0, 1, 2, 3]}\n"
                    "{\"timestamp\": 2000, \"input_length\": 600, \"output_length\": 30, \"hash_ids\": [0, 5]}\n"
                    "{\"timestamp\": 3000, \"input_length\": 1100, \"output_length\": 40, \"hash_ids\": [0, 1, 9]}\n"
                    "{\"timestamp\": 4000, \"input_length\": 1100, \"output_length\": 50, \"hash_ids\": [0, 5, 6]}\n"
                    "{\"timestamp\": 5000, \"input_length\": 2000, \"output_length\": 60, \"hash_ids\": [0, 1, 2, 3]}\n"
                    "{\"timestamp\": 6000, \"input_length\": 900, \"output_length\": 70, \"hash_ids\": [7, 8]}\n";
    const char *path = write_tmp("convs", t);
    bs_trace tr;
    cf_err err;
    CHECK(bs_trace_load(path, 0, &tr, &err) == 0);
    bs_convs c;
    bs_conv_opts o = {.min_turns = 1, .block = 512};
    CHECK(bs_conv_group(&tr, &o, &c, &err) == 0);
    /* [0,1,3,5] (5 shares [0,1,2] with 0: a full match with 1 is not needed), [2,4] ([0,5] alone), [6] */
    size_t want[] = {0, 1, 3, 5, 2, 4, 6}, want_first[] = {0, 4, 6, 7};
    CHECK(c.n == 3 && c.qualified == 3);
    for (size_t i = 0; i < 7 && c.n == 3; i++) CHECKF(c.lines[i] == want[i], "line %zu: %zu", i, c.lines[i]);
    for (size_t i = 0; i < 4 && c.n == 3; i++) CHECK(c.first[i] == want_first[i]);
    bs_convs_free(&c);
    o = (bs_conv_opts){.min_turns = 2, .max_turns = 3, .block = 512, .limit = 1};
    CHECK(bs_conv_group(&tr, &o, &c, &err) == 0 && c.n == 1 && c.qualified == 2 && c.first[1] == 3);
    bs_convs_free(&c);
    /* line 1 (2000 tokens) does not fit 1500: the first conversation is left out */
    o = (bs_conv_opts){.min_turns = 2, .block = 512, .max_context = 1500, .max_output = 8};
    CHECK(bs_conv_group(&tr, &o, &c, &err) == 0 && c.n == 1 && c.lines[0] == 2 && c.lines[1] == 4);
    bs_convs_free(&c);
    o.min_turns = 0;
    CHECK(bs_conv_group(&tr, &o, &c, &err) == -1);
    bs_trace_free(&tr);

    bs_wl_opts wo = {.kind = BS_WL_CONVERSATIONS,
                     .trace_path = path,
                     .block = 16,
                     .time_scale = 10,
                     .min_turns = 2,
                     .think_min = 0.15,
                     .think_max = 0.25,
                     .max_output = 45,
                     .token_ids = 1,
                     .tok_lo = 3,
                     .tok_hi = 500};
    bs_workload w;
    CHECK(bs_workload_build(&wo, &w, &err) == 0);
    CHECK(w.n == 2 && w.s[0].n_turns == 4 && w.s[1].n_turns == 2);
    CHECK(w.s[0].think[1] == 0.15 && w.s[0].think[2] == 0.2 && w.s[0].think[3] == 0.2 && w.s[1].think[1] == 0.2);
    CHECK(w.s[0].max_tokens[0] == 10 && w.s[0].max_tokens[3] == 45 && w.s[1].max_tokens[1] == 45);
    const char **scratch = NULL;
    size_t cap = 0;
    for (long k = 0; k < w.s[0].n_turns; k++) {
        CHECK(bs_workload_begin_turn(&w, 0, &err) == 0);
        const bs_trace_req *r = &w.trace.reqs[w.s[0].lines[k]];
        bs_prompt p = bs_workload_prompt(&w, 0, &scratch, &cap);
        CHECKF(w.s[0].trace_line == (long)want[k] && (long)p.n_ids == bs_trace_scaled_input(r, 16),
               "turn %ld: line %ld, %zu ids", k, w.s[0].trace_line, p.n_ids);
        int32_t ids[16];
        textgen_block_ids(ids, r->hash[0], 16, 3, 500);
        CHECK(p.ids && !memcmp(p.ids, ids, sizeof ids));
        CHECK(bs_workload_add_answer(&w, 0, "not part of the next prompt", &err) == 0 && w.s[0].n_msgs == 0);
    }
    CHECK(bs_workload_begin_turn(&w, 0, &err) == -1);
    free(scratch);
    bs_workload_free(&w);
    wo.rate = 1;
    CHECK(bs_workload_build(&wo, &w, &err) == -1);
    wo.rate = 0;
    wo.think_max = 0.1;
    CHECK(bs_workload_build(&wo, &w, &err) == -1);
    wo.think_max = 1;
    wo.min_turns = 5;
    CHECK(bs_workload_build(&wo, &w, &err) == -1 && strstr(err.msg, "no conversation"));
}

int main(void) {
    test_sse();
    test_streams();
    test_bodies();
    test_stats();
    test_trace();
    test_trace_replay();
    test_workloads();
    test_shared_prefix();
    test_conversations();
    test_svg_escape();
    return test_finish();
}
