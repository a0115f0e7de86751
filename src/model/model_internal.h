/* model_internal.h - the model struct shared by the loader (model.c), the
 * architecture families (arch/) and the generic forward context
 * (forward.c), and the loader and forward helpers they share. Not a public
 * header. The struct holds what every family has (embeddings, output head,
 * rope frequency factors, size counters); per-layer weights are the
 * family's own type behind `layers`. */
#ifndef CINFER_MODEL_INTERNAL_H
#define CINFER_MODEL_INTERNAL_H

#include <stdatomic.h>

#include "model/model.h"

struct model_arch; /* arch/arch.h */
struct wcache; /* weights_cache.h */

/* Weight memory bookkeeping (model_memory.c). */
typedef struct model_region {
    void *p;
    size_t n;
} model_region;

typedef struct model_mem {
    uint8_t *tstate; /* per GGUF tensor: unread, read in place from the mapping, or copied */
    model_region *owned; /* anonymous chunks holding weight buffers (repacked, stacked, dequantized); owned */
    size_t n_owned, cap_owned;
    void *chunk; /* the chunk buffers are carved from now (model_wbuf) */
    size_t chunk_used, chunk_cap;
    void *scratch; /* the load's scratch for stacked rows (model_prepare_stacked), or NULL */
    size_t scratch_len;
    uint64_t owned_bytes, released_bytes, cache_bytes;
    struct wcache *wc; /* the weights cache the buffers come from, or NULL; owned */
    model_weights_source source;
    char cache_note[320]; /* why a cache file was rejected or no cache is used; "" */
    bool locked;
} model_mem;

struct cinfer_model {
    gguf_file *gguf;
    model_hparams hp;
    const gguf_tensor *tok_embd; /* rows looked up by token (any computable type) */
    const float *output_norm; /* a weight buffer (model_wbuf) or the file's f32 tensor */
    kern_weight output; /* LM head (token_embd when tied) */
    const struct model_arch *arch; /* the family's hooks (arch/arch.h) */
    void *layers; /* the family's per-layer weights (its own type; its release frees) */
    const float *rope_freq_factors; /* rope_dim/2 divisors (llama3 rope_freqs, the file's f32 tensor) or NULL */
    uint64_t weight_bytes, n_params;
    uint64_t active_bytes; /* per-token decode bytes (MoE: used experts only) */
    uint64_t active_params; /* per-token parameters (MoE: used experts only) */
    uint64_t routed_expert_bytes; /* weight bytes of one routed expert of one MoE layer (0: no experts) */
    model_mem mem; /* where the weights live (model_memory.c) */
    /* partial expert set (model_load_opts.expert_keep): NULL = every routed expert */
    bool (*expert_keep)(void *ctx, const model_hparams *hp, int32_t layer, int32_t expert);
    void *expert_keep_ctx;
    bool experts_partial; /* the family honoured expert_keep */
    atomic_uint_fast64_t expert_resident_bytes; /* routed expert weight bytes resident now */
    model_progress_fn progress; /* NULL or called after each layer is prepared (load only) */
    void *progress_ctx;
};

/* Loader helpers (model.c), shared with the architecture files. Keys are
 * "<arch>.<suffix>"; a missing optional key leaves *out unchanged. Matrices
 * and vectors add to m->weight_bytes / m->n_params. */
int model_key_i32(const gguf_file *f, const char *arch, const char *suffix, int32_t *out, bool required, cf_err *err);
int model_key_f32(const gguf_file *f, const char *arch, const char *suffix, float *out, cf_err *err);
/* Every hyper-parameter of the file (shared keys, then the family's
 * read_hparams with its checks) without loading a tensor; for the
 * hyper-parameter fuzzer (tests/fuzz/fuzz_hparams.c). */
