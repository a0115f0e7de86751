/* model_internal.h - the model struct shared by the loader (model.c) and the
 * forward passes (forward_llama.c). Not a public header. */
#ifndef CINFER_MODEL_INTERNAL_H
#define CINFER_MODEL_INTERNAL_H

#include "model/model.h"

typedef struct layer_weights {
    float *attn_norm, *ffn_norm;        /* owned f32 copies */
    float *bq, *bk, *bv;                /* optional biases (qwen2), owned f32 */
    kern_weight wq, wk, wv, wo;
    kern_weight w_gate, w_up, w_down;
    /* When Q/K/V (and gate/up) share a type they are also stacked into one
     * matrix (rows of Q, then K, then V; gate then up), so one matmul reads
     * the layer input once and feeds both threads a bigger, better balanced
     * product. Then the separate weights above are unused (zeroed). */
    bool qkv_fused, gu_fused;
    kern_weight wqkv, w_gu;
    void *qkv_raw, *gu_raw;  /* owned stacked GGUF-layout rows when the kernel did not repack them */
} layer_weights;

struct model {
    gguf_file *gguf;
    tokenizer *tok;
    model_hparams hp;
    const gguf_tensor *tok_embd;        /* rows looked up by token (any computable type) */
    float *output_norm;                 /* owned */
    kern_weight output;                 /* LM head (token_embd when tied) */
    layer_weights *layers;
    float *rope_freq_factors;           /* rope_dim/2 divisors (llama3 rope_freqs) or NULL; owned */
    uint64_t weight_bytes, n_params;
};

#endif
