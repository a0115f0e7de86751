/* ds4_llama_logits.c - the llama.cpp side of the deepseek4 oracle: loads a
 * GGUF with libllama (CPU, F32 KV cache, no flash attention), decodes the
 * prompt token ids in one batch with logits for every position, then
 * greedy-decodes n_gen tokens one at a time, and writes (little-endian):
 *   int32 n_vocab, n_prompt, n_gen; float logits[n_prompt][n_vocab];
 *   int32 greedy[n_gen]; float step_logits[n_gen][n_vocab]
 * (step_logits[s] are the logits greedy[s] was picked from). Built outside
 * the repository by tests/oracles/ds4_llama_oracle.py against
 * /work/llama/build/bin/libllama.so; never part of the cinfer build.
 * Usage: ds4_llama_logits MODEL.gguf OUT.bin N_GEN TOKEN... */
#include <stdio.h>
#include <stdlib.h>

#include "llama.h"

static int argmax(const float *v, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL.gguf OUT.bin N_GEN TOKEN...\n", argv[0]);
        return 2;
    }
    int n_gen = atoi(argv[3]), n_prompt = argc - 4;
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) return fprintf(stderr, "cannot load %s\n", argv[1]), 1;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n_prompt + n_gen + 16);
    cp.n_batch = cp.n_ubatch = (uint32_t)(n_prompt + 16);
    cp.n_seq_max = 1;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.n_threads = cp.n_threads_batch = 2;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) return fprintf(stderr, "cannot create a context\n"), 1;
    int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    FILE *out = fopen(argv[2], "wb");
    if (!out) return fprintf(stderr, "cannot write %s\n", argv[2]), 1;
    int32_t hdr[3] = {n_vocab, n_prompt, n_gen};
    fwrite(hdr, sizeof hdr, 1, out);
    struct llama_batch b = llama_batch_init(n_prompt, 0, 1);
    for (int i = 0; i < n_prompt; i++) {
        b.token[i] = atoi(argv[4 + i]);
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = n_prompt;
    if (llama_decode(ctx, b)) return fprintf(stderr, "prompt decode failed\n"), 1;
    for (int i = 0; i < n_prompt; i++) fwrite(llama_get_logits_ith(ctx, i), sizeof(float), (size_t)n_vocab, out);
    float *steps = malloc(sizeof(float) * (size_t)n_vocab * (size_t)n_gen);
    int32_t *greedy = malloc(sizeof(int32_t) * (size_t)n_gen);
    const float *last = llama_get_logits_ith(ctx, n_prompt - 1);
    for (int s = 0; s < n_gen; s++) {
        for (int v = 0; v < n_vocab; v++) steps[(size_t)s * n_vocab + v] = last[v];
        greedy[s] = argmax(last, n_vocab);
        if (s + 1 == n_gen) break;
        struct llama_batch one = llama_batch_get_one(&greedy[s], 1);
        if (llama_decode(ctx, one)) return fprintf(stderr, "decode step %d failed\n", s), 1;
        last = llama_get_logits_ith(ctx, -1);
    }
    fwrite(greedy, sizeof(int32_t), (size_t)n_gen, out);
    fwrite(steps, sizeof(float), (size_t)n_vocab * (size_t)n_gen, out);
    fclose(out);
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
