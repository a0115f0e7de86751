/* kernels.c - dispatch and orchestration of the compute kernels (kernels.h).
 *
 * Owns: kern_ctx (pool handle + one 64-byte aligned scratch buffer, allocated
 * once, holding the quantized / bf16 activations of the current call), weight
 * preparation (repacking into the KL_P16 panel layouts of kernels_impl.h when
 * prepared under AVX-512), the row/tile split of kern_matmul over the pool, and
 * the read-bandwidth probe.
 * Invariants: kern_matmul never allocates and takes no locks; a weight is always
 * multiplied by the kernels of the ISA it was prepared for (w->isa), so forcing
 * another ISA later cannot mix layouts. The scratch is owned by one caller at a
 * time (one engine thread per context). */
#include "tensor/kernels.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/cpu.h"
#include "base/timeutil.h"
#include "tensor/kernels_impl.h"

struct kern_ctx {
    thread_pool *pool;
    int64_t max_rows, max_k;
    void *scratch;
    size_t scratch_bytes;
};

static const kern_ops *ops_for(int isa) {
    switch (isa) {
    case CPU_ISA_AVX512: return &kern_ops_avx512;
    case CPU_ISA_AVX2: return &kern_ops_avx2;
    default: return &kern_ops_scalar;
    }
}

static const kern_ops *ops_active(void) { return ops_for((int)cpu_isa_active()); }

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* ---- vector primitives ---- */

float kern_dot_f32(const float *a, const float *b, int64_t n) { return ops_active()->dot_f32(a, b, n); }

void kern_axpy_f32(float a, const float *x, float *y, int64_t n) { ops_active()->axpy_f32(a, x, y, n); }

void kern_dot_rows_f32(const float *q, int64_t qs, int nq, const float *const *rows, int nr, int64_t d, float *out,
                       int64_t os) {
    if (cpu_isa_active() == CPU_ISA_AVX512) {
        kern_dot_rows_f32_avx512(q, qs, nq, rows, nr, d, out, os);
        return;
    }
    const kern_ops *ops = ops_active();
    for (int i = 0; i < nq; i++)
        for (int j = 0; j < nr; j++) out[i * os + j] = ops->dot_f32(q + i * qs, rows[j], d);
}

void kern_axpy_rows_f32(const float *p, int64_t ps, int nh, const float *const *rows, int nr, int64_t d, float *y,
                        int64_t ys) {
    if (cpu_isa_active() == CPU_ISA_AVX512) {
        kern_axpy_rows_f32_avx512(p, ps, nh, rows, nr, d, y, ys);
        return;
    }
    const kern_ops *ops = ops_active();
    for (int j = 0; j < nr; j++)
        for (int h = 0; h < nh; h++) ops->axpy_f32(p[h * ps + j], rows[j], y + h * ys, d);
}

/* ---- context ---- */

kern_ctx *kern_ctx_create(thread_pool *pool, int64_t max_rows, int64_t max_k) {
    if (!pool || max_rows <= 0 || max_k <= 0) return NULL;
    kern_ctx *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->pool = pool;
    c->max_rows = max_rows;
    c->max_k = max_k;
    size_t rows = (size_t)max_rows, k32 = round_up((size_t)max_k, 32), nb = k32 / 32;
    /* q, d, corr, then s16 (k/16 int16 = nb * 4 bytes) and s32 (nb * 2 bytes) per row */
    size_t qbytes = round_up(rows * k32, 64) + 3 * round_up(rows * nb * 4, 64) + round_up(rows * nb * 2, 64);
    size_t bbytes = round_up((rows + 15) * (size_t)max_k * 4, 64); /* packed f32 activations, groups <= 16 */
    c->scratch_bytes = qbytes > bbytes ? qbytes : bbytes;
    c->scratch = aligned_alloc(64, c->scratch_bytes);
    if (!c->scratch) {
        free(c);
        return NULL;
    }
    return c;
}

void kern_ctx_destroy(kern_ctx *c) {
    if (!c) return;
    free(c->scratch);
    free(c);
}

/* Carves the kern_qact arrays for m rows of k out of the scratch. */
static kern_qact qact_layout(kern_ctx *c, int64_t m, int64_t k) {
    char *base = c->scratch;
    size_t qb = round_up((size_t)(m * k), 64), sb = round_up((size_t)(m * (k / 32)) * 4, 64);
    kern_qact qa = {(int8_t *)base, (float *)(base + qb), (int32_t *)(base + qb + sb), (int16_t *)(base + qb + 2 * sb),
                    (int16_t *)(base + qb + 3 * sb)};
    return qa;
}

