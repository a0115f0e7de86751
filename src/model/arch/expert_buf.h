/* expert_buf.h - memory of routed experts that a rank holds one by one (expert parallelism,
 * model_load_opts.expert_keep), shared by deepseek2_experts.c and deepseek4_experts.c: each
 * expert matrix's prepared copy in an anonymous mapping of its own, so releasing the expert gives
 * its pages back to the system at once (freed heap blocks of this size would stay in the
 * allocator's arenas, and a rank's memory would grow with every rebalance); expert e's slice of an
 * [in, out, n_expert] stack in the file mapping; freeing an array of per-expert weights. */
#ifndef CINFER_MODEL_ARCH_EXPERT_BUF_H
#define CINFER_MODEL_ARCH_EXPERT_BUF_H

#include <stddef.h>
#include <stdint.h>

#include "format/gguf.h"
#include "tensor/kernels.h"

/* A zeroed mapping of `bytes` (huge pages advised from 2 MiB), or NULL. */
void *expert_buf_alloc(size_t bytes);
/* Unmaps a buffer of expert_buf_alloc (NULL is a no-op). */
void expert_buf_free(void *p, size_t bytes);
/* Bytes of one expert's matrix in stack t ([in, out, n_expert]). */
size_t expert_slice_bytes(const gguf_tensor *t);
/* Expert e's matrix in stack t's file data. */
const char *expert_slice(const gguf_tensor *t, int32_t e);
/* Releases ws[0..n) and frees the array (NULL is a no-op). */
void expert_weights_free(kern_weight *ws, int32_t n);

#endif
