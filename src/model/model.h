/* model.h - a loaded model: hyper-parameters, prepared weights, and the
 * forward pass over a ragged batch against a paged KV cache.
 *
 * Ownership: model_load() opens (and keeps) the GGUF mapping and prepares
 * every weight matrix for the active kernel ISA (possibly repacking into owned
 * memory); model_free() releases all of it. A model is immutable after load
 * and may be shared by several forward contexts. The model layer sits below
 * text: it reads only the vocabulary size (tokenizer.ggml.tokens); whoever
 * needs the tokenizer loads it from model_get_gguf() (text/tokenizer.h), which
 * stays open as long as the model.
 *
 * KV cache layout (the engine owns the memory; the model only reads and
 * writes it): one block = all layers of `block_tokens` consecutive tokens of
 * one sequence, as one contiguous float array of model_kv_block_floats():
 *   block[layer][K: [n_head_kv * head_dim][token_in_block],
 *                V: [token_in_block][n_head_kv * head_dim]]
 * (K dimension-major so attention reads 16-key tiles in place; V
 * token-major so P.V streams rows)
 * so a block can be copied to / from a persistent store as one object.
 *
 * MLA layers (deepseek2) store instead, per layer and token, the normalized
 * latent and the rotated shared key, token-major:
 *   block[layer][token_in_block][kv_lora_rank | rope_dim]
 * In general a block is the concatenation of the layer groups that
 * model_kv_layout() describes, in order; only the architecture's forward pass
 * knows what the floats mean.
 *
 * Architectures: each family is one hook table under src/model/arch/,
 * registered in src/model/arch/registry.c ('llama' serving llama and qwen2,
 * 'deepseek2', 'deepseek4'); general.architecture picks the table. Nothing outside
 * src/model/arch/ tests which architecture a model is: callers ask for the
 * KV layout, the fingerprint contribution and the optional capabilities
 * below (docs/runtime.md, "Adding an architecture"). */
#ifndef CINFER_MODEL_MODEL_H
#define CINFER_MODEL_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/threadpool.h"
#include "cinfer/model.h"
#include "format/gguf.h"
#include "tensor/attention.h"
#include "tensor/kernels.h"
#include "tensor/kv_dtype.h"

typedef enum { ROPE_NORM = 0, ROPE_NEOX = 2 } rope_mode;
typedef enum { ROPE_SCALING_NONE = 0, ROPE_SCALING_LINEAR, ROPE_SCALING_YARN } rope_scaling;

#define MODEL_MAX_SWA_LAYERS 512 /* layers a window-layer bitmap can describe */
#define DS4_MAX_BLOCKS 512