/* ---- weight preparation ---- */

static size_t packed_bytes(dtype t, int64_t n, int64_t k) { return (size_t)(n + 15) / 16 * kp16_panel_bytes(t, k); }

static void pack_f32(const float *src, float *dst, int64_t n, int64_t k) {
    for (int64_t p = 0; p < (n + 15) / 16; p++)
        for (int64_t j = 0; j < k; j++)
            for (int r = 0; r < 16; r++) {
                int64_t o = p * 16 + r;
                dst[(p * k + j) * 16 + r] = o < n ? src[o * k + j] : 0.0f;
            }
}

static void pack_f16(const uint16_t *src, uint16_t *dst, int64_t n, int64_t k) {
    for (int64_t p = 0; p < (n + 15) / 16; p++)
        for (int64_t j = 0; j < k; j++)
            for (int r = 0; r < 16; r++) {
                int64_t o = p * 16 + r;
                dst[(p * k + j) * 16 + r] = o < n ? src[o * k + j] : 0;
            }
}

static void pack_bf16(const uint16_t *src, uint16_t *dst, int64_t n, int64_t k) {
    int64_t kh = (k + 1) / 2;
    for (int64_t p = 0; p < (n + 15) / 16; p++)
        for (int64_t jj = 0; jj < kh; jj++)
            for (int r = 0; r < 16; r++)
                for (int t = 0; t < 2; t++) {
                    int64_t o = p * 16 + r, j = jj * 2 + t;
                    dst[((p * kh + jj) * 16 + r) * 2 + t] = (o < n && j < k) ? src[o * k + j] : 0;
                }
}

/* Q8_0 / Q4_0 panels: scales first, then per block the row-interleaved quants. */
static void pack_q8(const block_q8_0 *src, uint8_t *dst, int64_t n, int64_t k) {
    int64_t nb = k / 32;
    size_t pb = kp16_panel_bytes(DT_Q8_0, k), sb = kp16_scale_bytes(k);
    for (int64_t p = 0; p < (n + 15) / 16; p++) {
        uint16_t *d = (uint16_t *)(dst + p * pb);
        memset(d, 0, sb);
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *qs = dst + p * pb + sb + b * 512;
            for (int r = 0; r < 16; r++) {
                int64_t o = p * 16 + r;
                const block_q8_0 *blk = o < n ? &src[o * nb + b] : NULL;
                d[b * 16 + r] = blk ? blk->d : 0;
                for (int g = 0; g < 8; g++)
                    for (int t = 0; t < 4; t++)
                        qs[g * 64 + r * 4 + t] = (uint8_t)((blk ? blk->qs[g * 4 + t] : 0) + 128);
            }
        }
    }
}

static void pack_q4(const block_q4_0 *src, uint8_t *dst, int64_t n, int64_t k) {
    int64_t nb = k / 32;
    size_t pb = kp16_panel_bytes(DT_Q4_0, k), sb = kp16_scale_bytes(k);
    for (int64_t p = 0; p < (n + 15) / 16; p++) {
        uint16_t *d = (uint16_t *)(dst + p * pb);
        memset(d, 0, sb);
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *qs = dst + p * pb + sb + b * 256;
            for (int r = 0; r < 16; r++) {
                int64_t o = p * 16 + r;
                const block_q4_0 *blk = o < n ? &src[o * nb + b] : NULL;
                d[b * 16 + r] = blk ? blk->d : 0;
                for (int j = 0; j < 4; j++)
                    for (int t = 0; t < 4; t++) qs[j * 64 + r * 4 + t] = blk ? blk->qs[j * 4 + t] : 0x88;
            }
        }
    }
}

static void pack_p16(const kern_weight *w, void *dst) {
    switch (w->type) {
    case DT_F32: pack_f32(w->data, dst, w->n, w->k); break;
    case DT_F16: pack_f16(w->data, dst, w->n, w->k); break;
    case DT_BF16: pack_bf16(w->data, dst, w->n, w->k); break;
    case DT_Q8_0: pack_q8(w->data, dst, w->n, w->k); break;
    case DT_Q4_0: pack_q4(w->data, dst, w->n, w->k); break;
    case DT_Q4_K:
    case DT_Q5_K:
    case DT_IQ4_XS: kern_pack_kq(w->type, w->data, dst, w->n, w->k); break;
    default: break;
    }
}

