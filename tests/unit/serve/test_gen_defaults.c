/* test_gen_defaults.c - the model's sampling defaults (serve/gen_defaults.c): general.sampling.*
 * keys read and range-checked with one-line errors naming the key, applied under the request's
 * values (only the fields the model gives), shown as JSON and in the start-up line. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "serve/gen_defaults.h"
#include "testutil.h"

/* a metadata-only GGUF holding whatever `set` writes */
static int read_with(void (*set)(gguf_writer *), gen_defaults *d, cf_err *err) {
    gguf_writer *w = gguf_writer_create();
    void *meta = NULL;
    size_t n = 0;
    gguf_file *f = NULL;
    int rc = -1;
    gguf_set_str(w, "general.architecture", "llama");
    set(w);
    if (gguf_writer_meta_image(w, &meta, &n, err) == 0 &&
        gguf_open_parts(meta, n, "m.gguf", NULL, 0, NULL, NULL, &f, err) == 0) {
        rc = gen_defaults_read(f, d, err);
        gguf_close(f);
    }
    gguf_writer_free(w);
    return rc;
}

static void set_none(gguf_writer *w) { (void)w; }
static void set_some(gguf_writer *w) {
    gguf_set_f32(w, "general.sampling.temp", 0.6f);
    gguf_set_f32(w, "general.sampling.top_p", 0.95f);
    gguf_set_i32(w, "general.sampling.top_k", 20);
}
static void set_all(gguf_writer *w) {
    set_some(w);
    gguf_set_f32(w, "general.sampling.min_p", 0.05f);
    gguf_set_f32(w, "general.sampling.penalty_repeat", 1.1f);
}
static void bad_top_p(gguf_writer *w) { gguf_set_f32(w, "general.sampling.top_p", 0.0f); }
static void bad_temp(gguf_writer *w) { gguf_set_f32(w, "general.sampling.temp", -1.0f); }
static void bad_penalty(gguf_writer *w) { gguf_set_f32(w, "general.sampling.penalty_repeat", 0.0f); }
static void bad_top_k(gguf_writer *w) { gguf_set_i32(w, "general.sampling.top_k", -3); }
static void bad_type(gguf_writer *w) { gguf_set_str(w, "general.sampling.temp", "hot"); }

static void expect_bad(void (*set)(gguf_writer *), const char *needle) {
    gen_defaults d;
    cf_err err = {{0}};
    CHECKF(read_with(set, &d, &err) == -1 && strstr(err.msg, needle) && !strchr(err.msg, '\n'), "want '%s', got '%s'",
           needle, err.msg);
}

int main(void) {
    gen_defaults d;
    cf_err err = {{0}};
    CHECK(read_with(set_none, &d, &err) == 0 && d.set == 0);
    char desc[128];
    gen_defaults_describe(&d, desc, sizeof desc);
    CHECK(!strcmp(desc, "none"));

    CHECKF(read_with(set_some, &d, &err) == 0, "%s", err.msg);
    CHECK(d.set == (GEN_DEF_TEMPERATURE | GEN_DEF_TOP_P | GEN_DEF_TOP_K));
    cinfer_sampling s = {.temperature = 1, .top_p = 1, .min_p = 0.5f, .repetition_penalty = 1.3f};
    gen_defaults_apply(&d, &s);
    CHECK(fabsf(s.temperature - 0.6f) < 1e-7f && fabsf(s.top_p - 0.95f) < 1e-7f && s.top_k == 20);
    CHECK(s.min_p == 0.5f && s.repetition_penalty == 1.3f); /* not given by the model: untouched */
    gen_defaults_describe(&d, desc, sizeof desc);
    CHECKF(!strcmp(desc, "temperature=0.6 top_p=0.95 top_k=20"), "%s", desc);

    CHECKF(read_with(set_all, &d, &err) == 0, "%s", err.msg);
    json_t *j = gen_defaults_model_fields(&d), *sd = json_object_get(j, "sampling_defaults");
    CHECK(json_object_size(sd) == 5);
    CHECK(json_real_value(json_object_get(sd, "temperature")) == 0.6); /* as written, not 0.60000002 */
    CHECK(json_real_value(json_object_get(sd, "min_p")) == 0.05);
    CHECK(json_real_value(json_object_get(sd, "repetition_penalty")) == 1.1);
    CHECK(json_integer_value(json_object_get(sd, "top_k")) == 20);
    json_decref(j);

    expect_bad(bad_top_p, "m.gguf: general.sampling.top_p = 0 is out of range for top_p");
    expect_bad(bad_temp, "general.sampling.temp = -1 is out of range for temperature");
    expect_bad(bad_penalty, "general.sampling.penalty_repeat = 0 is out of range");
    expect_bad(bad_top_k, "general.sampling.top_k = -3 is out of range");
    expect_bad(bad_type, "general.sampling.temp");
    return test_finish();
}