int model_read_hparams(const gguf_file *f, model_hparams *hp, cf_err *err);
/* Finds a tensor and checks shape [ne0, ne1] (ne1 = 0: 1-D) and type. */
/* "tensor NAME has type IQ4_XS, which cinfer cannot run yet; supported: ..." into err; returns -1. */
int model_unsupported_type(const gguf_tensor *t, cf_err *err);
const gguf_tensor *model_need_tensor(const gguf_file *f, const char *name, int64_t ne0, int64_t ne1, bool required,
                                     cf_err *err, int *failed);
/* A vector as f32: an aligned f32 tensor is read in place from the file,
 * anything else is converted into a weight buffer (model_wbuf). NULL with err. */
const float *model_tensor_f32(model *m, const gguf_tensor *t, int64_t n, cf_err *err);
int model_load_vector(model *m, const char *name, int64_t n, bool required, const float **out, cf_err *err);
/* The 128 x 128 block scales of an FP8 (DT_F8_B128) matrix `name` of [in, out]
 * (n_expert slices of it for an expert stack): the F32 tensor name_scale_inv
 * of [ceil(in/128), ceil(out/128), n_expert]; NULL and err if absent or misshapen. */
const float *model_fp8_scales(const gguf_file *f, const char *name, int64_t in, int64_t out, int64_t n_expert,
                              cf_err *err);
int model_load_matrix(model *m, const char *name, int64_t in, int64_t out_rows, kern_weight *w, cf_err *err);

/* Weight memory (model_memory.c). Every buffer the loader makes to hold
 * weights (a repacked matrix, stacked rows, an f32 conversion) comes from
 * model_wbuf and belongs to the model (model_mem_free releases it; the
 * family's release hook does not free it). Per tensor the loader records
 * whether it was copied (model_mem_copied: its file pages are released now,
 * so it must not be read from the mapping again; a read would only fault the
 * pages back in) or is read in place at run time (model_mem_mapped).
 * model_mem_drop_pages releases the resident pages of a tensor that stays in
 * use but is read sparsely (the embedding table after its repack as a tied
 * LM head). */
int model_mem_init(model *m, cf_err *err);
void model_mem_free(model *m);
void model_mem_copied(model *m, const gguf_tensor *t);
void model_mem_mapped(model *m, const gguf_tensor *t);
void model_mem_drop_pages(model *m, const gguf_tensor *t);
/* Frees what only the load needed (the stacking scratch); model.c calls it
 * when the weights are loaded. */
void model_mem_end_load(model *m);
/* One weight buffer of `bytes` (64-byte aligned) made from the tensor(s)
 * `name`, of kind WC_KIND_* (format/wcache_format.h). *filled: it already
 * holds its bytes (read from the weights cache; the caller must not read the
 * source tensors); else the caller fills it. NULL with err on failure. The
 * loader asks for buffers in the same order on every load of a file. */
void *model_wbuf(model *m, const char *name, uint32_t kind, size_t bytes, bool *filled, cf_err *err);
/* Prepares w from data (GGUF layout) for the active kernels, the repacked
 * copy (if the kernels repack) in a model_wbuf buffer. */
int model_prepare_weight(model *m, const char *name, kern_weight *w, dtype type, const void *data, int64_t n, int64_t k,
                         cf_err *err);
/* Prepares w from the rows of `count` GGUF matrices of one type stacked in
 * order (parts[i]: part_bytes[i] bytes; n rows of k in all). The stacked
 * copy is a model_wbuf buffer when the kernels read it in place, else a
 * temporary; with a cache hit nothing is read from parts. */
int model_prepare_stacked(model *m, const char *name, kern_weight *w, dtype type, const void *const *parts,
                          const size_t *part_bytes, int count, int64_t n, int64_t k, cf_err *err);

/* Shared by the forward passes (forward.c): x[t] = token_embd row of
 * tokens[t]; logits of the batch's out_rows from the final hidden rows x
 * (tmp, tmp2: n_out x n_embd scratch). */
void model_embed(const model *m, const int32_t *tokens, int32_t n, float *x);
void model_logits(const model *m, kern_ctx *kc, thread_pool *pool, const float *x, const fwd_batch *b, float *tmp,
                  float *tmp2, float *logits);

#endif
