/* expert_buf.h - memory of routed experts that a rank holds one by one (expert parallelism,
 * model_load_opts.expert_keep), shared by deepseek2_experts.c and deepseek4_experts.c: each
 * expert matrix's prepared copy in an anonymous mapping of its own, so releasing the expert gives
 * its pages back to the system at once (freed heap blocks of this size would stay in the
 * allocator's arenas, and a rank's memory would grow with every rebalance); expert e's slice of an
 * [in, out, n_expert] stack in the file mapping; freeing an array of per-expert weights; one
 * expert's memory record and its residency protocol (prepare, then publish with a release store;
 * retire with a release store before dropping), with the model's resident-bytes total. */
#ifndef CINFER_MODEL_ARCH_EXPERT_BUF_H
#define CINFER_MODEL_ARCH_EXPERT_BUF_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/gguf.h"
#include "tensor/kernels.h"

/* One routed expert's memory in a partial expert set. */
typedef struct expert_mem {
    void *buf[3]; /* owned prepared copies (mmap'd), NULL where read in place */
    size_t buf_len[3]; /* their mapping lengths */
    uint64_t bytes; /* weight bytes it takes while resident (copies + in-place slices) */
    atomic_bool resident; /* its kern_weights are ready (release store after preparing) */
} expert_mem;

/* Whether em's weights are ready to use (acquire load). */
bool expert_mem_resident(const expert_mem *em);
/* em's weights are prepared: adds its bytes to *total and marks it resident. */
void expert_mem_publish(expert_mem *em, atomic_uint_fast64_t *total);
/* Marks em not resident and takes its bytes off *total; false (nothing done) when it was not
 * resident. The caller drops its memory after a true. */
bool expert_mem_retire(expert_mem *em, atomic_uint_fast64_t *total);

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
