/* test_response_store.c - the Responses store (src/serve/response_store.c): put/get/delete,
 * replacing an id, the entry-count cap evicts the least recently USED entry (a get refreshes),
 * the byte cap, TTL expiry measured from the last use, max_count 0 stores nothing, and an
 * entry larger than the byte cap is refused; entries are bound to their tenant (another tenant
 * can neither get, continue nor delete them); ids are CSPRNG hex (base/randid.h). Also api_error_json's Anthropic mapping (529). */
#include <stdlib.h>
#include <string.h>

#include "base/randid.h"
#include "serve/api.h"
#include "serve/response_store.h"
#include "serve/tenant.h"
#include "testutil.h"

static json_t *conv(const char *text) { return json_pack("[{s:s, s:s}]", "role", "user", "content", text); }

static int put(response_store *st, const char *id, const char *text, double now) {
    json_t *c = conv(text);
    int rc = rstore_put(st, id, NULL, c, "{\"id\":\"x\"}", now);
    json_decref(c);
    return rc;
}

static void test_basic(void) {
    response_store *st = rstore_new(3, 1 << 20, 100);
    CHECK(st != NULL);
    CHECK(put(st, "a", "one", 0) == 0);
    CHECK(put(st, "b", "two", 1) == 0);
    json_t *c = NULL;
    const char *body = NULL;
    CHECK(rstore_get(st, "a", NULL, 2, &c, &body));
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(c, 0), "content")), "one"));
    CHECK(!strcmp(body, "{\"id\":\"x\"}"));
    CHECK(!rstore_get(st, "zz", NULL, 2, NULL, NULL));
    CHECK(put(st, "a", "uno", 3) == 0); /* replace */
    CHECK(rstore_count(st) == 2);
    CHECK(rstore_get(st, "a", NULL, 3, &c, NULL));
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(c, 0), "content")), "uno"));
    CHECK(rstore_delete(st, "a", NULL));
    CHECK(!rstore_delete(st, "a", NULL));
    CHECK(rstore_count(st) == 1);
    rstore_free(st);
}

static void test_lru_and_ttl(void) {
    response_store *st = rstore_new(2, 1 << 20, 10);
    put(st, "a", "1", 0);
    put(st, "b", "2", 1);
    CHECK(rstore_get(st, "a", NULL, 2, NULL, NULL)); /* a is now the most recently used */
    put(st, "c", "3", 3); /* evicts b */
    CHECK(!rstore_get(st, "b", NULL, 3, NULL, NULL));
    CHECK(rstore_get(st, "a", NULL, 4, NULL, NULL));
    CHECK(rstore_get(st, "c", NULL, 4, NULL, NULL));
    CHECK(rstore_get(st, "a", NULL, 13, NULL, NULL)); /* used at 4: alive until 14 */
    CHECK(!rstore_get(st, "c", NULL, 14.5, NULL, NULL)); /* used last at 4: expired */
    CHECK(!rstore_get(st, "a", NULL, 30, NULL, NULL));
    CHECK(rstore_count(st) == 0 && rstore_bytes(st) == 0);
    rstore_free(st);

    st = rstore_new(100, 350, 10); /* byte cap: each entry is ~150 bytes */
    put(st, "a", "1", 0);
    put(st, "b", "2", 0);
    put(st, "c", "3", 0);
    CHECK(rstore_bytes(st) <= 350);
    CHECK(rstore_count(st) < 3);
    CHECK(rstore_get(st, "c", NULL, 0, NULL, NULL));
    char big[1000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    CHECK(put(st, "huge", big, 0) == -1);
    CHECK(!rstore_get(st, "huge", NULL, 0, NULL, NULL));
    rstore_free(st);

    st = rstore_new(0, 1 << 20, 10); /* disabled */
    CHECK(put(st, "a", "1", 0) == 0);
    CHECK(!rstore_get(st, "a", NULL, 0, NULL, NULL));
    rstore_free(st);
}

static void test_error_shapes(void) {
    serve_error e;
    int status;
    serve_fail(&e, 429, "rate_limit_exceeded", "rate_limit_exceeded", NULL, "busy");
    char *s = api_error_json(RECIPE_API_MESSAGES, &e, "req_1", &status);
    CHECK(status == 529);
    CHECK(s && strstr(s, "\"type\":\"error\"") && strstr(s, "\"overloaded_error\"") && strstr(s, "\"req_1\""));
    free(s);
    s = api_error_json(RECIPE_API_RESPONSES, &e, "req_1", &status);
    CHECK(status == 429 && s && strstr(s, "{\"error\":{"));
    free(s);
    serve_fail(&e, 401, "invalid_request_error", "invalid_api_key", NULL, "no key");
    s = api_error_json(RECIPE_API_MESSAGES, &e, NULL, &status);
    CHECK(status == 401 && s && strstr(s, "authentication_error"));
    free(s);
    serve_bad(&e, "max_tokens", "bad");
    s = api_error_json(RECIPE_API_MESSAGES, &e, NULL, &status);
    CHECK(status == 400 && s && strstr(s, "invalid_request_error"));
    free(s);
}

static void test_tenants(void) {
    response_store *st = rstore_new(10, 1 << 20, 100);
    char ta[TENANT_ID_CAP], tb[TENANT_ID_CAP], ta2[TENANT_ID_CAP];
    CHECK(tenant_of_key("key-a", ta) == 0 && tenant_of_key("key-b", tb) == 0 && tenant_of_key("key-a", ta2) == 0);
    CHECK(strlen(ta) == 32 && strcmp(ta, tb) && !strcmp(ta, ta2) && !strstr(ta, "key"));
    json_t *c = conv("hi");
    CHECK(rstore_put(st, "resp_1", ta, c, "{}", 0) == 0);
    json_decref(c);
    CHECK(rstore_get(st, "resp_1", ta, 1, NULL, NULL));
    CHECK(!rstore_get(st, "resp_1", tb, 1, NULL, NULL));
    CHECK(!rstore_get(st, "resp_1", NULL, 1, NULL, NULL));
    CHECK(!rstore_delete(st, "resp_1", tb));
    CHECK(rstore_count(st) == 1);
    CHECK(rstore_delete(st, "resp_1", ta));
    rstore_free(st);

    char *salt = NULL;
    CHECK(tenant_cache_salt("", false, &salt) == 0 && salt == NULL);
    CHECK(tenant_cache_salt(ta, true, &salt) == 0 && salt == NULL);
    CHECK(tenant_cache_salt(ta, false, &salt) == 0 && salt && strstr(salt, ta));
    char *s2 = strdup("mine");
    CHECK(tenant_cache_salt(tb, false, &s2) == 0 && s2 && strstr(s2, tb) && strstr(s2, "mine"));
    CHECK(strcmp(salt, s2));
    free(salt);
    free(s2);

    char id1[64], id2[64];
    CHECK(cf_random_id("resp_", id1, sizeof id1) == 0 && cf_random_id("resp_", id2, sizeof id2) == 0);
    CHECK(strlen(id1) == 5 + CF_RANDID_CHARS && strncmp(id1, "resp_", 5) == 0 && strcmp(id1, id2));
    CHECK(cf_random_id("resp_", id1, 10) == -1);
}

int main(void) {
    test_basic();
    test_tenants();
    test_lru_and_ttl();
    test_error_shapes();
    return test_finish();
}
