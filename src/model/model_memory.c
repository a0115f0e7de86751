/* model_memory.c - where a loaded model's weights live: the weight buffers
 * the loader makes (model_wbuf: anonymous memory the model owns, or slots of
 * the weights cache's shared mapping), which GGUF tensors were copied into
 * them and had their file pages released, which are read in place from the
 * mapping, the footprint report (model_memory_stats) and mlock
 * (model_lock_memory). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "model/model_internal.h"
#include "model/weights_cache.h"

enum { MT_UNREAD = 0, MT_MAPPED = 1, MT_COPIED = 2 };

int model_mem_init(model *m, cf_err *err) {
    int64_t n = gguf_tensor_count(m->gguf);
    m->mem.tstate = calloc(n > 0 ? (size_t)n : 1, 1);
    return m->mem.tstate ? 0 : cf_fail(err, "out of memory");
}

/* munlock of a range that is not locked is harmless, so this undoes a partial lock too. */
static void unlock_all(model *m) {
    model_mem *mm = &m->mem;
    for (size_t i = 0; i < mm->n_owned; i++) munlock(mm->owned[i].p, mm->owned[i].n);
    if (mm->wc) {
        void *p;
        size_t n;
        wcache_region(mm->wc, &p, &n);
        if (n) munlock(p, n);
    }
    if (m->gguf && mm->tstate)
        for (int64_t i = 0; i < gguf_tensor_count(m->gguf); i++) {
            const gguf_tensor *t = gguf_tensor_at(m->gguf, i);
            if (mm->tstate[i] == MT_MAPPED && t->nbytes) munlock(t->data, t->nbytes);
        }
    mm->locked = false;
}

void model_mem_free(model *m) {
    model_mem *mm = &m->mem;
    model_mem_end_load(m);
    if (mm->locked) unlock_all(m);
    for (size_t i = 0; i < mm->n_owned; i++) free(mm->owned[i].p);
    free(mm->owned);
    wcache_close(mm->wc);
    free(mm->tstate);
    memset(mm, 0, sizeof *mm);
}

static int mem_owned(model *m, void *p, size_t n, cf_err *err) {
    model_mem *mm = &m->mem;
    if (mm->n_owned == mm->cap_owned) {
        size_t cap = mm->cap_owned ? 2 * mm->cap_owned : 64;
        model_region *r = realloc(mm->owned, cap * sizeof *r);
        if (!r) return cf_fail(err, "out of memory");
        mm->owned = r;
        mm->cap_owned = cap;
    }
    mm->owned[mm->n_owned++] = (model_region){.p = p, .n = n};
    return 0;
}

void model_mem_copied(model *m, const gguf_tensor *t) {
    int64_t i = gguf_tensor_index(m->gguf, t);
    if (m->mem.tstate[i] != MT_UNREAD) return;
    m->mem.tstate[i] = MT_COPIED;
    m->mem.released_bytes += gguf_release_range(m->gguf, t->data, t->nbytes);
}

void model_mem_mapped(model *m, const gguf_tensor *t) { m->mem.tstate[gguf_tensor_index(m->gguf, t)] = MT_MAPPED; }

void model_mem_drop_pages(model *m, const gguf_tensor *t) {
    size_t n = gguf_release_range(m->gguf, t->data, t->nbytes);
    if (m->mem.tstate[gguf_tensor_index(m->gguf, t)] != MT_COPIED) m->mem.released_bytes += n; /* else counted */
}

/* Anonymous weight buffers are carved one after another out of chunks of
 * MODEL_ARENA_CHUNK (2 MiB aligned, huge-page advised): a buffer per
 * allocation would round each one up to whole huge pages, resident once
 * touched (~1 MiB per matrix). The unused tail of a chunk is never touched. */
#define MODEL_ARENA_CHUNK ((size_t)64 << 20)

static void *arena_take(model *m, const char *name, size_t bytes, cf_err *err) {
    model_mem *mm = &m->mem;
    size_t need = (bytes + 63) / 64 * 64;
    if (!mm->chunk || need > mm->chunk_cap - mm->chunk_used) {
        size_t len;
        void *p = kern_alloc_stream(need > MODEL_ARENA_CHUNK ? need : MODEL_ARENA_CHUNK, &len);
        if (!p) return cf_fail(err, "out of memory for %s (%zu bytes)", name, bytes), NULL;
        if (mem_owned(m, p, len, err)) {
            free(p);
            return NULL;
        }
        mm->chunk = p;
        mm->chunk_used = 0;
        mm->chunk_cap = len;
    }
    char *r = (char *)mm->chunk + mm->chunk_used;
    mm->chunk_used += need;
    mm->owned_bytes += need;
    return r;
}

void *model_wbuf(model *m, const char *name, uint32_t kind, size_t bytes, bool *filled, cf_err *err) {
    *filled = false;
    if (m->mem.wc) {
        void *p = wcache_take(m->mem.wc, name, kind, bytes, filled, err);
        if (p) m->mem.cache_bytes += bytes;
        return p;
    }
    return arena_take(m, name, bytes, err);
}

int model_prepare_weight(model *m, const char *name, kern_weight *w, dtype type, const void *data, int64_t n, int64_t k,
                         cf_err *err) {
    size_t bytes = kern_weight_packed_size(type, n, k);
    void *packed = NULL;
    bool filled = false;
    if (bytes && !(packed = model_wbuf(m, name, WC_KIND_PACKED, bytes, &filled, err))) return -1;
    return kern_weight_prepare_into(w, type, data, n, k, packed, filled, err);
}