/* Memory that kernels stream through (packed weights, the bandwidth probe):
 * 2 MiB aligned and advised for transparent huge pages, so a stream crosses
 * few page boundaries (hardware prefetchers stop at 4 KiB pages) and misses
 * the TLB rarely. Freed with free(). */
void *kern_alloc_stream(size_t bytes, size_t *len_out) {
    const size_t huge = (size_t)2 << 20;
    size_t len = bytes >= huge ? round_up(bytes, huge) : round_up(bytes, 64);
    void *p = aligned_alloc(bytes >= huge ? huge : 64, len);
    if (p && bytes >= huge) madvise(p, len, MADV_HUGEPAGE);
    if (len_out) *len_out = p ? len : 0;
    return p;
}

static int check_weight(dtype type, const void *data, int64_t n, int64_t k, cf_err *err) {
    if (!dtype_computable((uint32_t)type))
        return cf_fail(err, "kern_weight_prepare: type %s is not computable", dtype_name((uint32_t)type));
    if (n <= 0 || k <= 0)
        return cf_fail(err, "kern_weight_prepare: bad shape n=%lld k=%lld", (long long)n, (long long)k);
    if (k % dtype_block_elems((uint32_t)type) != 0)
        return cf_fail(err, "kern_weight_prepare: k=%lld is not a multiple of the %s block size", (long long)k,
                       dtype_name((uint32_t)type));
    if (!data) return cf_fail(err, "kern_weight_prepare: NULL data");
    return 0;
}

size_t kern_weight_packed_size(dtype type, int64_t n, int64_t k) {
    if (cpu_isa_active() != CPU_ISA_AVX512 || (kq_is_dequant_type((uint32_t)type) && !kqp_type(type)) || n <= 0 ||
        k <= 0)
        return 0;
    return packed_bytes(type, n, k);
}

static void weight_init(kern_weight *w, dtype type, const void *data, int64_t n, int64_t k) {
    memset(w, 0, sizeof *w);
    w->type = type;
    w->n = n;
    w->k = k;
    w->data = data;
    w->isa = (int)cpu_isa_active();
    w->layout = KL_ROWS;
}

int kern_weight_prepare(kern_weight *w, dtype type, const void *data, int64_t n, int64_t k, cf_err *err) {
    memset(w, 0, sizeof *w);
    if (check_weight(type, data, n, k, err)) return -1;
    weight_init(w, type, data, n, k);
    size_t bytes = kern_weight_packed_size(type, n, k);
    if (!bytes) return 0;
    void *p = kern_alloc_stream(bytes, &w->packed_bytes);
    if (!p)
        return cf_fail(err, "kern_weight_prepare: out of memory repacking %lld x %lld %s", (long long)n, (long long)k,
                       dtype_name((uint32_t)type));
    pack_p16(w, p);
    w->packed = p;
    w->owns_packed = true;
    w->layout = KL_P16;
    return 0;
}

int kern_weight_prepare_into(kern_weight *w, dtype type, const void *data, int64_t n, int64_t k, void *packed,
                             bool filled, cf_err *err) {
    memset(w, 0, sizeof *w);
    size_t bytes = kern_weight_packed_size(type, n, k);
    /* a filled copy needs no source; a check with a stand-in pointer keeps the shape checks */
    if (check_weight(type, filled && bytes ? (const void *)w : data, n, k, err)) return -1;
    if (bytes && (!packed || (uintptr_t)packed % 64))
        return cf_fail(err, "kern_weight_prepare: the repacked copy needs 64-byte aligned memory");
    weight_init(w, type, data, n, k);
    if (!bytes) return 0;
    if (!filled) pack_p16(w, packed);
    w->packed = packed;
    w->packed_bytes = bytes;
    w->layout = KL_P16;
    return 0;
}

