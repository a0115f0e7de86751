/* kernels.h - the compute kernels the model forward passes call.
 *
 * Weights are row-major W[n][k] (GGUF ne[0] = k is contiguous), any computable
 * dtype. Activations are f32. Every entry point dispatches on cpu_isa_active()
 * to an AVX-512, AVX2 or scalar implementation that agree with a float64
 * reference to within quantisation error (tests/unit/tensor).
 *
 * Quantized weights (Q8_0, Q4_0) are multiplied as llama.cpp does: the
 * activations are first quantized to Q8_0 blocks (once per call, into the
 * context's scratch) and integer dot products (VNNI where present) are
 * scaled per block. Q4_K, Q5_K and Q6_K under AVX-512 / AVX2 likewise, with activations
 * quantized per 256 elements (llama.cpp's Q8_K); under AVX-512 Q4_K, Q5_K and IQ4_XS are
 * repacked into 16-row K-quant panels and multiplied by one tiled VNNI kernel for every m
 * (kernels_kqpack.c, kernels_kqp_avx512.c), while Q6_K stays on its GGUF rows with one VNNI
 * row kernel for every m (kernels_q6k_avx512.c: its decode streams about twice as fast
 * as on the panels); the other K-quants and legacy types
 * (Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, and off AVX-512 IQ4_NL, IQ4_XS, MXFP4) are dequantized
 * exactly to f32 per row chunk and multiplied with f32 FMA. F32/F16 weights use f32 FMA (F16 converted on the fly),
 * BF16 weights use f32 FMA after exact widening (vdpbf16ps, which would round
 * the activations to bf16, measured slower on the target CPU and is not used).
 * FP8 e4m3 (DT_F8_B128) decode is the exception: on AVX-512 CPUs with VBMI and
 * BF16 its codes become bf16 by table lookup and vdpbf16ps multiplies them with
 * the activations rounded to bf16 (kernels_fp8_avx512.c), for every m (so a
 * row's result does not depend on its batch); other CPUs stay in f32
 * (kernels_fp8.c). IQ4_NL / MXFP4 under AVX-512 multiply Q8_0
 * activations with VNNI for every m (kernels_iq4_avx512.c).
 *
 * A weight is always multiplied by the kernels of the ISA it was prepared for
 * (kern_weight.isa), whatever cpu_isa_active() says later.
 *
 * Threads: kern_matmul hands out chunks of 32 output rows over the context's
 * pool (or, when n is too small to feed every thread, splits activation rows);
 * products under ~256K multiply-adds run on the calling thread. Nothing here
 * allocates after kern_ctx_create. Implementation map: kernels.c (dispatch,
 * packing, threading), kernels_{scalar,avx2,avx512}.c, kernels_fp8*.c, kernels_iq4_avx512.c,
 * kernels_kq_avx2.c, kernels_kqpack.c + kernels_kqp_avx512.c (K-quant panels), kernels_q6k_avx512.c,
 * kernels_rows_avx512.c (the row-pointer primitives), kernels_impl.h. */
#ifndef CINFER_TENSOR_KERNELS_H
#define CINFER_TENSOR_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/threadpool.h"
#include "tensor/dtype.h"

typedef struct kern_ctx kern_ctx;

/* A weight matrix prepared for the active ISA: W[n][k] of `type`. Preparing
 * may repack it into an owned, kernel-friendly layout (e.g. rows interleaved
 * for VNNI tiles); then `data` is no longer read by kern_matmul. Prepare
 * weights after the ISA is chosen (cpu_isa_force before prepare in tests).
 * Who frees: kern_weight_release frees only what prepare allocated. */
typedef struct kern_weight {
    dtype type;
    int64_t n, k;
    const void *data; /* original GGUF layout, not owned; NULL when only the packed copy exists */
    const void *packed; /* repacked copy or NULL */
    size_t packed_bytes; /* bytes at packed (0 when NULL) */
    bool owns_packed; /* packed was allocated by kern_weight_prepare (release frees it) */
    int layout; /* kernel-private layout tag */
    int isa; /* cpu_isa it was prepared for */
    /* DT_F8_B128 only: scale[(o / 128) * scale_cols + j / 128] multiplies the
     * e4m3 value W[o][j]; scale_cols = ceil(k / 128). Not owned. */
    const float *scale;
    int64_t scale_cols;
} kern_weight;

