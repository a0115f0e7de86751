/* test_weights_cache.c - the repacked-weights cache (--weights-cache,
 * model/weights_cache.h) on a Q8_0 llama made with mkmodel_write in a
 * scratch directory:
 *   - miss -> the file is written (source BUILT) -> hit (source HIT), and the
 *     logits of a short prompt are bit-identical without a cache, after the
 *     miss and after the hit; the hit reads no repacked tensor from the model
 *     file (its cached bytes come from the cache mapping);
 *   - every bad file is rejected with a reason and rebuilt, and the next load
 *     hits again: a flipped data byte (checksum), a truncated file, another
 *     format version, another cinfer version, another ISA (a real avx2 cache
 *     copied under the avx512 name), a garbage file, a symbolic link, a file
 *     writable by others, and a consistent file whose index does not fit the
 *     load (a changed tag: the load fails, is redone and rebuilds);
 *   - a stale temporary file of a dead writer is removed by the next build;
 *   - a cache directory that cannot be made means a load without a cache;
 *   - under avx2 (no repacking) the cache holds the stacked rows and hits too.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cpu.h"
#include "engine/generate.h"
#include "format/wcache_format.h"
#include "model/mkmodel.h"
#include "model/model.h"
#include "testutil.h"

static char g_model[512], g_dir[512], g_cdir[512];
static int g_nv;

static void logits_of(model *m, float *out) {
    int32_t ids[4] = {1, 200, 300, 400};
    thread_pool *pool = pool_create(1);
    gen_session g;
    cf_err err = {0};
    int rc = pool ? gen_init(&g, m, pool, 64, 16, &err) : -1;
    if (rc == 0) {
        rc = gen_feed(&g, ids, 4, out, &err);
        gen_release(&g);
    }
    CHECKF(rc == 0, "%s", err.msg);
    pool_destroy(pool);
}

/* Loads with the cache (dir NULL: without), checks the source and that the
 * logits equal ref (when given); returns the note. */
static void load_check(const char *dir, model_weights_source want, const char *note_has, const float *ref,
                       const char *what) {
    model *m = NULL;
    cf_err err = {0};
    model_load_opts o = {.weights_cache_dir = dir};
    CHECKF(model_load_with(g_model, &o, &m, &err) == 0, "%s: %s", what, err.msg);
    if (!m) return;
    model_memory mm;
    model_memory_stats(m, &mm);
    CHECKF(mm.source == want, "%s: source %d, want %d (note '%s')", what, (int)mm.source, (int)want, mm.cache_note);
    if (note_has)
        CHECKF(strstr(mm.cache_note, note_has) != NULL, "%s: note '%s' lacks '%s'", what, mm.cache_note, note_has);
    else CHECKF(mm.cache_note[0] == 0, "%s: unexpected note '%s'", what, mm.cache_note);
    if (want != MODEL_WEIGHTS_FILE)
        CHECKF(mm.cache_bytes > 0 && mm.owned_bytes == 0, "%s: owned %llu", what, (unsigned long long)mm.owned_bytes);
    if (ref) {
        float *l = calloc((size_t)g_nv * 4, sizeof(float));
        if (l) {
            logits_of(m, l);
            CHECKF(memcmp(l, ref, sizeof(float) * (size_t)g_nv * 4) == 0, "%s: logits differ", what);
        }
        free(l);
    }
    model_free(m);
}

/* The one *.cwc file of the current ISA in g_cdir. */
static const char *cache_file(char *out, size_t cap) {
    out[0] = 0;
    DIR *d = opendir(g_cdir);
    if (!d) return out;
    char suffix[32];
    snprintf(suffix, sizeof suffix, "-%s.cwc", cpu_isa_name(cpu_isa_active()));
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name), s = strlen(suffix);
        if (n > s && !strcmp(de->d_name + n - s, suffix)) snprintf(out, cap, "%s/%s", g_cdir, de->d_name);
    }
    closedir(d);
    return out;
}

static int write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* Rewrites the cache file's header through edit (and the index through
 * edit_index when given), with valid checksums: a consistent file. */
