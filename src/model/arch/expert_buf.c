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
