/* arch.h - the architecture hook table: everything that differs between
 * model families, as one const table per family (src/model/arch/<name>.c)
 * listed in the registry (registry.c). Not a public header: the loader
 * (model.c) and the generic forward context (forward.c) call the hooks; the
 * rest of the program sees only model.h.
 *
 * Invariants: tables are const and live for the whole program (no
 * registration at run time, no mutable state); a family may serve several
 * general.architecture names (names[]); required hooks are never NULL,
 * optional ones may be (NULL = not supported, the generic API then answers
 * "nothing": no effect / zero counts).
 *
 * Call order: model_load reads general.architecture, finds the table, reads
 * the keys every family shares (model.c: sizes, heads, key/value lengths,
 * rope and its scaling, rms epsilon) into model_hparams, then calls
 * read_hparams for the family's own keys and checks; the tokenizer and the
 * shared tensors (token_embd, output_norm, output or tied, rope_freqs)
 * follow, then load for the family's layers (it sets m->layers, and
 * m->active_bytes / m->active_params). model_free calls release (which must
 * accept a partly loaded model). */
#ifndef CINFER_MODEL_ARCH_ARCH_H
#define CINFER_MODEL_ARCH_ARCH_H

#include "model/model_internal.h"

#define MODEL_ARCH_MAX_NAMES 4

typedef struct model_arch {
    /* general.architecture values served (NULL-terminated) */
    const char *names[MODEL_ARCH_MAX_NAMES + 1];

    /* ---- required ---- */
    /* The family's keys and checks after the shared ones (hp->arch is set;
     * hp->v_head_dim holds attention.value_length, default key_length). */
    int (*read_hparams)(const gguf_file *f, model_hparams *hp, cf_err *err);
    /* Per-layer tensors: presence, shapes, types, prepared weights. */
    int (*load)(model *m, cf_err *err);
    /* Frees what load made (called on partly loaded models too). */
    void (*release)(model *m);
    /* KV layer groups, in block order (model.h). */
    void (*kv_layout)(const model *m, kv_spec *out);
    /* One token's KV in words, for logs: "(... x 4 B[, kind])". */
    void (*kv_describe)(const model *m, char *buf, size_t n);
    /* The family's hyper-parameters into the model fingerprint (model.h's
     * writer); returns nonzero on success. */
    int (*fingerprint)(const model_hparams *hp, model_fp_writer *w);
    /* Forward pass over a ragged batch (model.h contract; the batch is
     * already checked by forward.c). The context is the family's own. */
    void *(*fwd_create)(const model *m, thread_pool *pool, int32_t max_tokens, int32_t max_ctx, int32_t block_tokens,
                        cf_err *err);
    void (*fwd_free)(void *fc);
    int (*forward)(void *fc, const fwd_batch *b, float *logits, cf_err *err);

    /* ---- optional (NULL: not supported) ---- */
    /* KV element types other than f32 the forward pass stores and reads
     * (bit 1 << kv_dtype; 0: f32 only), and the setter a context gets one
     * by, right after fwd_create (model_kv_layout_as describes the layout). */
    unsigned kv_dtypes;
    void (*fwd_set_kv_dtype)(void *fc, kv_dtype dt);
    /* fwd_ctx_set_mla_expand_min: a batch-variant faster prefill form. */
    void (*fwd_set_expand_min)(void *fc, int32_t min_tokens);
    /* fwd_ctx_set_attn_prec: the attention kernels' dot-product precision. */
    void (*fwd_set_attn_prec)(void *fc, attn_prec prec);
    /* fwd_ctx_expert_load: MoE routing counters (model.h). */
    int (*expert_load)(const void *fc, int32_t layer, uint64_t *counts, int32_t n);
    /* fwd_ctx_set_moe_executor / fwd_ctx_expert_ffn: expert parallelism (model.h). */
    int (*fwd_set_moe_executor)(void *fc, const cinfer_moe_executor *x, cf_err *err);
    int (*expert_ffn)(void *fc, int32_t layer, int32_t expert, const float *x, int32_t n, float *y, cf_err *err);
    /* model_mtp_info_get / model_mtp_forward (model.h "MTP"); the forward hook must honour
     * fwd_batch.n_hidden whenever mtp_info reports a hidden width. */
    void (*mtp_info)(const model *m, int32_t block_tokens, model_mtp_info *out);
    int (*mtp_forward)(void *fc, int32_t mtp, const fwd_batch *b, const float *h, float *logits, cf_err *err);
    /* model_dspark_info_get / model_dspark_head (model.h "DSpark"); the head's arguments are checked. */
    void (*dspark_info)(const model *m, model_dspark_info *out);
    void (*dspark_head)(void *fc, const float *state, int32_t prev, float *logits, float *conf);
    /* model_expert_acquire / _release / _resident: routed-expert residency
     * (a partial expert set, model_load_opts.expert_keep, which load honours
     * when these exist). */
    int (*expert_acquire)(model *m, int32_t layer, int32_t expert, cf_err *err);
    void (*expert_release)(model *m, int32_t layer, int32_t expert);
    bool (*expert_resident)(const model *m, int32_t layer, int32_t expert);
    /* model_expert_raw_size / _read_raw / _acquire_raw: an expert's file
     * bytes moved between processes (absent: not offered). */
    size_t (*expert_raw_size)(const model *m, int32_t layer);
    int (*expert_read_raw)(const model *m, int32_t layer, int32_t expert, void *dst, size_t n, cf_err *err);
    int (*expert_acquire_raw)(model *m, int32_t layer, int32_t expert, const void *raw, size_t n, cf_err *err);
} model_arch;

/* The table serving general.architecture `name`, or NULL. */
const model_arch *model_arch_find(const char *name);
/* "llama, qwen2, deepseek2": every served name, for error messages. */
void model_arch_list(char *buf, size_t n);

/* The families (one per file in src/model/arch/). */
extern const model_arch model_arch_llama; /* llama.c */
extern const model_arch model_arch_deepseek2; /* deepseek2.c */
extern const model_arch model_arch_gemma2; /* gemma2.c */
extern const model_arch model_arch_deepseek4; /* deepseek4.c */

#endif