typedef struct model_hparams {
    char arch[32];
    int32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx_train;
    float rms_eps;
    int32_t rope_dim; /* rotated dims per head (<= head_dim) */
    float rope_base;
    rope_mode rope_mode;
    rope_scaling rope_scaling;
    float rope_factor; /* context extension factor (linear / yarn) */
    int32_t rope_orig_ctx; /* yarn: original training context */
    float yarn_ext_factor, yarn_attn_factor, yarn_beta_fast, yarn_beta_slow;
    bool tied_output; /* LM head is token_embd */
    /* deepseek2 (MLA + MoE; arch/deepseek2.h); all 0 for other architectures.
     * There head_dim = qk_nope_dim + rope_dim (the query/key width) and
     * n_head_kv = n_head; the KV cache holds kv_lora_rank + rope_dim floats
     * per token and layer. */
    int32_t q_lora_rank; /* 0: one attn_q matrix */
    int32_t kv_lora_rank, qk_nope_dim, v_head_dim;
    int32_t n_dense_lead; /* leading layers with a dense FFN (n_ff) */
    int32_t n_expert, n_expert_used, n_expert_shared, n_ff_exp;
    int32_t n_expert_group, n_group_used; /* group-limited routing (0 = off) */
    int32_t expert_gating; /* 1 softmax, 2 sigmoid */
    bool expert_weights_norm;
    float expert_weights_scale;
    float yarn_log_mul; /* kq scale = (attn_factor*(1 + yarn_log_mul*ln factor))^2 / sqrt(head_dim) */
    int32_t n_nextn; /* DeepSeek V3 next-n (MTP) layers after the n_layer main ones (nextn_predict_layers) */
    /* gemma2 (arch/gemma2.c); 0 for other architectures */
    int32_t n_swa; /* window (tokens) of the sliding-window layers */
    float attn_softcap, final_softcap; /* cap * tanh(x / cap) of attention scores / logits */
    float q_scale; /* attention score scale: 1/sqrt(query_pre_attn_scalar) */
    float swa_rope_base; /* rope base of the window layers */
    uint64_t swa_layers[MODEL_MAX_SWA_LAYERS / 64]; /* bit il: layer il is a window layer */
    /* deepseek4 (arch/deepseek4.h); 0 for other architectures. n_layer
     * counts the main blocks only; the ds4_n_mtp MTP blocks follow them in
     * the file. head_dim = v_head_dim = the shared latent KV width. */
    int32_t ds4_n_mtp, ds4_window, ds4_o_groups, ds4_o_lora;
    int32_t ds4_index_heads, ds4_index_dim, ds4_index_topk;
    int32_t ds4_hc, ds4_sinkhorn, ds4_hash_layers;
    float ds4_hc_eps, ds4_compress_rope_base;
    uint8_t ds4_ratio[DS4_MAX_BLOCKS]; /* per block (main, then MTP): 0, 4 or 128 */
} model_hparams;

/* The public cinfer_model (include/cinfer/model.h) is this struct. */
typedef struct cinfer_model model;

int model_load(const char *path, model **out, cf_err *err);
/* Progress of a load, on the loading thread: MODEL_LOAD_VERIFY while a
 * weights cache is verified (done/total in bytes), MODEL_LOAD_LAYERS after
 * each of n_layer layers' weights is prepared (done = 1..total). */
typedef enum { MODEL_LOAD_VERIFY = 0, MODEL_LOAD_LAYERS = 1 } model_load_phase;
typedef void (*model_progress_fn)(void *ctx, model_load_phase phase, int64_t done, int64_t total);
/* model_load, reporting progress to fn (may be NULL). */
int model_load_progress(const char *path, model_progress_fn fn, void *ctx, model **out, cf_err *err);

typedef struct model_load_opts {
    model_progress_fn progress; /* NULL: none */
    void *progress_ctx;
    /* Repacked-weights cache directory (`--weights-cache`), NULL: none. The
     * first load writes the prepared weights there; later loads map them
     * (shared between processes) instead of preparing them
     * (model/weights_cache.h). A cache that cannot be used is logged and
     * the model loads without it (or rebuilds it). */
    const char *weights_cache_dir;
    /* A partial expert set (expert parallelism): when set, only the routed
     * experts keep(ctx, hparams, layer, expert) returns true for are prepared (each
     * in buffers of its own); the others' file pages are never read, and
     * model_expert_acquire adds one later. Honoured by families with
     * per-expert residency (deepseek2; model_experts_partial says so).
     * Refused with weights_cache_dir. NULL: every expert. */
    bool (*expert_keep)(void *ctx, const model_hparams *hp, int32_t layer, int32_t expert);
    void *expert_keep_ctx;
} model_load_opts;
int model_load_with(const char *path, const model_load_opts *o, model **out, cf_err *err);
void model_free(model *m);

const model_hparams *model_get_hparams(const model *m);
const gguf_file *model_get_gguf(const model *m);
/* Bytes of weights one token reads in a decode step: all matrices + one
 * embedding row, counting only expert_used_count routed experts of a MoE
 * layer (the roofline of a single stream). */
uint64_t model_active_weight_bytes(const model *m);
/* Weight bytes of one routed expert of one MoE layer (gate, up, down); 0 without experts. */
uint64_t model_expert_bytes(const model *m);
/* Parameters one token multiplies with (MoE: expert_used_count routed experts). */
uint64_t model_active_params(const model *m);