static void rewrite_header(void (*edit)(wcache_hdr *), void (*edit_index)(wcache_entry *)) {
    char p[600];
    cache_file(p, sizeof p);
    size_t n = 0;
    uint8_t *b = (uint8_t *)read_file(p, &n);
    wcache_hdr h;
    CHECK(b && wcache_decode_header(b, n, n, &h, NULL) == WC_VALID);
    if (!b) return;
    if (edit_index) {
        wcache_entry *e = calloc(h.n_entries, sizeof *e);
        CHECK(e && wcache_check_index(&h, b + h.index_offset, n - h.index_offset, e, NULL) == 0);
        if (e) {
            edit_index(e);
            h.index_checksum = wcache_encode_index(e, h.n_entries, b + h.index_offset);
        }
        free(e);
    }
    if (edit) edit(&h);
    wcache_encode_header(&h, b);
    CHECK(write_bytes(p, b, n) == 0);
    free(b);
}

static void edit_version(wcache_hdr *h) { snprintf(h->id.version, sizeof h->id.version, "0.0.1+elsewhere"); }
static void edit_tag(wcache_entry *e) { e[0].tag ^= 1; }

static void flip_data_byte(void) {
    char p[600];
    cache_file(p, sizeof p);
    int fd = open(p, O_RDWR);
    CHECK(fd >= 0);
    if (fd < 0) return;
    uint8_t c = 0;
    off_t at = WC_HEADER_BYTES + 100; /* inside the first buffer */
    CHECK(pread(fd, &c, 1, at) == 1);
    c ^= 0x40;
    CHECK(pwrite(fd, &c, 1, at) == 1);
    close(fd);
}

static void test_isa(const float *ref, cpu_isa isa) {
    cpu_isa_force(isa);
    const char *name = cpu_isa_name(isa);
    char p[600], what[64];
    snprintf(what, sizeof what, "%s miss", name);
    load_check(g_cdir, MODEL_WEIGHTS_CACHE_BUILT, NULL, ref, what);
    cache_file(p, sizeof p);
    CHECKF(p[0], "%s: no cache file in %s", name, g_cdir);
    snprintf(what, sizeof what, "%s hit", name);
    load_check(g_cdir, MODEL_WEIGHTS_CACHE_HIT, NULL, ref, what);
}

