/* expert_buf.c - per-expert mappings and stack slices (see expert_buf.h). */
#include "model/arch/expert_buf.h"

#include <stdlib.h>
#include <sys/mman.h>

#include "tensor/dtype.h"

void *expert_buf_alloc(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    if (bytes >= ((size_t)2 << 20)) (void)madvise(p, bytes, MADV_HUGEPAGE); /* advisory */
    return p;
}

void expert_buf_free(void *p, size_t bytes) {
    if (p) munmap(p, bytes);
}

size_t expert_slice_bytes(const gguf_tensor *t) { return dtype_row_bytes(t->type, t->ne[0]) * (size_t)t->ne[1]; }

const char *expert_slice(const gguf_tensor *t, int32_t e) {
    return (const char *)t->data + expert_slice_bytes(t) * (size_t)e;
}

void expert_weights_free(kern_weight *ws, int32_t n) {
    if (!ws) return;
    for (int32_t e = 0; e < n; e++) kern_weight_release(&ws[e]);
    free(ws);
}

bool expert_mem_resident(const expert_mem *em) { return atomic_load_explicit(&em->resident, memory_order_acquire); }

void expert_mem_publish(expert_mem *em, atomic_uint_fast64_t *total) {
    atomic_fetch_add(total, em->bytes);
    atomic_store_explicit(&em->resident, true, memory_order_release);
}

bool expert_mem_retire(expert_mem *em, atomic_uint_fast64_t *total) {
    if (!expert_mem_resident(em)) return false;
    atomic_store_explicit(&em->resident, false, memory_order_release);
    atomic_fetch_sub(total, em->bytes);
    return true;
}