/* ---- routed-expert residency (a partial expert set, model_load_opts.expert_keep) ----
 * model_expert_acquire prepares expert `expert` of `layer` from the file
 * mapping into buffers of its own (0 if already resident); release frees
 * them and drops its file pages. The caller guarantees that no forward pass
 * or expert FFN uses that expert meanwhile and that one expert is not
 * acquired and released at once; other experts may be in use (a background
 * thread may acquire while the forward passes run). A forward pass that
 * reaches an expert that is not resident fails with a one-line error. */
bool model_experts_partial(const model *m);
bool model_expert_resident(const model *m, int32_t layer, int32_t expert); /* every expert of a full load */
int model_expert_acquire(model *m, int32_t layer, int32_t expert, cf_err *err);
void model_expert_release(model *m, int32_t layer, int32_t expert);
/* Moving an expert between processes (expert parallelism, --ep-weight-source
 * peer): an expert's file bytes, its slices of the layer's expert stacks back
 * to back, are model_expert_raw_size bytes (0: the family does not offer
 * this). model_expert_read_raw copies them out of this process's file
 * mapping (n must be that size); model_expert_acquire_raw makes the expert
 * resident from such bytes (another process's read_raw of the same model)
 * into buffers of its own, never reading the file (same contract as
 * model_expert_acquire otherwise). */
size_t model_expert_raw_size(const model *m, int32_t layer);
int model_expert_read_raw(const model *m, int32_t layer, int32_t expert, void *dst, size_t n, cf_err *err);
int model_expert_acquire_raw(model *m, int32_t layer, int32_t expert, const void *raw, size_t n, cf_err *err);
/* Routed expert weight bytes resident now (a partial set; 0 otherwise). Any thread. */
uint64_t model_expert_resident_bytes(const model *m);
/* Number of parameters (elements of all tensors). */
uint64_t model_n_params(const model *m);

/* ---- weight memory ----
 * After load, a weight matrix the kernels repacked (or rows stacked into one
 * matrix, or a vector converted to f32) lives either in an owned anonymous
 * buffer or, with a weights cache, in the cache file's shared mapping; the
 * file pages of its GGUF bytes are released (MADV_DONTNEED), so its bytes are
 * resident once. Tensors used as they are (embeddings, f32 norms, matrices
 * the active ISA multiplies in place) are read from the model file mapping. */
typedef enum {
    MODEL_WEIGHTS_FILE = 0, /* prepared from the model file at load (no cache) */
    MODEL_WEIGHTS_CACHE_HIT, /* mapped from a valid weights cache file */
    MODEL_WEIGHTS_CACHE_BUILT, /* prepared from the model file and written to the cache (now mapped from it) */
} model_weights_source;

typedef struct model_memory {
    uint64_t owned_bytes; /* anonymous: repacked / stacked / dequantized weight copies (bytes handed out) */
    uint64_t cache_bytes; /* the same, mapped from the weights cache file (shared) */
    uint64_t mapped_bytes; /* tensors read in place from the file mapping */
    uint64_t released_bytes; /* file pages of copied tensors released after load */
    bool file_mapped; /* weights come from an mmap of the file (else an in-memory image) */
    bool locked; /* model_lock_memory succeeded */
    model_weights_source source;
    const char *cache_path; /* the cache file, or NULL (owned by the model) */
    const char *cache_note; /* "" or why an existing cache file was rejected / no cache is used */
    double cache_seconds; /* verifying (hit) or writing (built) the cache */
} model_memory;
void model_memory_stats(const model *m, model_memory *out);
/* Releases again the file pages of the copied tensors, which a later read of
 * the mapping (the prefix-cache fingerprint samples every tensor) faulted back
 * in, possibly a whole large folio per read. Contents never change. */
void model_trim_memory(const model *m);
/* mlock()s the owned weight buffers, the weights cache mapping and the mapped tensors, so they are never
 * paged out. -1 with a one-line error naming RLIMIT_MEMLOCK on failure. */
int model_lock_memory(model *m, cf_err *err);

/* ---- KV layout ----
 * A model's KV block is a short list of layer groups, each with a kind and
 * the floats one token needs in one layer of the group; the engine's pool
 * sizes blocks from it and does not care what the floats mean. */
