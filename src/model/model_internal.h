/* model_internal.h - the model struct shared by the loader (model.c,
 * arch_deepseek2.c) and the forward passes (forward_llama.c,
 * forward_deepseek2.c), and the loader helpers they share. Not a public
 * header. */
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

struct ds2_layer; /* model_deepseek2.h */

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
    uint64_t active_bytes;              /* per-token decode bytes (MoE: used experts only) */
    uint64_t active_params;             /* per-token parameters (MoE: used experts only) */
    bool is_ds2;                        /* deepseek2: ds2_layers instead of layers */
    struct ds2_layer *ds2_layers;
    model_progress_fn progress;         /* NULL or called after each layer is prepared (load only) */
    void *progress_ctx;
};

/* Loader helpers (model.c), shared with the architecture files. Keys are
 * "<arch>.<suffix>"; a missing optional key leaves *out unchanged. Matrices
 * and vectors add to m->weight_bytes / m->n_params. */
int model_key_i32(const gguf_file *f, const char *arch, const char *suffix, int32_t *out, bool required,
                  cf_err *err);
int model_key_f32(const gguf_file *f, const char *arch, const char *suffix, float *out, cf_err *err);
/* Finds a tensor and checks shape [ne0, ne1] (ne1 = 0: 1-D) and type. */
/* "tensor NAME has type Q4_K, which cinfer cannot run yet; supported: ..." into err; returns -1. */
int model_unsupported_type(const gguf_tensor *t, cf_err *err);
const gguf_tensor *model_need_tensor(const gguf_file *f, const char *name, int64_t ne0, int64_t ne1, bool required,
                                     cf_err *err, int *failed);
float *model_vector_f32(const gguf_tensor *t);
int model_load_vector(model *m, const char *name, int64_t n, bool required, float **out, cf_err *err);
int model_load_matrix(model *m, const char *name, int64_t in, int64_t out_rows, kern_weight *w, cf_err *err);

/* deepseek2 (arch_deepseek2.c): extra keys after the common ones, the
 * per-layer weights, and their release. */
int ds2_read_hparams(const gguf_file *f, model_hparams *hp, cf_err *err);
int ds2_load_layers(model *m, cf_err *err);
void ds2_free_layers(model *m);

#endif