int kern_weight_prepare(kern_weight *w, dtype type, const void *data, int64_t n, int64_t k, cf_err *err);
void kern_weight_release(kern_weight *w);
/* FP8 e4m3 [n][k] (row-major bytes) with 128 x 128 block scales [ceil(n/128)][ceil(k/128)]
 * (both stay owned by the caller): multiplied directly, dequantized in registers. */
int kern_weight_prepare_fp8(kern_weight *w, const uint8_t *data, const float *scale, int64_t n, int64_t k, cf_err *err);
/* The value of one e4m3 (OCP FP8, "fn": no infinities, S.1111.111 is NaN) byte. */
float kern_fp8_e4m3_to_f32(uint8_t v);

/* Version of the repacked layouts (the KL_P16 panels of kernels_impl.h).
 * Repacked bytes are stored on disk by the model's weights cache, keyed by
 * this number: bump it whenever a pack_* function or a panel layout changes. */
#define KERN_PACK_LAYOUT_VERSION 1u

/* Bytes of the repacked copy that preparing a [n][k] `type` matrix for the
 * active ISA makes; 0 when the kernels read the GGUF layout in place. */
size_t kern_weight_packed_size(dtype type, int64_t n, int64_t k);
/* kern_weight_prepare with caller-owned memory: `packed` (64-byte aligned,
 * kern_weight_packed_size bytes; NULL when that size is 0) becomes the
 * weight's repacked copy. filled: it already holds the repacked bytes (read
 * back from a cache), so nothing is packed and `data` may be NULL; else it
 * is packed from data. Release never frees it. */
int kern_weight_prepare_into(kern_weight *w, dtype type, const void *data, int64_t n, int64_t k, void *packed,
                             bool filled, cf_err *err);

/* Memory that kernels stream through (repacked weights): 2 MiB aligned and
 * advised for transparent huge pages when at least 2 MiB, else 64-byte
 * aligned. *len_out: the bytes allocated. Freed with free(). */
void *kern_alloc_stream(size_t bytes, size_t *len_out);

/* Scratch sized for activations of up to max_rows x max_k elements. */
kern_ctx *kern_ctx_create(thread_pool *pool, int64_t max_rows, int64_t max_k);
void kern_ctx_destroy(kern_ctx *c);

/* y[i*n + o] = sum_j W[o][j] * x[i*k + j] for i < m, o < n.
 * m <= max_rows, k <= max_k of the context (asserted). Multithreaded over the
 * pool; uses the context's scratch, so one caller per context at a time. */
void kern_matmul(kern_ctx *c, const kern_weight *w, const float *x, int64_t m, float *y);

/* Single-threaded dispatched vector primitives (used by attention etc.). */
float kern_dot_f32(const float *a, const float *b, int64_t n);
void kern_axpy_f32(float a, const float *x, float *y, int64_t n); /* y += a*x */
/* Several vectors against rows read in place through pointers (attention over
 * gathered keys), register-tiled; each result is bit-identical to the loop of
 * single primitives it replaces, on every ISA:
 *   out[i*os + j] = kern_dot_f32(q + i*qs, rows[j], d)       i < nq, j < nr
 *   for j = 0 .. nr-1 in order: kern_axpy_f32(p[h*ps + j], rows[j], y + h*ys, d)   h < nh */
void kern_dot_rows_f32(const float *q, int64_t qs, int nq, const float *const *rows, int nr, int64_t d, float *out,
                       int64_t os);
void kern_axpy_rows_f32(const float *p, int64_t ps, int nh, const float *const *rows, int nr, int64_t d, float *y,
                        int64_t ys);

/* Measures sustained read bandwidth (bytes/s) with the pool's threads over a
 * buffer of `bytes` (use >> last-level cache). For roofline reporting. */
double kern_measure_read_bandwidth(thread_pool *pool, size_t bytes);

/* The same probe timed two ways (bytes/s, 0 when bytes < 256 or out of
 * memory): wall, by the wall clock; cpu, by process CPU seconds divided by
 * the pool's threads (the rate with every thread on its own core), which on
 * a shared, oversubscribed machine does not count other processes' turns.
 * The best of 10 passes for each. */
typedef struct kern_bandwidth {
    double wall, cpu;
} kern_bandwidth;
kern_bandwidth kern_measure_read_bandwidth_both(thread_pool *pool, size_t bytes);

#endif