#define KV_SPEC_MAX_GROUPS 8

typedef enum kv_layer_kind {
    KV_LAYER_FULL = 0, /* K and V per token: 2 * n_head_kv * head_dim floats */
    KV_LAYER_MLA, /* one compressed latent (+ rope part) per token */
    KV_LAYER_WINDOW, /* sliding window: only the last `window` tokens are read; per-sequence ring */
} kv_layer_kind;

typedef struct kv_group_spec {
    kv_layer_kind kind;
    int32_t n_layers; /* layers in this group */
    int32_t token_floats; /* floats one token needs in one layer of the group */
    int32_t window; /* KV_LAYER_WINDOW: window in tokens; else 0 */
    /* Paged groups: 0 or 1 = token_floats per token; r > 1 = token_floats per row, one row per r
     * tokens (e.g. a compressed KV stream), so a block holds block_tokens / r rows of each layer and
     * block_tokens must be a multiple of r (kv_spec_block_multiple). */
    int32_t row_tokens;
} kv_group_spec;

typedef struct kv_spec {
    int32_t n_groups;
    kv_group_spec groups[KV_SPEC_MAX_GROUPS];
    /* The model was trained for SWA bounded replay (DeepSeek V4): servers resume prefix hits without
     * window state by replaying the last window's tokens unless told otherwise (issue 16). */
    bool bounded_replay;
    /* Element type of the K/V rows (tensor/kv_dtype.h); token_floats count 4-byte units of it. */
    kv_dtype dtype;
} kv_spec;

/* Paged groups (FULL, MLA) live in the all-layers blocks: prefix-cacheable,
 * stored. KV_LAYER_WINDOW groups do not: each sequence has one *ring* holding
 * the rows of its last positions for every window layer (the window layer
 * group kind; docs/engine.md "Window layer groups"). A ring is ring_blocks
 * ring blocks of block_tokens rows; ring block i holds, for every window group
 * in layout order and every layer of it, the same per-layer layout a block
 * has (e.g. K dimension-major, V token-major). Position p lives in ring block
 * (p / block_tokens) % ring_blocks, row p % block_tokens: the ring is a block
 * table that wraps. A forward pass over positions [p0, p1] of a sequence
 * writes [p0, p1] and reads [max(0, p0 - window + 1), p1], so the ring needs
 * ring_tokens >= window + (p1 - p0) (kv_ring_tokens): callers cap the tokens
 * of one sequence per pass at the max_chunk the ring was sized for. Rows of a
 * ring are only read after this sequence wrote them (a ring is reused
 * without clearing). */

/* The model's KV layer groups (the architecture's kv_layout hook), f32. */
void model_kv_layout(const model *m, kv_spec *out);
/* KV element types (`--kv-dtype`). 0, or -1 with a one-line reason: the
 * architecture's forward pass cannot store `dt` (only f32 for MLA / DeepSeek
 * V4 layouts), or a row cannot (q8_0 needs head_dim a multiple of 32). */
int model_kv_dtype_check(const model *m, kv_dtype dt, cf_err *err);
/* The layout with K/V rows stored as dt (checked by model_kv_dtype_check):
 * every K and V row of a full or window group takes kv_dtype_row_units(dt,
 * n_head_kv * head_dim) units instead of n_head_kv * head_dim floats, and
 * is token-major (attention.h "Other KV element types"). */
void model_kv_layout_as(const model *m, kv_dtype dt, kv_spec *out);
int64_t model_kv_block_floats_as(const model *m, kv_dtype dt, int block_tokens);
double model_kv_token_bytes_as(const model *m, kv_dtype dt);
/* Floats in one KV block of `block_tokens` tokens: the sum over the layout's
 * paged groups of n_layers * token_floats * block_tokens / row_tokens. */
int64_t model_kv_block_floats(const model *m, int block_tokens);
int64_t kv_spec_paged_block_floats(const kv_spec *s, int32_t block_tokens);
/* Floats of one row of every paged layer (a token's, for per-token groups);
 * 0: the layout has no paged group. */