int kern_weight_prepare_fp8(kern_weight *w, const uint8_t *data, const float *scale, int64_t n, int64_t k,
                            cf_err *err) {
    memset(w, 0, sizeof *w);
    if (n <= 0 || k <= 0)
        return cf_fail(err, "kern_weight_prepare_fp8: bad shape n=%lld k=%lld", (long long)n, (long long)k);
    if (!data || !scale) return cf_fail(err, "kern_weight_prepare_fp8: NULL data or scales");
    w->type = DT_F8_B128;
    w->n = n;
    w->k = k;
    w->data = data;
    w->scale = scale;
    w->scale_cols = (k + 127) / 128;
    w->isa = (int)cpu_isa_active();
    w->layout = KL_ROWS;
    return 0;
}

void kern_weight_release(kern_weight *w) {
    if (!w) return;
    if (w->owns_packed) free((void *)(uintptr_t)w->packed);
    w->packed = NULL;
    w->packed_bytes = 0;
    w->owns_packed = false;
}

/* ---- matmul ---- */

/* Output rows are handed out dynamically in chunks of this many rows (a
 * multiple of every ISA's row_block), so a thread that gets descheduled or runs
 * slower does not hold up the whole matmul. */
#define MM_CHUNK_ROWS 32
/* Below this many multiply-adds kern_matmul runs on the calling thread only. */
#define MM_INLINE_MACS (1 << 18)
/* Cache blocking of the activation rows: a product with many rows runs as a
 * sequence of row blocks, each multiplied by every output chunk before the
 * next block starts, so a block's (quantized or packed) activations stay in
 * the core's L2 while all weight panels stream past them. Without it each
 * output chunk re-streams all m rows from L3/DRAM, and at m = 4,096 x k = 2,048
 * (8 MiB of int8 rows) the per-row cost doubles. A block holds about this many
 * bytes of activations; its row count is a multiple of MM_M_QUANTUM (the AMX
 * tile height 16 and the AVX-512 float tile height 12 both divide it). Which
 * rows share a block changes no bits: every kernel computes each activation
 * row independently. */
#ifndef MM_M_BLOCK_BYTES /* a build may override it to compare (bench/README.md: a huge value = no blocking) */
#define MM_M_BLOCK_BYTES (512u << 10)
#endif
#define MM_M_QUANTUM 48
_Static_assert(MM_M_QUANTUM % 16 == 0 && MM_M_QUANTUM % 12 == 0, "row blocks start on AMX and float tile rows");

typedef struct mm_job {
    const kern_ops *ops;
    kern_mm_args a;
    int32_t off;
    int q8k; /* activations quantized per 256 (kern_quantize_row_q8k) */
    int64_t m_rows; /* activation rows per cache block (MM_M_BLOCK_BYTES); >= m: one block */
    _Atomic int64_t next_chunk;
} mm_job;

/* Packs float activation group g (x_group rows, zero past m) into xp; writes
 * sequentially, reads the group's rows as parallel streams. */
static void pack_x_group(const mm_job *j, int64_t g) {
    const kern_mm_args *a = &j->a;
    int64_t G = j->ops->x_group, k = a->k, rows = a->m - g * G < G ? a->m - g * G : G;
    const float *src = a->x + g * G * k;
    float *dst = (float *)a->xp + g * k * G;
    for (int64_t jj = 0; jj < k; jj++) {
        float *d = dst + jj * G;
        int64_t t = 0;
        for (; t < rows; t++) d[t] = src[t * k + jj];
        for (; t < G; t++) d[t] = 0.0f;
    }
}

/* Activation preparation over a split of units: activation rows (quantize)
 * or packed groups. */
static int64_t prep_units(const mm_job *j) {
    return j->a.xp ? (j->a.m + j->ops->x_group - 1) / j->ops->x_group : j->a.m;
}

static void prep_range(const mm_job *j, int64_t u0, int64_t u1) {
    const kern_mm_args *a = &j->a;
    int64_t k = a->k, nb = k / 32;
    for (int64_t u = u0; u < u1; u++) {
        if (a->xp) pack_x_group(j, u);
        else if (a->xb) j->ops->fp8_prep_x(a->x + u * k, k, (uint16_t *)(uintptr_t)a->xb + u * a->xb_stride);
        else if (j->q8k) {
            kern_quantize_row_q8k(a->x + u * k, k, a->qa.q + u * k, a->qa.d + u * nb, a->qa.corr + u * nb);
            if (a->w->layout == KL_P16)
                kern_q8k_sums16(a->qa.q + u * k, k, a->qa.s16 + u * (k / 16), a->qa.s32 + u * nb);
        } else j->ops->quantize_row(a->x + u * k, k, a->qa.q + u * k, a->qa.d + u * nb, a->qa.corr + u * nb, j->off);
    }
}

