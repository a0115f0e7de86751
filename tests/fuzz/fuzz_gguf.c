/* fuzz_gguf.c - libFuzzer harness for the GGUF reader: every input goes
 * through gguf_open_memory(); when it parses, every key (through each typed
 * getter), array element and tensor byte is touched so ASan/UBSan see any
 * index entry that points outside the input. Failures must carry a one-line
 * message naming the input. Seed corpus: tests/fuzz/corpus/gguf/ (tiny files
 * made by the writer; new finds go to the first, git-ignored, directory):
 *   CC=clang cmake -S . -B build-fuzz -DCINFER_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
 *   cmake --build build-fuzz --target fuzz_gguf
 *   mkdir -p tests/fuzz/corpus-work/gguf
 *   ./build-fuzz/fuzz_gguf -max_total_time=60 tests/fuzz/corpus-work/gguf tests/fuzz/corpus/gguf */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"

static volatile uint64_t sink;

static void walk_kv(const gguf_file *f, int64_t i) {
    cf_err err;
    const char *k = gguf_key_name(f, i);
    int64_t iv;
    double dv;
    bool bv;
    gguf_str sv;
    uint64_t n;
    sink += strlen(k) + (uint64_t)gguf_kv_type(f, i) + (uint64_t)gguf_arr_type(f, i) + gguf_arr_len(f, i);
    if (gguf_find_key(f, k) != i) abort();
    if (gguf_get_int(f, k, &iv, &err) == 0) sink += (uint64_t)iv;
    if (gguf_get_float(f, k, &dv, &err) == 0) sink += (uint64_t)(dv == dv);
    if (gguf_get_bool(f, k, &bv, &err) == 0) sink += bv;
    if (gguf_get_str(f, k, &sv, &err) == 0) sink += sv.len + (uint8_t)sv.s[sv.len];
    const gguf_str *as;
    if (gguf_get_arr_str(f, k, &as, &n, &err) == 0)
        for (uint64_t j = 0; j < n; j++) sink += as[j].len + (uint8_t)as[j].s[as[j].len];
    float *af;
    if (gguf_get_arr_f32(f, k, &af, &n, &err) == 0) {
        for (uint64_t j = 0; j < n; j++) sink += (uint64_t)(af[j] == af[j]);
        free(af);
    }
    int64_t *ai;
    if (gguf_get_arr_i64(f, k, &ai, &n, &err) == 0) {
        for (uint64_t j = 0; j < n; j++) sink += (uint64_t)ai[j];
        free(ai);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file *f;
    cf_err err;
    err.msg[0] = 0;
    if (gguf_open_memory(data, size, "fuzz.gguf", &f, &err) != 0) {
        if (strncmp(err.msg, "fuzz.gguf: ", 11) != 0 || strchr(err.msg, '\n')) abort();
        return 0;
    }
    for (int64_t i = 0; i < gguf_kv_count(f); i++) walk_kv(f, i);
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (gguf_find_tensor(f, t->name) != t) abort();
        const uint8_t *d = t->data;
        if (d < data || t->nbytes > size || d - data > (ptrdiff_t)(size - t->nbytes)) abort();
        if (t->nbytes) sink += d[0] + d[t->nbytes - 1];
    }
    gguf_close(f);
    return 0;
}
