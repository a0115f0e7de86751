/* testutil_ds4.h - the tiny deepseek4 shape that the engine and model tests
 * build with `cinfer mkmodel` (dim 64, 4 heads of 64, q/o LoRA 32 in 2 output
 * groups, window 16, an indexer of 64-wide heads, one hash layer, swiglu
 * clamp 10, a shared expert, the stories260K vocabulary). A test overrides
 * what it varies (layers, compress ratios, indexer heads and top-k, experts,
 * MTP blocks, dtype, seed) on the returned value. Header-only. */
#ifndef CINFER_TESTS_TESTUTIL_DS4_H
#define CINFER_TESTS_TESTUTIL_DS4_H

#include "model/mkmodel.h"
#include "testutil.h"

/* layers main blocks with compress ratios `ratios` (one per block, then one
 * per MTP block), 8 experts of which 2 are used, indexer 8 heads top-6, F32,
 * seed `seed`. */
static inline mkmodel_opts tu_ds4_tiny(int layers, const char *ratios, uint64_t seed) {
    return (mkmodel_opts){.arch = "deepseek4",
                          .dim = 64,
                          .layers = layers,
                          .heads = 4,
                          .ffn = 64,
                          .head_dim = 64,
                          .qk_rope = 16,
                          .q_lora = 32,
                          .o_groups = 2,
                          .o_lora = 32,
                          .ratios = ratios,
                          .window = 16,
                          .index_heads = 8,
                          .index_dim = 64,
                          .index_topk = 6,
                          .experts = 8,
                          .experts_used = 2,
                          .expert_ffn = 32,
                          .shared_experts = 1,
                          .hash_layers = 1,
                          .swiglu_limit = 10.0f,
                          .type = DT_F32,
                          .seed = seed,
                          .vocab_from = shared_path("models/stories260K.gguf")};
}

#endif
