/* kernels_impl.h - private contract between the kernel dispatcher (kernels.c)
 * and the per-ISA kernel files (kernels_scalar.c, kernels_avx2.c, kernels_avx512.c).
 *
 * Weight layouts (kern_weight.layout):
 *   KL_ROWS  original GGUF row-major layout (`data`); scalar and AVX2 kernels,
 *            and every ISA for the dequantized types (kernels_dequant.c).
 *   KL_P16   AVX-512 panels of 16 output rows (n padded to a multiple of 16 with
 *            zero rows), panel-major, stored in `packed`:
 *     F32  : float  [k][16]            (element (j, r) = W[16p+r][j])
 *     F16  : uint16 [k][16]
 *     BF16 : uint16 [kp/2][16][2]      kp = k rounded up to even, zero padded;
 *                                      one zmm = 16 rows x 2 consecutive k
 *     Q8_0 : panel = fp16 d[nb][16] (padded to 64 bytes), then per k-block b
 *            512 bytes uint8 [8 groups][16 rows][4] = qs + 128 (so vpdpbusd can
 *            take the weights as its unsigned operand); 64-byte aligned
 *     Q4_0 : panel = fp16 d[nb][16] (padded to 64 bytes), then per k-block b
 *            4 x 64 bytes: byte (j*64 + r*4 + t) = original qs[r][4j+t], i.e. the
 *            low nibble is element 4j+t, the high nibble element 16+4j+t (0..15)
 *     K-quants (Q4_K, Q5_K, IQ4_XS; not Q6_K; kernels_kqpack.c, kernels_kqp_avx512.c):
 *            panel = per 256-element super-block B, KQP_SB(t) bytes:
 *            [0,32) fp16 d[16 rows]; Q4_K/Q5_K: [32,64) fp16 dmin[16] (else 0)
 *            [64,..) sub-block scales as pairs u8/int8 [s/2][16 rows][s%2]
 *                    (Q4_K/Q5_K sc 0..63; IQ4_XS ls-32: 4 pairs); Q4_K/Q5_K
 *                    then the mins, same shape
 *            KQP_QS: quant nibbles per sub-block s of S = 32 elements,
 *                    S/8 vectors of 64 bytes [16 rows][4]: vector g byte (r,t) =
 *                    low 4 bits of element S*s+4g+t | those of S*s+S/2+4g+t << 4
 *                    (IQ4_XS: table indexes)
 *            Q5_K: then per sub-block 64 bytes [16 rows][4]: bit 2g+h = bit 4 of the
 *                    element in vector g, nibble h
 *   Every panel starts 64-byte aligned (packed is aligned, panel sizes are
 *   multiples of 64, except F16: multiple of 32, loaded as 32-byte halves).
 *
 * Quantized activations (kern_qact, in the context scratch), for k % 32 == 0:
 *   q[i*k + j]    int8 Q8_0 quants of x[i][j] (ggml rounding: half away from 0)
 *   d[i*nb + b]   float scale, already rounded through fp16 like a block_q8_0
 *   corr[i*nb+b]  -off * sum_j q (off = 128 for Q8_0 weights, 8 for Q4_0), the
 *                 correction for the unsigned weight operand of the VNNI/maddubs
 *                 dot products. (Unused by kernels that do signed products.)
 * Q8_K-style activations (Q4_K, Q5_K, Q6_K weights under AVX-512 and AVX2, IQ4_XS under AVX-512;
 * kern_quantize_row_q8k),
 * same arrays, k % 256 == 0:
 *   q[i*k + j]    int8, one scale per 256 (amax/127, f32, not fp16-rounded)
 *   d[i*nb + B]   that scale of super-block B (only the first k/256 entries)
 *   corr[i*nb+b]  +sum_j q of 32-block b (no offset)
 *   s16, s32      (AVX-512 only, KL_P16 K-quant panels) the same sums as int16 per
 *                 16 and per 32 elements: s16[i*(k/16)+b], s32[i*(k/32)+b]
 *                 (kern_q8k_sums16), so pairs of them are one vpdpwssd operand
 *                 (the panel kernel reads s32; s16 is the step to it)
 */
#ifndef CINFER_TENSOR_KERNELS_IMPL_H
#define CINFER_TENSOR_KERNELS_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/kernels.h"

enum { KL_ROWS = 0, KL_P16 = 1 };

