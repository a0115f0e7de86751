/* test_model_memory.c - weights resident once (issue 25): a Q8_0 model made
 * with mkmodel_write in a scratch directory is loaded; every matrix the
 * kernels repacked has its file pages released, so the resident part of the
 * model's mapping (its Rss in /proc/self/smaps) stays under the file size
 * minus what was released; model_memory_stats accounts for the owned and
 * mapped bytes; greedy logits are the same as from a second load (the
 * released ranges are never needed); gguf_release_range is a no-op for an
 * in-memory image and rounds inward; model_lock_memory locks or fails with
 * a line naming RLIMIT_MEMLOCK. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cpu.h"
#include "engine/generate.h"
#include "model/mkmodel.h"
#include "model/model.h"
#include "testutil.h"

/* Rss (kB) of the mappings of `path` in /proc/self/smaps; -1 if none. */
static long mapping_rss_kb(const char *path) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[4096];
    long total = -1;
    int in = 0;
    size_t pl = strlen(path);
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        if (n && line[n - 1] == '\n') line[--n] = 0;
        long kb;
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's header line */
            in = n >= pl && strcmp(line + n - pl, path) == 0;
            continue;
        }
        if (in && sscanf(line, "Rss: %ld kB", &kb) == 1) total = (total < 0 ? 0 : total) + kb;
    }
    fclose(f);
    return total;
}

static int greedy_first(model *m, const int32_t *ids, int n, float *logits) {
    thread_pool *pool = pool_create(1);
    gen_session g;
    cf_err err = {0};
    int rc = pool ? gen_init(&g, m, pool, 64, 16, &err) : -1;
    if (rc == 0) {
        rc = gen_feed(&g, ids, n, logits, &err);
        gen_release(&g);
    }
    CHECKF(rc == 0, "%s", err.msg);
    pool_destroy(pool);
    return rc;
}

static void test_in_memory_image(void) {
    static uint8_t img[8192];
    /* not a GGUF: only the mapping check matters, so open a real one in memory */
    size_t len = 0;
    char *data = read_file(shared_path("models/stories260K.gguf"), &len);
    if (!data) return;
    gguf_file *f;
    cf_err err = {0};
    CHECKF(gguf_open_memory(data, len, "mem", &f, &err) == 0, "%s", err.msg);
    if (f) {
        CHECK(!gguf_is_mapped(f));
        CHECK(gguf_release_range(f, data, len) == 0); /* would zero malloc'd memory: must not */
        CHECK(gguf_release_range(f, img, sizeof img) == 0);
        gguf_close(f);
    }
    free(data);
}

int main(void) {
    const char *vocab = shared_path("models/stories260K.gguf");
    if (access(vocab, R_OK) != 0) return tu_missing_fixture(vocab);
    test_in_memory_image();
    char path[512];
    if (!test_scratch_path(path, sizeof path, "wmem")) return tu_missing_fixture("a scratch directory");
    mkmodel_opts o = {.arch = "llama",
                      .dim = 512,
                      .layers = 2,
                      .heads = 8,
                      .kv_heads = 4,
                      .ffn = 1408,
                      .vocab_from = vocab,
                      .type = DT_Q8_0,
                      .seed = 7,
                      .ctx = 128};
    cf_err err = {0};
    CHECKF(mkmodel_write(&o, path, &err) == 0, "%s", err.msg);
    struct stat st;
    CHECK(stat(path, &st) == 0);
    model *m = NULL, *m2 = NULL;
    CHECKF(model_load(path, &m, &err) == 0, "%s", err.msg);
    if (!m) return test_finish();
    model_memory mm;
    model_memory_stats(m, &mm);
    CHECK(mm.file_mapped);
    CHECK(!mm.locked);
    CHECK(mm.mapped_bytes > 0); /* token_embd at least */
    long rss = mapping_rss_kb(path);
    bool repacks = cpu_isa_active() == CPU_ISA_AVX512;
    printf("file %lld B, owned %llu, mapped %llu, released %llu, mapping Rss %ld kB (%s)\n", (long long)st.st_size,
           (unsigned long long)mm.owned_bytes, (unsigned long long)mm.mapped_bytes,
           (unsigned long long)mm.released_bytes, rss, cpu_isa_name(cpu_isa_active()));
    if (repacks) {
        CHECK(mm.released_bytes > (uint64_t)st.st_size / 2);
        CHECK(mm.owned_bytes >= mm.released_bytes);
        CHECKF(rss >= 0 && rss * 1024 <= (long)st.st_size - (long)mm.released_bytes + 64 * 1024, "Rss %ld kB", rss);
    }
    /* the same logits as a fresh load that is read again after release */
    int32_t ids[4] = {1, 200, 300, 400};
    int nv = model_get_hparams(m)->n_vocab;
    float *a = calloc((size_t)nv * 4, sizeof(float)), *b = calloc((size_t)nv * 4, sizeof(float));
    CHECKF(model_load(path, &m2, &err) == 0, "%s", err.msg);
    if (a && b && m2 && greedy_first(m, ids, 4, a) == 0 && greedy_first(m2, ids, 4, b) == 0)
        CHECK(memcmp(a, b, sizeof(float) * (size_t)nv * 4) == 0);
    free(a);
    free(b);
    model_free(m2);
    /* mlock: locked, or the one-line RLIMIT_MEMLOCK error */
    if (model_lock_memory(m, &err) == 0) {
        model_memory_stats(m, &mm);
        CHECK(mm.locked);
    } else {
        CHECKF(strstr(err.msg, "RLIMIT_MEMLOCK") != NULL, "%s", err.msg);
    }
    model_free(m);
    test_scratch_remove(path);
    return test_finish();
}
