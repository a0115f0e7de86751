/* test_serve_traffic.c - serve/traffic.c: class names, the cinfer.traffic_class
 * field (types, unknown values -> 400 naming the param), the header,
 * precedence field > header > key > default, the API key table (KEY:class
 * only when the suffix is a class, --api-key-class, duplicates, matching),
 * the field through api_job_parse (Chat) / api_completion_parse, and the store metrics block
 * and engine phase seconds in the Prometheus text. */
#include <stdlib.h>
#include <string.h>

#include "cinfer/engine.h"
#include "serve/api.h"
#include "serve/metrics.h"
#include "serve/traffic.h"
#include "testutil.h"

static int field(const char *body, int *cls, serve_error *e) {
    memset(e, 0, sizeof *e);
    json_t *o = json_loads(body, 0, NULL);
    CHECK(o != NULL);
    int r = traffic_class_from_json(o, cls, e);
    json_decref(o);
    return r;
}

static void test_classes(void) {
    CHECK(traffic_class_from_text("agent") == CINFER_TRAFFIC_AGENT);
    CHECK(traffic_class_from_text("CHAT") == CINFER_TRAFFIC_CHAT);
    CHECK(traffic_class_from_text("default") == CINFER_TRAFFIC_DEFAULT);
    CHECK(traffic_class_from_text("2") == CINFER_TRAFFIC_AGENT);
    CHECK(traffic_class_from_text("3") == -1);
    CHECK(traffic_class_from_text("") == -1);
    CHECK(traffic_class_from_text("weekly") == -1);
    int c;
    serve_error e;
    CHECK(field("{}", &c, &e) == 0 && c == TRAFFIC_UNSET);
    CHECK(field("{\"cinfer\":null}", &c, &e) == 0 && c == TRAFFIC_UNSET);
    CHECK(field("{\"cinfer\":{}}", &c, &e) == 0 && c == TRAFFIC_UNSET);
    CHECK(field("{\"cinfer\":{\"traffic_class\":\"agent\"}}", &c, &e) == 0 && c == CINFER_TRAFFIC_AGENT);
    CHECK(field("{\"cinfer\":{\"traffic_class\":1}}", &c, &e) == 0 && c == CINFER_TRAFFIC_CHAT);
    CHECK(field("{\"cinfer\":{\"traffic_class\":\"weekly\"}}", &c, &e) == -1);
    CHECK(e.status == 400 && !strcmp(e.param, "cinfer.traffic_class") && strstr(e.message, "weekly"));
    CHECK(field("{\"cinfer\":{\"traffic_class\":7}}", &c, &e) == -1 && e.status == 400);
    CHECK(field("{\"cinfer\":{\"traffic_class\":[1]}}", &c, &e) == -1 && e.status == 400);
    CHECK(field("{\"cinfer\":\"agent\"}", &c, &e) == -1 && !strcmp(e.param, "cinfer"));
    memset(&e, 0, sizeof e);
    CHECK(traffic_class_from_header(NULL, &c, &e) == 0 && c == TRAFFIC_UNSET);
    CHECK(traffic_class_from_header("Chat", &c, &e) == 0 && c == CINFER_TRAFFIC_CHAT);
    CHECK(traffic_class_from_header("nope", &c, &e) == -1 && e.status == 400);
    CHECK(traffic_class_resolve(TRAFFIC_UNSET, TRAFFIC_UNSET, TRAFFIC_UNSET) == CINFER_TRAFFIC_DEFAULT);
    CHECK(traffic_class_resolve(TRAFFIC_UNSET, TRAFFIC_UNSET, CINFER_TRAFFIC_AGENT) == CINFER_TRAFFIC_AGENT);
    CHECK(traffic_class_resolve(TRAFFIC_UNSET, CINFER_TRAFFIC_CHAT, CINFER_TRAFFIC_AGENT) == CINFER_TRAFFIC_CHAT);
    CHECK(traffic_class_resolve(CINFER_TRAFFIC_DEFAULT, CINFER_TRAFFIC_CHAT, CINFER_TRAFFIC_AGENT) ==
          CINFER_TRAFFIC_DEFAULT);
}

