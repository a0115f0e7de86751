/* test_model_errors.c - bad model files and bad CLI input give a one-line
 * error and exit code 1 (a usage error: 2), never a crash: missing file, non-GGUF, truncated
 * GGUF, unknown architecture, tensor shape mismatch, unsupported tensor type,
 * (named with what cinfer supports, before any other check), prompt longer
 * than the context. Checks the library (model_load) and the CLI
 * binary ($CINFER_BIN, the sanitizer build's when run there). */
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "model/model.h"
#include "testutil.h"

/* Copies stories260K.gguf into a writer, letting `edit` change it. */
typedef void (*edit_fn)(gguf_writer *w, const gguf_file *src);

static int write_variant(const char *out, edit_fn edit, const char *skip_tensor) {
    cf_err err = {0};
    gguf_file *src;
    if (gguf_open(shared_path("models/stories260K.gguf"), &src, &err)) return -1;
    gguf_writer *w = gguf_writer_create();
    int rc = gguf_writer_copy_kv(w, src, &err);
    for (int64_t i = 0; rc == 0 && i < gguf_tensor_count(src); i++) {
        const gguf_tensor *t = gguf_tensor_at(src, i);
        if (skip_tensor && !strcmp(t->name, skip_tensor)) continue;
        rc = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, true, &err);
    }
    if (rc == 0 && edit) edit(w, src);
    if (rc == 0) rc = gguf_writer_write(w, out, &err);
    if (rc) fprintf(stderr, "write_variant: %s\n", err.msg);
    gguf_writer_free(w);
    gguf_close(src);
    return rc;
}

static void edit_arch(gguf_writer *w, const gguf_file *src) {
    (void)src;
    gguf_set_str(w, "general.architecture", "mamba9");
}

static void edit_shape(gguf_writer *w, const gguf_file *src) {
    (void)src;
    static float data[64 * 32];
    int64_t ne[2] = {64, 32};
    gguf_writer_add_tensor(w, "blk.0.attn_q.weight", 0, 2, ne, data, true, NULL);
}

static void edit_type(gguf_writer *w, const gguf_file *src) {
    (void)src;
    static unsigned char data[64 * 64 / 256 * 66]; /* iq2_xxs rows (a type cinfer does not compute) */
    int64_t ne[2] = {256, 16};
    gguf_writer_add_tensor(w, "blk.0.attn_q.weight", 16, 2, ne, data, true, NULL);
}

static void edit_embd_type(gguf_writer *w, const gguf_file *src) { /* an i-quant embedding, as in IQ2_XXS files */
    (void)src;
    static unsigned char data[512 / 256 * 66 * 64];
    int64_t ne[2] = {512, 64};
    gguf_writer_add_tensor(w, "token_embd.weight", 16, 2, ne, data, true, NULL);
}

/* Runs the CLI with the NULL-terminated args (no shell); returns its exit
 * status (-1: CINFER_BIN unset or not started), captures stderr into buf. */
static int run_cli(const char *const *args, char *buf, size_t cap) {
    const char *bin = getenv("CINFER_BIN");
    if (!bin) return -1;
    const char *argv[16] = {bin};
    for (int i = 0; args[i] && i < 14; i++) argv[i + 1] = args[i];
    return test_run(argv, TEST_RUN_STDERR, buf, cap);
}

static void expect_load_error(const char *path, const char *needle) {
    cf_err err = {0};
    model *m = NULL;
    int rc = model_load(path, &m, &err);
    CHECKF(rc == -1 && m == NULL, "%s loaded", path);
    CHECKF(strstr(err.msg, needle) != NULL, "message '%s' lacks '%s'", err.msg, needle);
    CHECKF(strchr(err.msg, '\n') == NULL, "multi-line message");
    char out[4096];
    int st = run_cli((const char *const[]){"run", "-m", path, "-n", "1", NULL}, out, sizeof out);
    if (st == -1) return;
    CHECKF(st == 1, "cinfer run -m %s -n 1 exited %d: %s", path, st, out);
    size_t lines = 0;
    for (char *c = out; *c; c++) lines += *c == '\n';
    CHECKF(lines == 1 && strstr(out, "cinfer: ") == out, "cinfer run -m %s -n 1 printed: %s", path, out);
}

int main(void) {
    char p[256];
    expect_load_error("/nonexistent/model.gguf", "/nonexistent/model.gguf");

    temp_path(p, sizeof p, "notgguf.gguf");
    FILE *f = fopen(p, "w");
    fputs("this is not a gguf file at all\n", f);
    fclose(f);
    expect_load_error(p, p);

    size_t len;
    char *whole = read_file(shared_path("models/stories260K.gguf"), &len);
    CHECK(whole != NULL);
    size_t cuts[] = {3, 24, 100, 5000, len / 2, len - 1};
    for (size_t i = 0; whole && i < sizeof cuts / sizeof cuts[0]; i++) {
        temp_path(p, sizeof p, "trunc.gguf");
        f = fopen(p, "wb");
        fwrite(whole, 1, cuts[i], f);
        fclose(f);
        expect_load_error(p, p);
    }
    free(whole);

    temp_path(p, sizeof p, "arch.gguf");
    CHECK(write_variant(p, edit_arch, NULL) == 0);
    expect_load_error(p, "mamba9");

    temp_path(p, sizeof p, "shape.gguf");
    CHECK(write_variant(p, edit_shape, "blk.0.attn_q.weight") == 0);
    expect_load_error(p, "blk.0.attn_q.weight");

    temp_path(p, sizeof p, "type.gguf");
    CHECK(write_variant(p, edit_type, "blk.0.attn_q.weight") == 0);
    expect_load_error(p, "tensor blk.0.attn_q.weight has type IQ2_XXS, which cinfer cannot run yet; supported: F32 "
                         "F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS MXFP4");

    temp_path(p, sizeof p, "embdtype.gguf"); /* named as such, not "vocabulary has 512 tokens: ..." */
    CHECK(write_variant(p, edit_embd_type, "token_embd.weight") == 0);
    expect_load_error(p, "tensor token_embd.weight has type IQ2_XXS, which cinfer cannot run yet");
    {
        cf_err err = {0};
        model *m = NULL;
        CHECK(model_load(p, &m, &err) == -1 && strstr(err.msg, "vocabulary") == NULL);
    }

    temp_path(p, sizeof p, "missing.gguf");
    CHECK(write_variant(p, NULL, "blk.3.ffn_up.weight") == 0);
    expect_load_error(p, "blk.3.ffn_up.weight");

    /* prompt longer than the context */
    char out[4096];
    const char *model = shared_path("models/stories260K.gguf");
    int st = run_cli((const char *const[]){"run", "-m", model, "--ctx", "8", "-p",
                                           "Once upon a time there was a very long prompt indeed", NULL},
                     out, sizeof out);
    if (st != -1) { CHECKF(st == 1 && strstr(out, "context"), "long prompt: exit %d: %s", st, out); }
    /* bad flag values */
    st = run_cli((const char *const[]){"run", "-m", model, "-n", "abc", NULL}, out, sizeof out);
    if (st != -1) CHECKF(st == 2, "bad -n: exit %d (usage errors exit 2): %s", st, out);

    for (const char *t = "notgguf.gguf\0trunc.gguf\0arch.gguf\0shape.gguf\0type.gguf\0embdtype.gguf\0missing.gguf\0";
         *t; t += strlen(t) + 1)
        remove(temp_path(p, sizeof p, t));
    return test_finish();
}