/* The load's scratch for stacked rows the kernels repack: one anonymous
 * mapping, grown as needed and reused (no page faults per matrix), unmapped
 * when the load ends (model_mem_end_load), so its pages surely go back to
 * the system (a malloc'd buffer could stay in the heap). */
static void *load_scratch(model *m, size_t bytes) {
    model_mem *mm = &m->mem;
    if (bytes <= mm->scratch_len) return mm->scratch;
    model_mem_end_load(m);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    (void)madvise(p, bytes, MADV_HUGEPAGE); /* advisory: fewer faults */
    mm->scratch = p;
    mm->scratch_len = bytes;
    return p;
}

void model_mem_end_load(model *m) {
    if (m->mem.scratch) munmap(m->mem.scratch, m->mem.scratch_len);
    m->mem.scratch = NULL;
    m->mem.scratch_len = 0;
}

static void stack_parts(char *dst, const void *const *parts, const size_t *part_bytes, int count) {
    for (int i = 0; i < count; i++) {
        memcpy(dst, parts[i], part_bytes[i]);
        dst += part_bytes[i];
    }
}

int model_prepare_stacked(model *m, const char *name, kern_weight *w, dtype type, const void *const *parts,
                          const size_t *part_bytes, int count, int64_t n, int64_t k, cf_err *err) {
    size_t raw_bytes = 0;
    for (int i = 0; i < count; i++) raw_bytes += part_bytes[i];
    bool filled = false;
    size_t packed_bytes = kern_weight_packed_size(type, n, k);
    if (!packed_bytes) { /* the kernels read the stacked rows: they are the weight */
        char *raw = model_wbuf(m, name, WC_KIND_STACKED, raw_bytes, &filled, err);
        if (!raw) return -1;
        if (!filled) stack_parts(raw, parts, part_bytes, count);
        return kern_weight_prepare_into(w, type, raw, n, k, NULL, false, err);
    }
    void *packed = model_wbuf(m, name, WC_KIND_PACKED, packed_bytes, &filled, err);
    if (!packed) return -1;
    if (filled) return kern_weight_prepare_into(w, type, NULL, n, k, packed, true, err);
    char *raw = load_scratch(m, raw_bytes); /* only the repack reads it */
    if (!raw) return cf_fail(err, "out of memory stacking %s", name);
    stack_parts(raw, parts, part_bytes, count);
    int r = kern_weight_prepare_into(w, type, raw, n, k, packed, false, err);
    w->data = NULL; /* freed: the packed copy is the weight */
    return r;
}

void model_memory_stats(const model *m, model_memory *out) {
    memset(out, 0, sizeof *out);
    out->owned_bytes = m->mem.owned_bytes;
    out->cache_bytes = m->mem.cache_bytes;
    out->released_bytes = m->mem.released_bytes;
    out->source = m->mem.source;
    out->cache_path = m->mem.wc ? wcache_path(m->mem.wc) : NULL;
    out->cache_note = m->mem.cache_note;
    out->cache_seconds = m->mem.wc ? wcache_seconds(m->mem.wc) : 0.0;
    out->file_mapped = gguf_is_mapped(m->gguf);
    out->locked = m->mem.locked;
    for (int64_t i = 0; i < gguf_tensor_count(m->gguf); i++)
        if (m->mem.tstate[i] == MT_MAPPED) out->mapped_bytes += gguf_tensor_at(m->gguf, i)->nbytes;
}

void model_trim_memory(const model *m) {
    for (int64_t i = 0; i < gguf_tensor_count(m->gguf); i++) {
        const gguf_tensor *t = gguf_tensor_at(m->gguf, i);
        if (m->mem.tstate[i] == MT_COPIED) gguf_release_range(m->gguf, t->data, t->nbytes);
    }
}

static int lock_fail(model *m, uint64_t bytes, int e, cf_err *err) {
    unlock_all(m);
    struct rlimit rl;
    char lim[48] = "unknown";
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
        if (rl.rlim_cur == RLIM_INFINITY) snprintf(lim, sizeof lim, "unlimited");
        else snprintf(lim, sizeof lim, "%llu KiB", (unsigned long long)rl.rlim_cur / 1024);
    }
    return cf_fail(err,
                   "--mlock: cannot lock %.1f MiB of weights in memory: %s (RLIMIT_MEMLOCK %s; raise it with "
                   "`ulimit -l` or LimitMEMLOCK=, or run without --mlock)",
                   (double)bytes / (1 << 20), strerror(e), lim);
}

int model_lock_memory(model *m, cf_err *err) {
    model_mem *mm = &m->mem;
    if (mm->locked) return 0;
    model_memory st;
    model_memory_stats(m, &st);
    uint64_t total = st.owned_bytes + st.cache_bytes + st.mapped_bytes;
    mm->locked = true;
    for (size_t i = 0; i < mm->n_owned; i++)
        if (mlock(mm->owned[i].p, mm->owned[i].n) != 0) return lock_fail(m, total, errno, err);
    if (mm->wc) {
        void *p;
        size_t n;
        wcache_region(mm->wc, &p, &n);
        if (n && mlock(p, n) != 0) return lock_fail(m, total, errno, err);
    }
    for (int64_t i = 0; i < gguf_tensor_count(m->gguf); i++) {
        const gguf_tensor *t = gguf_tensor_at(m->gguf, i);
        if (mm->tstate[i] == MT_MAPPED && t->nbytes && mlock(t->data, t->nbytes) != 0)
            return lock_fail(m, total, errno, err);
    }
    return 0;
}