static void test_rejections(const float *ref) {
    char p[600];
    struct {
        const char *what, *note;
    } cases[] = {{"flipped byte", "fails its checksum"},
                 {"truncated", "truncated"},
                 {"format version", "another cache format version"},
                 {"cinfer version", "written by cinfer 0.0.1+elsewhere"},
                 {"garbage", "magic"},
                 {"symlink", "symbolic link"},
                 {"group-writable", "writable by group or others"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cache_file(p, sizeof p);
        if (!p[0]) return;
        switch (i) {
        case 0: flip_data_byte(); break;
        case 1: CHECK(truncate(p, 5000) == 0); break;
        case 2: {
            int fd = open(p, O_RDWR);
            uint8_t v = 99;
            CHECK(fd >= 0 && pwrite(fd, &v, 1, 8) == 1);
            if (fd >= 0) close(fd);
            break;
        }
        case 3: rewrite_header(edit_version, NULL); break;
        case 4: CHECK(write_bytes(p, "not a cache file at all", 23) == 0); break;
        case 5: {
            char target[700];
            snprintf(target, sizeof target, "%s.elsewhere", p);
            CHECK(rename(p, target) == 0 && symlink(target, p) == 0);
            break;
        }
        case 6: CHECK(chmod(p, 0664) == 0); break;
        }
        char what[80];
        snprintf(what, sizeof what, "rejected: %s", cases[i].what);
        load_check(g_cdir, MODEL_WEIGHTS_CACHE_BUILT, cases[i].note, ref, what);
        snprintf(what, sizeof what, "hit after rebuild: %s", cases[i].what);
        load_check(g_cdir, MODEL_WEIGHTS_CACHE_HIT, NULL, ref, what);
    }
    /* a consistent file whose buffers do not fit the load: the load is redone and rebuilds */
    rewrite_header(NULL, edit_tag);
    load_check(g_cdir, MODEL_WEIGHTS_CACHE_BUILT, "did not fit this load", ref, "index mismatch");
    load_check(g_cdir, MODEL_WEIGHTS_CACHE_HIT, NULL, ref, "hit after index mismatch");
}

/* A real avx2 cache under the avx512 name: rejected for its ISA. */
static void test_foreign_isa(const float *ref512) {
    char p2[600], p5[600];
    cpu_isa_force(CPU_ISA_AVX2);
    cache_file(p2, sizeof p2);
    cpu_isa_force(CPU_ISA_AVX512);
    cache_file(p5, sizeof p5);
    if (!p2[0] || !p5[0]) return;
    size_t n = 0;
    char *b = read_file(p2, &n);
    CHECK(b && write_bytes(p5, b, n) == 0);
    free(b);
    load_check(g_cdir, MODEL_WEIGHTS_CACHE_BUILT, "built for avx2 kernels, this process uses avx512", ref512,
               "foreign ISA");
    load_check(g_cdir, MODEL_WEIGHTS_CACHE_HIT, NULL, ref512, "hit after foreign ISA");
}

static void test_stale_temp(const float *ref) {
    char p[600], tmp[700];
    cache_file(p, sizeof p);
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    CHECK(pid > 0 && waitpid(pid, NULL, 0) == pid); /* a pid that no longer runs */
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.0", p, (long)pid);
    CHECK(write_bytes(tmp, "partial", 7) == 0);
    CHECK(unlink(p) == 0);
    load_check(g_cdir, MODEL_WEIGHTS_CACHE_BUILT, NULL, ref, "build after a dead writer");
    CHECKF(access(tmp, F_OK) != 0, "stale %s is still there", tmp);
}

int main(void) {
    const char *vocab = shared_path("models/stories260K.gguf");
    if (access(vocab, R_OK) != 0) return tu_missing_fixture(vocab);
    char scratch[400];
    if (!test_scratch_path(scratch, sizeof scratch, "wcache")) return tu_missing_fixture("a scratch directory");
    CHECK(mkdir(scratch, 0700) == 0);
    snprintf(g_model, sizeof g_model, "%s/m.gguf", scratch);
    snprintf(g_cdir, sizeof g_cdir, "%s/cache", scratch);
    snprintf(g_dir, sizeof g_dir, "%s", scratch);
    mkmodel_opts o = {.arch = "llama",
                      .dim = 256,
                      .layers = 2,
                      .heads = 4,
                      .kv_heads = 2,
                      .ffn = 704,
                      .vocab_from = vocab,
                      .type = DT_Q8_0,
                      .seed = 11,
                      .ctx = 128};
    cf_err err = {0};
    CHECKF(mkmodel_write(&o, g_model, &err) == 0, "%s", err.msg);
    cpu_isa best = cpu_isa_active();
    model *m = NULL;
    CHECKF(model_load(g_model, &m, &err) == 0, "%s", err.msg);
    if (!m) return test_finish();
    g_nv = model_get_hparams(m)->n_vocab;
    float *ref = calloc((size_t)g_nv * 4, sizeof(float)), *ref2 = calloc((size_t)g_nv * 4, sizeof(float));
    CHECK(ref && ref2);
    logits_of(m, ref);
    model_free(m);
    load_check(NULL, MODEL_WEIGHTS_FILE, NULL, ref, "no cache");
    test_isa(ref, best);
    test_rejections(ref);
    test_stale_temp(ref);
    if (best == CPU_ISA_AVX512 && cpu_isa_supported(CPU_ISA_AVX2)) {
        cpu_isa_force(CPU_ISA_AVX2);
        CHECKF(model_load(g_model, &m, &err) == 0, "%s", err.msg);
        if (m) logits_of(m, ref2);
        model_free(m);
        test_isa(ref2, CPU_ISA_AVX2);
        test_foreign_isa(ref);
    } else {
        printf("skip foreign-isa: needs avx512 and avx2\n");
    }
    cpu_isa_force(best);
    /* a cache directory that cannot be made: the load goes on without one */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/m.gguf/sub", g_dir);
    load_check(bad, MODEL_WEIGHTS_FILE, "not used: weights cache: cannot make directory", ref, "unusable dir");
    free(ref);
    free(ref2);
    test_scratch_remove(scratch);
    return test_finish();
}