/* K-quant KL_P16 panels: bytes per super-block, offset of the nibbles in it,
 * and of Q5_K's high bits (right after the nibbles). */
static inline size_t kqp_qs_off(dtype t) { return t == DT_IQ4_XS ? 192 : 320; }
static inline size_t kqp_sb_bytes(dtype t) { return kqp_qs_off(t) + 2048 + (t == DT_Q5_K ? 512 : 0); }
/* True for the types packed into K-quant panels under AVX-512. Not Q6_K: it stays
 * on the GGUF rows (kernels_q6k_avx512.c), whose decode is about twice as fast. */
static inline int kqp_type(dtype t) { return t == DT_Q4_K || t == DT_Q5_K || t == DT_IQ4_XS; }

/* Bytes of one KL_P16 panel (16 rows x k) and offset of the quants in it. */
static inline size_t kp16_scale_bytes(int64_t k) { return ((size_t)(k / 32) * 32 + 63) / 64 * 64; }
static inline size_t kp16_panel_bytes(dtype t, int64_t k) {
    size_t kk = (size_t)k;
    switch (t) {
    case DT_F32: return kk * 64;
    case DT_F16: return kk * 32;
    case DT_BF16: return (kk + 1) / 2 * 64;
    case DT_Q8_0: return kp16_scale_bytes(k) + kk / 32 * 512;
    case DT_Q4_0: return kp16_scale_bytes(k) + kk / 32 * 256;
    case DT_Q4_K:
    case DT_Q5_K:
    case DT_IQ4_XS: return kk / 256 * kqp_sb_bytes(t);
    default: return 0; /* dequantized types are never packed */
    }
    return 0;
}

typedef struct kern_qact {
    int8_t *q;
    float *d;
    int32_t *corr;
    int16_t *s16, *s32;
} kern_qact;

/* Everything one matmul call needs; built by kern_matmul, read-only in kernels. */
typedef struct kern_mm_args {
    const kern_weight *w;
    const float *x; /* f32 activations [m][k] */
    kern_qact qa; /* quantized activations (quantized weight types) */
    /* Float weight types with m > 1 when the ISA sets x_group = G: activations
     * packed G rows interleaved, xp[(g*k + j)*G + t] = x[(g*G + t)*k + j], rows
     * past m zero; so a register tile broadcasts from one contiguous stream. */
    const float *xp;
    /* FP8 (every m) on CPUs with kern_ops.fp8_rows_dot: the activation
     * rows in bf16, in kernels_fp8_avx512.c's group order (kern_fp8_prep_x),
     * row i at xb + i * xb_stride; NULL otherwise. */
    const uint16_t *xb;
    int64_t xb_stride;
    int64_t m, n, k;
    float *y; /* [m][n] */
} kern_mm_args;

typedef struct kern_ops {
    /* Output rows are given to mm() in ranges aligned to this many rows. */
    int row_block;
    /* Rows per packed float-activation group (see xp); 0 = never packed. When
     * activation rows are split over threads, splits are multiples of m_block. */
    int x_group, m_block;
    float (*dot_f32)(const float *a, const float *b, int64_t n);
    void (*axpy_f32)(float a, const float *x, float *y, int64_t n);
    /* Quantizes one activation row of k (k % 32 == 0) to the kern_qact format. */
    void (*quantize_row)(const float *x, int64_t k, int8_t *q, float *d, int32_t *corr, int32_t off);
    /* y rows [i0, i1) x output rows [o0, o1). */
    void (*mm)(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1);
    /* Converts n e4m3 bytes to floats (NaN codes give NaN). */
    void (*fp8_to_f32)(const uint8_t *src, float *dst, int64_t n);
    /* One weight row of k e4m3 bytes against x, each 128-wide block's sum times
     * scale[block]: sum_b scale[b] * sum_{j in b} e4m3(w[j]) * x[j], converted in
     * registers (the decode path: no buffer). */
    float (*fp8_row_dot)(const uint8_t *w, const float *x, const float *scale, int64_t k);
    /* Optional (NULL: none), used only where cpu_has_avx512_vbmi_bf16(): the
     * bf16 decode path. fp8_prep_x writes x's whole 64-element groups to xb;
     * fp8_rows_dot dots one weight row with nr (1 or 2) activation rows. */
    void (*fp8_prep_x)(const float *x, int64_t k, uint16_t *xb);
    void (*fp8_rows_dot)(const uint8_t *w, const uint16_t *xb, int64_t xbs, const float *x, int64_t xs,
                         const float *scale, int64_t k, int nr, float *out);
    /* Reads `bytes` (multiple of 256, 64-byte aligned) and returns a checksum. */
    uint64_t (*read_sum)(const void *buf, size_t bytes);
} kern_ops;

