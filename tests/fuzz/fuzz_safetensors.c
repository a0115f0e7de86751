/* fuzz_safetensors.c - libFuzzer harness for the safetensors header reader:
 * every input goes through st_open_memory(); when it parses, every tensor is
 * looked up by name and its first and last data bytes are read, so ASan sees
 * any entry that points outside the input, and no two tensors may overlap.
 * Failures must be one line naming the input. Seed corpus:
 * tests/fuzz/corpus/safetensors/ (small valid files):
 *   CC=clang cmake -S . -B build-fuzz -DCINFER_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
 *   cmake --build build-fuzz --target fuzz_safetensors
 *   mkdir -p tests/fuzz/corpus-work/safetensors
 *   ./build-fuzz/fuzz_safetensors -max_total_time=60 tests/fuzz/corpus-work/safetensors \
 *       tests/fuzz/corpus/safetensors */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/safetensors.h"

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    st_file *f;
    cf_err err;
    err.msg[0] = 0;
    if (st_open_memory(data, size, "fuzz.st", &f, &err) != 0) {
        if (strncmp(err.msg, "fuzz.st: ", 9) != 0 || strchr(err.msg, '\n')) abort();
        return 0;
    }
    uint64_t prev_end = 0;
    for (int64_t i = 0; i < st_tensor_count(f); i++) {
        const st_tensor *t = st_tensor_at(f, i);
        if (st_find_tensor(f, t->name) != t) abort();
        if (t->begin < prev_end) abort();
        prev_end = t->begin + t->nbytes;
        const uint8_t *d = t->data;
        if (d < data || t->nbytes > size || d - data > (ptrdiff_t)(size - t->nbytes)) abort();
        if (t->nbytes) sink += d[0] + d[t->nbytes - 1];
    }
    sink += st_metadata(f, "format") != NULL;
    st_close(f);
    return 0;
}