static void test_keys(void) {
    traffic_keys t = {0};
    char m[160];
    CHECK(traffic_keys_add(&t, "k1:agent", m, sizeof m) == 0);
    CHECK(traffic_keys_add(&t, "sk:abc", m, sizeof m) == 0); /* not a class: part of the key */
    CHECK(traffic_keys_add(&t, "plain", m, sizeof m) == 0);
    CHECK(traffic_keys_set_class(&t, "k2=chat", m, sizeof m) == 0);
    CHECK(traffic_keys_set_class(&t, "plain=default", m, sizeof m) == 0);
    CHECK(traffic_keys_add(&t, "plain", m, sizeof m) == 0); /* again: keeps its class */
    CHECK(t.n == 4);
    CHECK(traffic_keys_add(&t, ":agent", m, sizeof m) == -1);
    CHECK(traffic_keys_set_class(&t, "k3=weekly", m, sizeof m) == -1 && strstr(m, "weekly"));
    CHECK(traffic_keys_set_class(&t, "k3", m, sizeof m) == -1);
    int c;
    CHECK(traffic_keys_match(&t, "k1", &c) && c == CINFER_TRAFFIC_AGENT);
    CHECK(!traffic_keys_match(&t, "k1:agent", &c) && c == TRAFFIC_UNSET);
    CHECK(traffic_keys_match(&t, "sk:abc", &c) && c == TRAFFIC_UNSET);
    CHECK(traffic_keys_match(&t, "k2", &c) && c == CINFER_TRAFFIC_CHAT);
    CHECK(traffic_keys_match(&t, "plain", &c) && c == CINFER_TRAFFIC_DEFAULT);
    CHECK(!traffic_keys_match(&t, "plai", &c) && !traffic_keys_match(&t, "plainx", &c) &&
          !traffic_keys_match(&t, "", &c));
    traffic_keys_free(&t);
    CHECK(t.n == 0 && !t.keys);
}

static void test_request_field(void) {
    static const struct { int32_t n_vocab, max_n; } lim = {.n_vocab = 512, .max_n = 8};
    gen_params p;
    serve_error e = {0};
    const char *b = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"cinfer\":{\"traffic_class\":\"chat\"}}";
    api_job a;
    memset(&a, 0, sizeof a);
    api_ctx ctx = {.max_n = lim.max_n, .n_vocab = lim.n_vocab};
    CHECK(api_job_parse(&a, RECIPE_API_CHAT, b, strlen(b), &ctx, &p, &e) == 0 &&
          p.traffic_class == CINFER_TRAFFIC_CHAT);
    api_job_free(&a);
    gen_params_free(&p);
    b = "{\"prompt\":\"hi\"}";
    CHECK(api_completion_parse(&a, b, strlen(b), &ctx, &p, &e) == 0 && p.traffic_class == TRAFFIC_UNSET);
    api_job_free(&a);
    gen_params_free(&p);
    b = "{\"prompt\":\"hi\",\"cinfer\":{\"traffic_class\":\"x\"}}";
    CHECK(api_completion_parse(&a, b, strlen(b), &ctx, &p, &e) == -1 && e.status == 400 &&
          !strcmp(e.param, "cinfer.traffic_class"));
    api_job_free(&a);
}

static void test_store_metrics(void) {
    metrics m;
    metrics_init(&m);
    cinfer_engine_stats st = {0};
    st.cached_tokens_memory = 32;
    st.cached_tokens_store = 1984;
    st.store.enabled = true;
    st.store.quarantined = 3;
    st.store.gc_deleted_lru = 5;
    st.store.load_latency[0] = 1;
    st.store.load_latency[3] = 2;
    st.store.load_latency[11] = 1;
    st.store.loads = 4;
    st.t_forward = 1.5;
    st.t_output = 0.25;
    m.model_name = "m";
    char *txt;
    size_t len;
    CHECK(metrics_render(&m, &st, NULL, &txt, &len) == 0);
    CHECK(strstr(txt, "cinfer_cached_tokens_by_tier_total{model_name=\"m\",tier=\"memory\"} 32\n"));
    CHECK(strstr(txt, "cinfer_cached_tokens_by_tier_total{model_name=\"m\",tier=\"store\"} 1984\n"));
    CHECK(strstr(txt, "cinfer_kv_store_quarantined_total{model_name=\"m\"} 3\n"));
    CHECK(strstr(txt, "cinfer_kv_store_gc_deleted_total{model_name=\"m\",reason=\"lru\"} 5\n"));
    CHECK(strstr(txt, "cinfer_kv_store_load_latency_seconds_bucket{model_name=\"m\",le=\"0.00025\"} 1\n"));
    CHECK(strstr(txt, "cinfer_kv_store_load_latency_seconds_bucket{model_name=\"m\",le=\"0.002\"} 3\n"));
    CHECK(strstr(txt, "cinfer_kv_store_load_latency_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 4\n"));
    CHECK(strstr(txt, "cinfer_kv_store_load_latency_seconds_count{model_name=\"m\"} 4\n"));
    CHECK(strstr(txt, "cinfer_engine_phase_seconds_total{model_name=\"m\",phase=\"forward\"} 1.500000\n"));
    CHECK(strstr(txt, "cinfer_engine_phase_seconds_total{model_name=\"m\",phase=\"output\"} 0.250000\n"));
    free(txt);
}

int main(void) {
    test_classes();
    test_keys();
    test_request_field();
    test_store_metrics();
    return test_finish();
}
