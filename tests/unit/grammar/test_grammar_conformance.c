/* test_grammar_conformance.c - the JSON-Schema-Test-Suite (draft2020-12, tests/data/jsonschema,
 * see the README there) driven through the grammar engine: for each schema the engine compiles,
 * every test instance (serialized compactly) is fed to a matcher byte by byte, and the engine's
 * verdict (viable and complete) is compared with the suite's `valid`. Prints per keyword file:
 * schemas compiled, instances agreeing, wrong accepts (invalid instance accepted) and wrong
 * rejects. Fails on any wrong accept: the engine may refuse a schema or be stricter than the
 * schema (e.g. it fixes property order), never looser. Files under format/ assert `format`;
 * the others use the draft's default (format as annotation). */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_testutil.h"
#include "testutil.h"

typedef struct tally {
    int schemas, compiled, instances, agree, wrong_accept, wrong_reject;
} tally;

static void run_group(const json_t *group, uint32_t flags, const cinfer_grammar_vocab *v, tally *t, const char *file) {
    char *schema = json_dumps(json_object_get(group, "schema"), JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
    cinfer_grammar_error err;
    cinfer_grammar *g = schema ? gt_compile(CINFER_GRAMMAR_JSON_SCHEMA, schema, flags, &err) : NULL;
    t->schemas++;
    if (getenv("GRAMMAR_CONFORMANCE_VERBOSE") && !g)
        fprintf(stderr, "  %s: '%s': not compiled: %s\n", file,
                json_string_value(json_object_get(group, "description")), err.msg);
    if (g) {
        t->compiled++;
        size_t i;
        json_t *test;
        json_array_foreach(json_object_get(group, "tests"), i, test) {
            char *data = json_dumps(json_object_get(test, "data"),
                                    JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
            int valid = json_is_true(json_object_get(test, "valid"));
            int got = data ? gt_accepts(g, v, data, strlen(data)) : -1;
            t->instances++;
            if (got == valid) t->agree++;
            else if (got == 1) {
                t->wrong_accept++;
                fprintf(stderr, "WRONG ACCEPT %s: schema %s instance %s (%s)\n", file, schema, data,
                        json_string_value(json_object_get(test, "description")));
            } else {
                t->wrong_reject++;
                if (getenv("GRAMMAR_CONFORMANCE_VERBOSE"))
                    fprintf(stderr, "  wrong reject %s: schema %s instance %s\n", file, schema, data);
            }
            free(data);
        }
        cinfer_grammar_release(g);
    }
    free(schema);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void run_dir(const char *dir, const char *prefix, uint32_t flags, const cinfer_grammar_vocab *v, tally *all) {
    DIR *d = opendir(dir);
    CHECKF(d != NULL, "cannot open %s", dir);
    if (!d) return;
    char *names[128];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 128)
        if (strstr(e->d_name, ".json")) names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) {
        char path[1024], label[256];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        snprintf(label, sizeof label, "%s%s", prefix, names[i]);
        json_error_t jerr;
        json_t *groups = json_load_file(path, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
        CHECKF(json_is_array(groups), "%s: %s", path, jerr.text);
        tally t = {0};
        size_t k;
        json_t *group;
        json_array_foreach(groups, k, group) run_group(group, flags, v, &t, label);
        json_decref(groups);
        printf("%-34s schemas %3d/%3d compiled  instances %4d/%4d agree  wrong-accept %d  wrong-reject %d\n", label,
               t.compiled, t.schemas, t.agree, t.instances, t.wrong_accept, t.wrong_reject);
        all->schemas += t.schemas, all->compiled += t.compiled, all->instances += t.instances;
        all->agree += t.agree, all->wrong_accept += t.wrong_accept, all->wrong_reject += t.wrong_reject;
        free(names[i]);
    }
}

int main(void) {
    cinfer_grammar_vocab *v = gt_byte_vocab();
    CHECK(v != NULL);
    tally all = {0};
    run_dir(source_path("tests/data/jsonschema"), "", CINFER_GRAMMAR_FORMAT_ANNOTATION, v, &all);
    run_dir(source_path("tests/data/jsonschema/format"), "format/", 0, v, &all);
    printf("TOTAL schemas %d/%d compiled, instances %d/%d agree, wrong accepts %d, wrong rejects %d\n", all.compiled,
           all.schemas, all.agree, all.instances, all.wrong_accept, all.wrong_reject);
    CHECKF(all.wrong_accept == 0, "%d wrong accepts", all.wrong_accept);
    CHECKF(all.compiled >= 160, "only %d schemas compiled (regression)", all.compiled);
    cinfer_grammar_vocab_free(v);
    return test_finish();
}