int64_t kv_spec_paged_token_floats(const kv_spec *s);
/* Tokens a block size must be a multiple of: the least common multiple of
 * the paged groups' row_tokens (1 when every group is per token). */
int32_t kv_spec_block_multiple(const kv_spec *s);
/* Bytes one token needs in the paged groups (f32; may be fractional when
 * rows cover several tokens). */
double model_kv_token_bytes(const model *m);
/* `want` (<= 0: 16) rounded up to the layout's block multiple. */
int32_t model_kv_block_tokens(const model *m, int32_t want);
/* Floats one ring row needs: sum over window groups of n_layers * token_floats. */
int64_t kv_spec_ring_row_floats(const kv_spec *s);
/* Largest window of the layout's window groups; 0: no window group. */
int32_t kv_spec_max_window(const kv_spec *s);
/* Is bounded replay the default resumption for this layout? True when the
 * layout has window groups and declares `bounded_replay` (the model was trained
 * for it: DeepSeek V4, whose long-lived part is compressed rows and short-lived
 * part the rings); false otherwise (gemma2: replay there is an untrained
 * approximation). Decided from the layout, never from the architecture name. */
bool kv_spec_replay_by_default(const kv_spec *s);
/* Tokens a bounded replay recomputes by default: 128 for a replay-by-default
 * layout (DeepSeek's choice), else the largest window. */
int32_t kv_spec_default_replay_tokens(const kv_spec *s);
/* Ring rows for windows up to `window` and passes of up to max_chunk tokens
 * per sequence: window + max_chunk - 1 rounded up to block_tokens (0 when
 * window is 0). */
int32_t kv_ring_tokens(int32_t window, int32_t max_chunk, int32_t block_tokens);
/* A short human description of one token's KV, e.g. "(4 layers x 2 x 8 KV
 * heads x 64 x 4 B)", written into buf (always terminated). */
void model_kv_describe(const model *m, char *buf, size_t n);

/* ---- fingerprint ----
 * The prefix-cache key hashes the model's hyper-parameters; each
 * architecture contributes its own through this writer (little-endian
 * words). write returns nonzero on success, as the hash update does. */
typedef struct model_fp_writer {
    int (*write)(void *ctx, const void *bytes, size_t n);
    void *ctx;
} model_fp_writer;

int model_fp_u32(model_fp_writer *w, uint32_t v);
int model_fp_f32(model_fp_writer *w, float f);
/* Writes the architecture's own hyper-parameters (the hook of hp->arch).
 * Returns nonzero on success, 0 for a failed write or an unknown arch. */
int model_fp_arch_hparams(const model_hparams *hp, model_fp_writer *w);

/* ---- forward pass ---- */

/* One sequence's KV: its block table (pointers to blocks of
 * model_kv_block_floats) and, for a model with window groups, its ring
 * (ring_blocks ring blocks of kv_spec_ring_row_floats * block_tokens floats,
 * contiguous; see "KV layout" above). */
typedef struct fwd_seq {
    float *const *blocks;
    int32_t n_blocks;
    float *ring; /* NULL without window groups */
    int32_t ring_blocks;
    /* Bounded replay (window models; 0: off): window layers attend no key below replay_from (their ring
     * rows there are not this sequence's), and rows of positions below keep_below are not written to the
     * paged groups (cached blocks shared with other sequences: the replay reads them, never rewrites). */
    int32_t replay_from, keep_below;
} fwd_seq;

/* A ragged batch: tokens of several sequences, each at its position. For
 * every sequence, positions in the batch must be consecutive and continue
 * what its cache already holds (the cache holds positions < first pos). */
