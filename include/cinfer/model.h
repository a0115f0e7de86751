/* cinfer/model.h - a model file opened for inference: the public, read-only
 * view of what src/model loads (hyper-parameters, prepared weights).
 *
 * Ownership: cinfer_model_open() maps the GGUF file, checks every
 * hyper-parameter and tensor, and prepares the weights for the kernel ISA the
 * CPU supports; cinfer_model_close() releases all of it. An open model is
 * immutable and may be shared by any number of threads and engines
 * (cinfer/engine.h), which borrow it: close it only after they are gone.
 *
 * The struct is opaque; strings returned by the getters live as long as the
 * model. This header depends on nothing but the C standard library, so a
 * program can use it with only include/ on its include path. */
#ifndef CINFER_MODEL_H
#define CINFER_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cinfer_model cinfer_model;

typedef struct cinfer_model_options {
    uint32_t flags; /* reserved for load options; must be 0 */
    /* Repacked-weights cache directory, or NULL (none): the first open writes
     * the weights as the kernels want them there, later opens map that file
     * (shared between processes) instead of repacking. A cache that cannot
     * be used is logged and ignored or rebuilt (docs/runtime.md). */
    const char *weights_cache_dir;
} cinfer_model_options;

/* Opens the GGUF model at `path`; opts may be NULL (defaults). On failure
 * returns NULL and writes a one-line message naming the file and the problem
 * into err (may be NULL; truncated to err_len bytes). */
cinfer_model *cinfer_model_open(const char *path, const cinfer_model_options *opts, char *err, size_t err_len);
/* NULL is a no-op. */
void cinfer_model_close(cinfer_model *m);

/* general.architecture, e.g. "llama" or "deepseek2". */
const char *cinfer_model_arch(const cinfer_model *m);
/* Number of parameters (elements of every weight tensor). */
uint64_t cinfer_model_n_params(const cinfer_model *m);
/* Context length the model was trained with (positions). */
int32_t cinfer_model_n_ctx_train(const cinfer_model *m);
/* Tokens in the vocabulary (rows of the embedding). */
int32_t cinfer_model_n_vocab(const cinfer_model *m);
/* Transformer layers. */
int32_t cinfer_model_n_layer(const cinfer_model *m);

/* Expert parallelism seam: an engine given an executor
 * (cinfer_engine_options.moe_executor) routes each MoE layer's tokens itself
 * but hands the routed-expert matrix products to run(), which may compute
 * them anywhere (src/ep: on the MPI ranks that own the experts) and must
 * return them before the layer goes on. Pairs come grouped by expert id
 * (ascending), within an expert in token order: pair i applies expert[i] of
 * `layer` (0-based transformer layer) to x[i] (n_embd floats) and writes the
 * expert's FFN output, unweighted, to y[i]. The engine combines y itself, in
 * a fixed order, so results do not depend on where or in which batch a pair
 * ran. run() returns 0, or -1 with a one-line message in err (the forward
 * pass, and the step, then fail). Called from the engine's forward thread;
 * `self` is the executor's own. */
typedef struct cinfer_moe_executor {
    void *self;
    int (*run)(void *self, int32_t layer, int32_t n_pairs, const int32_t *expert, const float *x, int64_t n_embd,
               float *y, char *err, size_t err_len);
} cinfer_moe_executor;

#ifdef __cplusplus
}
#endif

#endif