static void prep_task(void *ctx, int ith, int nth) {
    const mm_job *j = ctx;
    long long b, e;
    pool_split(prep_units(j), ith, nth, &b, &e);
    prep_range(j, b, e);
}

/* Hands out output-row chunks from an atomic counter; when there are too few
 * row units to keep every thread busy, splits activation rows statically. */
static void mm_task(void *ctx, int ith, int nth) {
    mm_job *j = ctx;
    const kern_mm_args *a = &j->a;
    int64_t rb = j->ops->row_block, units = (a->n + rb - 1) / rb;
    long long b, e;
    int64_t mb = j->ops->m_block, munits = (a->m + mb - 1) / mb;
    if (units < 2 * nth && munits >= 2 * nth) {
        pool_split(munits, ith, nth, &b, &e);
        int64_t i0 = b * mb, i1 = e * mb < a->m ? e * mb : a->m;
        for (int64_t i = i0; i < i1; i += j->m_rows) /* cache blocks of the thread's rows */
            j->ops->mm(a, 0, a->n, i, i + j->m_rows < i1 ? i + j->m_rows : i1);
        return;
    }
    /* Matrix-vector products are memory streams: each thread first takes one
     * long contiguous run (7/8 of an even share) so the hardware prefetchers
     * see one long stream, then the rest goes out in small dynamic chunks so
     * a slow or descheduled thread is still covered by the others. */
    int64_t head = 0; /* rows in each of the first nth (big) chunks */
    if (a->m <= 2) head = a->n * 7 / 8 / nth / MM_CHUNK_ROWS * MM_CHUNK_ROWS;
    int64_t n_head = head > 0 ? nth : 0, tail0 = n_head * head;
    int64_t nchunks = n_head + (a->n - tail0 + MM_CHUNK_ROWS - 1) / MM_CHUNK_ROWS;
    /* many rows: units are (row block, output chunk), row-block major (MM_M_BLOCK_BYTES) */
    int64_t mblocks = (a->m + j->m_rows - 1) / j->m_rows;
    for (;;) {
        int64_t u = atomic_fetch_add_explicit(&j->next_chunk, 1, memory_order_relaxed);
        if (u >= nchunks * mblocks) break;
        int64_t c = u % nchunks, i0 = u / nchunks * j->m_rows;
        int64_t i1 = i0 + j->m_rows < a->m ? i0 + j->m_rows : a->m;
        int64_t o0, o1;
        if (c < n_head) {
            o0 = c * head;
            o1 = o0 + head;
        } else {
            o0 = tail0 + (c - n_head) * MM_CHUNK_ROWS;
            o1 = o0 + MM_CHUNK_ROWS < a->n ? o0 + MM_CHUNK_ROWS : a->n;
        }
        j->ops->mm(a, o0, o1, i0, i1);
    }
}

/* Activation rows per cache block: about MM_M_BLOCK_BYTES of prepared rows of
 * k elements of elem_bytes each (1: int8 quants, 4: packed f32), at least one
 * MM_M_QUANTUM; m itself when m fits in one block. */
static int64_t mm_block_rows(int64_t k, int64_t elem_bytes, int64_t m) {
    int64_t rows = (int64_t)MM_M_BLOCK_BYTES / (k * elem_bytes) / MM_M_QUANTUM * MM_M_QUANTUM;
    if (rows < MM_M_QUANTUM) rows = MM_M_QUANTUM;
    return rows >= m ? m : rows;
}