typedef struct fwd_batch {
    int32_t n_tokens;
    const int32_t *tokens;
    const int32_t *pos;
    const int32_t *seq; /* index into seqs[] per token */
    const fwd_seq *seqs;
    int32_t n_seqs;
    int32_t n_out; /* rows that need logits */
    const int32_t *out_rows; /* their batch indices, ascending */
    /* Optional drafter hidden-state export (speculative decoding, "MTP" below): the
     * model_mtp_hidden_floats-wide hidden state of each of the n_hidden rows hidden_rows
     * (batch indices, ascending) into hidden[n_hidden][...], a caller-owned buffer. 0 / NULL: none
     * (a forward that does not ask does no extra work). */
    int32_t n_hidden;
    const int32_t *hidden_rows;
    float *hidden;
} fwd_batch;

typedef struct fwd_ctx fwd_ctx;

/* Scratch for batches of up to max_tokens tokens whose sequences reach at most
 * max_ctx positions, with KV blocks of block_tokens tokens. */
fwd_ctx *fwd_ctx_create(const model *m, thread_pool *pool, int32_t max_tokens, int32_t max_ctx, int32_t block_tokens,
                        cf_err *err);
/* The same for a cache whose K/V are stored as dt (model_kv_layout_as):
 * fails with model_kv_dtype_check's one-line reason. */
fwd_ctx *fwd_ctx_create_kv(const model *m, thread_pool *pool, int32_t max_tokens, int32_t max_ctx, int32_t block_tokens,
                           kv_dtype dt, cf_err *err);
void fwd_ctx_free(fwd_ctx *c);

/* Runs the batch: writes each token's K/V into its sequence's blocks and the
 * logits of the out_rows into logits[n_out][n_vocab]. Input errors (token
 * ids, positions beyond the block table / max_ctx) return -1 before any work. */
int model_forward(fwd_ctx *c, const fwd_batch *b, float *logits, cf_err *err);

/* MLA (deepseek2) attention form: a sequence with at least `min_tokens`
 * query tokens in a batch uses the expanded form (its cached latents expanded
 * to per-head K/V through attn_kv_b: cheaper for long prompt chunks), fewer
 * use the absorbed form (attention against the latent cache). The two agree
 * to ~1e-6 but not bit for bit, so a batch-invariant caller (the engine,
 * whose chunking and preemption change how many tokens of a sequence share a
 * batch) keeps the default MLA_EXPAND_NEVER: absorbed for every token.
 * Single-sequence sessions (engine/generate.h) use MLA_EXPAND_MIN_PREFILL.
 * min_tokens <= 0 restores the default. Enabling allocates the expansion
 * scratch (K/V for up to 512 positions: longer contexts stay absorbed,
 * where the tiled kernel is faster); if that fails the context stays
 * absorbed (same results, slower prompts). An optional architecture hook:
 * no effect on models whose architecture has none. */
#define MLA_EXPAND_NEVER INT32_MAX
#define MLA_EXPAND_MIN_PREFILL 32
void fwd_ctx_set_mla_expand_min(fwd_ctx *c, int32_t min_tokens);

/* The dot-product precision of the context's attention (tensor/attention.h
 * attn_prec; default ATTN_PREC_F32). Set it before the first forward pass
 * and keep it: a sequence's cached K/V are only reproducible under one
 * precision. An optional architecture hook: no effect on models whose
 * attention does not use kern_attention (deepseek2's MLA). */
void fwd_ctx_set_attn_prec(fwd_ctx *c, attn_prec prec);

/* MoE expert load: tokens routed to each expert of `layer` over the last
 * `window` forward passes of this context (window = MOE_LOAD_WINDOW steps).
 * Writes min(n, n_expert) counts; returns n_expert (0 for a dense layer or a
 * model without experts, -1 for a bad layer). Safe to call from any thread
 * while the context runs (relaxed atomic reads; counts of one call may mix
 * two neighbouring steps). */
#define MOE_LOAD_WINDOW 64
int fwd_ctx_expert_load(const fwd_ctx *c, int32_t layer, uint64_t *counts, int32_t n);

/* Expert parallelism (cinfer/model.h cinfer_moe_executor): later forward
 * passes hand routed-expert products to x (borrowed; NULL: in-process again).
 * Allocates the pair buffers once (max_tokens x experts_used rows). -1 (err)
 * for an architecture without the hook or a model without MoE layers. */
