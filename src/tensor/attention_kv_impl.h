/* attention_kv_impl.h - the K/V load step of the attention kernels for a
 * cache whose elements are not f32 (attention.h, tensor/kv_dtype.h): per
 * segment, the visible keys and values are decoded once into an f32 tile of
 * the call's scratch, laid out as one f32 block of ATTN_SEG tokens, and the
 * f32 segment (attn_segment) runs on it. Included by attention_impl.h after
 * attn_segment and attn_lo (per ISA: the decoders use F16C / AVX-512 where
 * the file is compiled for them). K rows are decoded and transposed 16 keys
 * at a time (attention_ktile_impl.h); the encoded K and V rows 32 keys
 * ahead are prefetched. Nothing is allocated; nothing beyond one segment is
 * converted. Not a public header. */
#include <stdint.h>
#include <string.h>

#include "tensor/dtype.h"
#include "tensor/kv_dtype.h"
#if defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

typedef uint16_t attn_u16x16 __attribute__((vector_size(32), aligned(1)));
typedef uint32_t attn_u32x16 __attribute__((vector_size(64)));
typedef int8_t attn_i8x16 __attribute__((vector_size(16), aligned(1)));

/* n elements of one encoded row (kv_dtype.h) into floats; exact for bf16
 * and f16 (widening), d * q for q8_0: what kv_dtype_decode_row computes. */
static inline void attn_decode_row(int dt, const uint8_t *src, float *dst, int n) {
    int i = 0;
    if (dt == KV_DTYPE_BF16) {
        for (; i + 16 <= n; i += 16) {
            attn_u16x16 h;
            memcpy(&h, src + 2 * i, sizeof h);
            attn_u32x16 w = __builtin_convertvector(h, attn_u32x16) << 16;
            memcpy(dst + i, &w, sizeof w);
        }
        for (; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = bf16_to_f32(h);
        }
    } else if (dt == KV_DTYPE_F16) {
#if defined(__AVX512F__)
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(dst + i,
                             _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(src + 2 * i))));
#elif defined(__F16C__)
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + 2 * i))));
#endif
        for (; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = fp16_to_f32(h);
        }
    } else { /* q8_0: n is a multiple of 32 */
        for (; i < n; i += QK8_0, src += sizeof(block_q8_0)) {
            uint16_t dh;
            memcpy(&dh, src, 2);
            float d = fp16_to_f32(dh);
            attn_i8x16 q0, q1;
            memcpy(&q0, src + 2, sizeof q0);
            memcpy(&q1, src + 2 + 16, sizeof q1);
            attn_v16 f0 = __builtin_convertvector(q0, attn_v16) * d, f1 = __builtin_convertvector(q1, attn_v16) * d;
            memcpy(dst + i, &f0, sizeof f0);
            memcpy(dst + i + 16, &f1, sizeof f1);
        }
    }
}

#include "tensor/attention_ktile_impl.h" /* attn_load_ktile16: K rows decoded and transposed 16 keys at a time */

/* Keys [k0, s1) of the segment at s0 decoded into tile: K [hd][ATTN_SEG]
 * (dimension-major, as an f32 block), then V [ATTN_SEG][hd]. K lanes from
 * s1 to the next multiple of 32 are zeroed: the score loop reads whole
 * 16-key tiles (their scores are never used). */
static void attn_load_segment(const attn_args *a, int s0, int k0, int s1, float *tile) {
    const int hd = a->head_dim, bt = a->block_tokens;
    float *kt = tile, *vt = tile + (int64_t)hd * ATTN_SEG;
    const int pf_end = a->pos[a->n_tok - 1] + 1;
    const int64_t hbytes = kv_dtype_bytes((kv_dtype)a->kv_dtype, hd);
    for (int j0 = k0; j0 < s1; j0 += 16) { /* k0 - s0 is a multiple of 16 */
        /* the encoded K and V head rows 32 keys on (into the next segment too) */
        for (int j = j0 + 32; j < j0 + 48 && j < pf_end; j++) {
            const float *blk = a->blocks[j / bt];
            int64_t r = (int64_t)(j % bt) * a->row_stride;
            const char *k = (const char *)(blk + a->k_off + r) + a->head_bytes,
                       *v = (const char *)(blk + a->v_off + r) + a->head_bytes;
            for (int64_t o = 0; o < hbytes + 63; o += 64) { /* rows need not start on a line */
                __builtin_prefetch(k + o, 0, 3);
                __builtin_prefetch(v + o, 0, 3);
            }
        }
        attn_load_ktile16(a, j0, s1 - j0 < 16 ? s1 - j0 : 16, kt + (j0 - s0), ATTN_SEG);
    }
    for (int j = k0; j < s1; j++) {
        const float *blk = a->blocks[j / bt];
        int64_t r = (int64_t)(j % bt) * a->row_stride;
        attn_decode_row(a->kv_dtype, (const uint8_t *)(blk + a->v_off + r) + a->head_bytes, vt + (int64_t)(j - s0) * hd,
                        hd);
    }
    int pad = (s1 - s0 + 31) / 32 * 32;
    if (pad > ATTN_SEG) pad = ATTN_SEG;
    for (int d = 0; d < hd; d++)
        for (int c = s1 - s0; c < pad; c++) kt[(int64_t)d * ATTN_SEG + c] = 0.0f;
}

/* attn_segment for any KV element type: f32 reads the blocks in place;
 * otherwise the segment is decoded into the scratch's tile and computed as
 * one f32 block of ATTN_SEG tokens, positions shifted by the segment start
 * (the masks and score order are unchanged by the shift). */
static void attn_segment_kv(const attn_args *a, int seg, float *part, float *sc) {
    if (a->kv_dtype == KV_DTYPE_F32) {
        attn_segment(a, seg, part, sc);
        return;
    }
    const int hd = a->head_dim, nt = a->n_tok, s0 = seg * ATTN_SEG, j_end = a->pos[nt - 1] + 1;
    const int s1 = s0 + ATTN_SEG < j_end ? s0 + ATTN_SEG : j_end;
    int k0 = attn_lo(a, 0) / 16 * 16;
    if (k0 < s0) k0 = s0;
    float *tile = a->scratch + attn_scratch_floats(nt, a->n_q, hd) - attn_kv_tile_floats(hd);
    attn_load_segment(a, s0, k0, s1, tile);
    int32_t pos[ATTN_MAX_CHUNK];
    for (int t = 0; t < nt; t++) pos[t] = a->pos[t] - s0;
    float *const table[1] = {tile};
    attn_args b = *a;
    b.pos = pos;
    b.blocks = table;
    b.block_tokens = ATTN_SEG;
    b.k_off = 0;
    b.v_off = (int64_t)hd * ATTN_SEG;
    b.row_stride = hd;
    b.kv_dtype = KV_DTYPE_F32;
    b.head_bytes = 0;
    b.floor = a->floor > s0 ? a->floor - s0 : 0;
    attn_segment(&b, 0, part, sc);
}
