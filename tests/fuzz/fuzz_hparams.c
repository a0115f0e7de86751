/* fuzz_hparams.c - libFuzzer harness for the model hyper-parameter reader
 * (model_read_hparams: the keys every family shares, then the family's own
 * keys and consistency checks; deepseek4's compress_ratios, indexer,
 * hyper-connection and MoE keys above all). Every input goes through
 * gguf_open_memory(); when it parses, the reader must return 0 or -1 with a
 * one-line message, never crash or read out of bounds; on success the
 * values it promises (positive sizes, ratios in {0, 4, 128}) are checked.
 * Seed corpus: tests/fuzz/corpus/hparams/ (keys-only GGUFs of tiny
 * deepseek4, deepseek2 and llama models):
 *   CC=clang cmake -S . -B build-fuzz -DCINFER_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
 *   cmake --build build-fuzz --target fuzz_hparams
 *   ./build-fuzz/fuzz_hparams -max_total_time=60 tests/fuzz/corpus/hparams */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "model/model_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file *f = NULL;
    cf_err err;
    if (gguf_open_memory(data, size, "fuzz", &f, &err)) return 0;
    model_hparams hp;
    memset(&err, 0, sizeof err);
    int rc = model_read_hparams(f, &hp, &err);
    if (rc != 0) {
        if (!err.msg[0] || strchr(err.msg, '\n')) abort();
    } else {
        if (hp.n_embd <= 0 || hp.n_layer <= 0 || hp.n_head <= 0 || hp.head_dim <= 0) abort();
        if (!strcmp(hp.arch, "deepseek4"))
            for (int32_t l = 0; l < hp.n_layer + hp.ds4_n_mtp; l++)
                if (hp.ds4_ratio[l] != 0 && hp.ds4_ratio[l] != 4 && hp.ds4_ratio[l] != 128) abort();
    }
    gguf_close(f);
    return 0;
}