int fwd_ctx_set_moe_executor(fwd_ctx *c, const cinfer_moe_executor *x, cf_err *err);
/* The owner's side: y[i] = FFN of routed expert `expert` of `layer` on x[i],
 * i < n (any n: processed in chunks of the context's scratch); bit-identical
 * to the in-process path for the same row whatever the other rows. Not
 * concurrently with model_forward on the same context. -1 (err) for a bad
 * layer/expert or an architecture without the hook. */
int fwd_ctx_expert_ffn(fwd_ctx *c, int32_t layer, int32_t expert, const float *x, int32_t n, float *y, cf_err *err);

/* ---- MTP: multi-token prediction blocks (speculative decoding drafters) ----
 * Architectures with MTP blocks (deepseek2: DeepSeek V3 next-n layers,
 * blk.N.nextn.*; deepseek4: the V4 MTP block) export a hidden state per row
 * (fwd_batch.n_hidden) and run an MTP block over a batch: for each batch token
 * t_p at position p with h = the hidden state of position p - 1 (the target's,
 * or for chained drafts the MTP block's own exported one), the block predicts
 * the token at p + 1 (logits of the out_rows) and can export its own hidden
 * state (fwd_batch.hidden_rows). Position p's MTP KV lives in the batch's
 * block tables: blocks of model_mtp_info.block_floats floats (one layer),
 * separate from the target's. The hidden state is the architecture's:
 * deepseek2 the final normed hidden state (output_norm; the MTP block's after
 * nextn.shared_head_norm), as llama.cpp and SGLang feed it; deepseek4 the
 * final hyper-connection streams [hc][n_embd] (before the head's collapse;
 * on a model with DSpark tensors the DSpark context, "DSpark" below). */
typedef struct model_mtp_info {
    int32_t n_blocks; /* MTP blocks (0: none) */
    int64_t hidden_floats; /* width of one exported hidden state */
    int64_t block_floats; /* floats of one MTP KV block of block_tokens tokens */
} model_mtp_info;
void model_mtp_info_get(const model *m, int32_t block_tokens, model_mtp_info *out);
/* Runs MTP block `mtp` over b (no window rings; its blocks are MTP KV blocks): h[n_tokens][hidden_floats]
 * are the conditioning hidden states, logits[n_out][n_vocab] the predictions, b->hidden the block's own
 * hidden states (may be NULL). -1 (err) on bad input or a model without that block. */
int model_mtp_forward(fwd_ctx *c, int32_t mtp, const fwd_batch *b, const float *h, float *logits, cf_err *err);

/* ---- DSpark-style block drafter (docs/deepseek4.md "DSpark") ----
 * A model with DSpark tensors (deepseek4: dspark.*) runs its MTP block 0 as
 * the drafter's stage: its hidden export (fwd_batch.n_hidden, same width as
 * above) is then the drafter's context, main_norm(fc([mean over hc of the
 * streams entering each target layer])) copied into every stream, instead of
 * the final streams. A draft block is one model_mtp_forward over block rows
 * (the last committed token, then the noise token) that all take the same
 * context; model_dspark_head then applies the Markov head to each row's base
 * logits and gives the row's confidence, both from the previous block token. */
typedef struct model_dspark_info {
    int32_t block_size; /* rows of a draft block; 0: the model has no DSpark drafter */
    int32_t noise_token; /* the input token of block rows 1.. */
    int32_t rank; /* Markov head rank */
    int32_t n_stages; /* stages in the file (the MTP blocks) */
} model_dspark_info;
void model_dspark_info_get(const model *m, model_dspark_info *out);
/* One block row: logits[n_vocab] += markov_w2 . markov_w1[prev] (in place) and *conf = sigmoid(conf_proj .
 * [mean over hc of state | markov_w1[prev]] + bias), state = the stage's exported hidden state of the row.
 * Runs on c's threads and scratch (not concurrently with a forward on c). -1 (err) for a model without
 * DSpark tensors or prev outside the vocabulary. No allocation. */
int model_dspark_head(fwd_ctx *c, const float *state, int32_t prev, float *logits, float *conf, cf_err *err);

#endif