extern const kern_ops kern_ops_scalar;
extern const kern_ops kern_ops_avx2;
extern const kern_ops kern_ops_avx512;

/* Shared scalar helpers (kernels_scalar.c). */
void kern_quantize_row_scalar(const float *x, int64_t k, int8_t *q, float *d, int32_t *corr, int32_t off);
void kern_mm_scalar(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1);
/* kernels_dequant.c: mm for kq_is_dequant_type weights (KL_ROWS, any ISA),
 * with the ISA's f32 dot product. */
void kern_mm_dequant(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1,
                     float (*dot)(const float *x, const float *y, int64_t n));
/* kernels_fp8.c: mm for DT_F8_B128 (KL_ROWS, any ISA): for every activation
 * row each weight row is dotted in registers (fp8_row_dot, or fp8_rows_dot on
 * bf16 activations two rows at a time); each block's sum is scaled by its
 * block scale. */
void kern_mm_fp8(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1, const kern_ops *ops);
void kern_fp8_to_f32_scalar(const uint8_t *src, float *dst, int64_t n);
float kern_fp8_row_dot_scalar(const uint8_t *w, const float *x, const float *scale, int64_t k);
/* kernels_fp8_avx512.c: the bf16 FP8 decode path (kern_ops.fp8_prep_x / fp8_rows_dot). */
void kern_fp8_prep_x_avx512(const float *x, int64_t k, uint16_t *xb);
void kern_fp8_rows_dot_avx512(const uint8_t *w, const uint16_t *xb, int64_t xbs, const float *x, int64_t xs,
                              const float *scale, int64_t k, int nr, float *out);
/* kernels_iq4_avx512.c: IQ4_NL / MXFP4 x Q8_0 activations (a->qa, off
 * 128) with VNNI, for every m: one path, so a row's result does not depend on
 * its batch (other ISAs dequantize per chunk). */
static inline int kern_iq4_int_type(dtype t) { return t == DT_IQ4_NL || t == DT_MXFP4; }
void kern_mm_iq4_avx512(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1);
/* kernels_dequant.c: the Q8_K-style activation quantizer (see above). */
void kern_quantize_row_q8k(const float *x, int64_t k, int8_t *q, float *d, int32_t *sums);
/* kernels_kqpack.c: repacks n GGUF rows of a kqp_type into K-quant KL_P16 panels;
 * the int16 activation sums of one Q8_K-style row (s16, s32 above). */
void kern_pack_kq(dtype t, const uint8_t *src, uint8_t *dst, int64_t n, int64_t k);
void kern_q8k_sums16(const int8_t *q, int64_t k, int16_t *s16, int16_t *s32);
/* kernels_kqp_avx512.c: K-quant KL_P16 panels x the Q8_K-style activations in a->qa
 * (with s16 / s32), register-tiled VNNI, every m. */
void kern_mm_kqp_avx512(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1);
/* kernels_q6k_avx512.c: Q6_K GGUF rows (KL_ROWS) x the Q8_K-style activations in a->qa
 * (AVX-512 VNNI, every m). */
void kern_mm_q6k_int_avx512(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1);
/* kernels_amx.c: Q8_0 / Q4_0 KL_P16 panels x the Q8_0 activations in a->qa with AMX-INT8 tiles
 * (cpu_amx_active(); bitwise the results of the AVX-512 VNNI tiles). */
void kern_mm_q_amx(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1);
/* The same for AVX2 (vpmaddubsw / vpmaddwd), Q4_K, Q5_K and Q6_K. */
void kern_mm_kq_int_avx2(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1);

/* kernels_rows_avx512.c: kern_dot_rows_f32 / kern_axpy_rows_f32 under AVX-512. */
void kern_dot_rows_f32_avx512(const float *q, int64_t qs, int nq, const float *const *rows, int nr, int64_t d,
                              float *out, int64_t os);
void kern_axpy_rows_f32_avx512(const float *p, int64_t ps, int nh, const float *const *rows, int nr, int64_t d,
                               float *y, int64_t ys);

#endif