void kern_matmul(kern_ctx *c, const kern_weight *w, const float *x, int64_t m, float *y) {
    if (m <= 0) return;
    mm_job j;
    memset(&j, 0, sizeof j);
    j.ops = ops_for(w->isa);
    j.a.w = w;
    j.a.x = x;
    j.a.m = m;
    j.a.n = w->n;
    j.a.k = w->k;
    j.a.y = y;
    int quant = w->type == DT_Q8_0 || w->type == DT_Q4_0 || (w->isa == CPU_ISA_AVX512 && kern_iq4_int_type(w->type));
    j.q8k = ((w->isa == CPU_ISA_AVX512 || w->isa == CPU_ISA_AVX2) &&
             (w->type == DT_Q4_K || w->type == DT_Q5_K || w->type == DT_Q6_K)) ||
            (w->isa == CPU_ISA_AVX512 && w->type == DT_IQ4_XS);
    int prep = 0;
    if (quant || j.q8k) {
        j.a.qa = qact_layout(c, m, w->k);
        j.off = w->type == DT_Q4_0 ? 8 : 128; /* unsigned weight operand offset (Q8_0, IQ4, MXFP4: 128) */
        prep = 1;
    } else if (w->type == DT_F8_B128 && j.ops->fp8_rows_dot && cpu_has_avx512_vbmi_bf16()) {
        /* every m takes this path (rows in pairs), so a row's result does not depend on the batch */
        j.a.xb = c->scratch; /* bf16 activations: 2 * m * k bytes, within the packed-f32 room */
        j.a.xb_stride = (w->k + 63) / 64 * 64;
        prep = 1;
    } else if (j.ops->x_group > 0 && m > 1 && !kq_is_dequant_type((uint32_t)w->type) && w->type != DT_F8_B128) {
        j.a.xp = c->scratch;
        prep = 1;
    }
    j.m_rows = mm_block_rows(w->k, j.a.qa.q ? 1 : 4, m);
    assert(!prep || (m <= c->max_rows && w->k <= c->max_k)); /* caller contract: fits the scratch */
    if (prep) {
        if (m * w->k < 65536 || pool_size(c->pool) == 1) prep_range(&j, 0, prep_units(&j));
        else pool_run(c->pool, prep_task, &j);
    }
    /* Tiny products (a few hundred thousand MACs) cost less than waking the pool. */
    if ((double)m * (double)w->n * (double)w->k < (double)MM_INLINE_MACS) mm_task(&j, 0, 1);
    else pool_run(c->pool, mm_task, &j);
}

/* ---- bandwidth probe ---- */

/* The probe reads the buffer in 256 KiB pieces handed out from an atomic
 * counter, like kern_matmul hands out row chunks, so both see the same
 * scheduling (a briefly descheduled thread does not stall the whole pass). */
#define BW_PIECE (256u << 10)

typedef struct bw_job {
    const kern_ops *ops;
    const char *buf;
    size_t bytes;
    _Atomic size_t next;
    uint64_t sums[64];
} bw_job;

static void bw_task(void *ctx, int ith, int nth) {
    bw_job *j = ctx;
    (void)nth;
    uint64_t s = 0;
    for (;;) {
        size_t off = atomic_fetch_add_explicit(&j->next, BW_PIECE, memory_order_relaxed);
        if (off >= j->bytes) break;
        size_t len = j->bytes - off < BW_PIECE ? j->bytes - off : BW_PIECE;
        s += j->ops->read_sum(j->buf + off, len);
    }
    if (ith < 64) j->sums[ith] = s;
}

double kern_measure_read_bandwidth(thread_pool *pool, size_t bytes) {
    kern_bandwidth bw = kern_measure_read_bandwidth_both(pool, bytes);
    return bw.wall;
}

kern_bandwidth kern_measure_read_bandwidth_both(thread_pool *pool, size_t bytes) {
    kern_bandwidth bw = {0, 0};
    bytes = bytes / 256 * 256;
    if (bytes == 0) return bw;
    char *buf = kern_alloc_stream(bytes, NULL);
    if (!buf) return bw;
    memset(buf, 1, bytes);
    bw_job j = {.ops = ops_active(), .buf = buf, .bytes = bytes};
    double best = 1e30, best_cpu = 1e30;
    for (int rep = 0; rep < 10; rep++) {
        atomic_store_explicit(&j.next, 0, memory_order_relaxed);
        double t0 = time_now(), c0 = time_process_cpu();
        pool_run(pool, bw_task, &j);
        double t = time_now() - t0, c = time_process_cpu() - c0;
        if (t < best) best = t;
        if (c < best_cpu) best_cpu = c;
    }
    volatile uint64_t sink = j.sums[0];
    (void)sink;
    free(buf);
    bw.wall = (double)bytes / best;
    /* CPU seconds per thread: the pass's time with every thread on its own core */
    if (best_cpu > 0) bw.cpu = (double)bytes / (best_cpu / (double)pool_size(pool));
    return bw;
}
