/* test_serve_names.c - served model names (model_names.h): comma-separated and
 * repeated specs, empty / duplicate names refused, the name a request selects
 * (its own, the first by default, NULL for another model), /v1/models JSON; and
 * metrics_label_all (metrics.h): model_name is the first label of every sample,
 * escaped, comments untouched. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "serve/metrics.h"
#include "serve/model_names.h"
#include "testutil.h"

static void names(void) {
    serve_names s = {0};
    char msg[128];
    CHECK(serve_names_add(&s, "a,b", msg, sizeof msg) == 0);
    CHECK(serve_names_add(&s, "c", msg, sizeof msg) == 0);
    CHECK(s.n == 3 && !strcmp(s.v[2], "c"));
    CHECK(serve_names_add(&s, "d,,e", msg, sizeof msg) == -1 && strstr(msg, "empty"));
    CHECK(serve_names_add(&s, "b", msg, sizeof msg) == -1 && strstr(msg, "twice"));
    CHECK(serve_names_add(&s, "", msg, sizeof msg) == -1);
    const char *p = serve_names_pick(&s, "b");
    CHECK(p && !strcmp(p, "b"));
    p = serve_names_pick(&s, NULL);
    CHECK(p && !strcmp(p, "a"));
    p = serve_names_pick(&s, "");
    CHECK(p && !strcmp(p, "a"));
    CHECK(serve_names_pick(&s, "zzz") == NULL);
    char *j = serve_names_models_json(&s, 7, NULL);
    CHECK(j != NULL);
    json_t *root = j ? json_loads(j, 0, NULL) : NULL;
    json_t *data = root ? json_object_get(root, "data") : NULL;
    CHECK(data && json_array_size(data) == (size_t)s.n);
    for (size_t i = 0; data && i < json_array_size(data); i++) {
        json_t *m = json_array_get(data, i);
        CHECK(!strcmp(json_string_value(json_object_get(m, "id")), s.v[i]));
        CHECK(json_integer_value(json_object_get(m, "created")) == 7);
    }
    json_decref(root);
    free(j);
    char all[64];
    serve_names_join(&s, all, sizeof all);
    CHECK(!strcmp(all, "'a', 'b', 'c', 'd'")); /* "d" was added before the empty name */
    serve_names_free(&s);
    CHECK(s.n == 0 && s.v == NULL);
}

static void labels(void) {
    const char in[] =
        "# HELP x_total X.\n# TYPE x_total counter\nx_total 3\ny{status=\"200\"} 1\nz_bucket{le=\"+Inf\"} 2\n";
    char *out;
    size_t len;
    CHECK(metrics_label_all(in, sizeof in - 1, "m\"1", &out, &len) == 0);
    CHECK(len == strlen(out));
    CHECK(!strcmp(out, "# HELP x_total X.\n# TYPE x_total counter\nx_total{model_name=\"m\\\"1\"} 3\n"
                       "y{model_name=\"m\\\"1\",status=\"200\"} 1\nz_bucket{model_name=\"m\\\"1\",le=\"+Inf\"} 2\n"));
    free(out);
}

int main(void) {
    names();
    labels();
    return test_finish();
}
