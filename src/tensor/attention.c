/* attention.c - dispatch of kern_attention (and its split form) to the
 * active ISA's build, and the ISA-independent sizing helpers. */
#include "tensor/attention.h"

#include <string.h>

#include "base/cpu.h"

void kern_attention_scalar(const attn_args *a);
void kern_attention_avx2(const attn_args *a);
void kern_attention_avx512(const attn_args *a);
void kern_attention_part_scalar(const attn_args *a, int seg, float *part);
void kern_attention_part_avx2(const attn_args *a, int seg, float *part);
void kern_attention_part_avx512(const attn_args *a, int seg, float *part);
void kern_attention_merge_scalar(const attn_args *a, const float *parts, int64_t part_stride);
void kern_attention_merge_avx2(const attn_args *a, const float *parts, int64_t part_stride);
void kern_attention_merge_avx512(const attn_args *a, const float *parts, int64_t part_stride);

size_t attn_part_floats(int n_tok, int n_q, int head_dim) {
    return (size_t)n_tok * (size_t)n_q * (size_t)(head_dim + 2);
}

bool attn_prec_native(attn_prec prec) {
    return prec == ATTN_PREC_F32 || (cpu_isa_active() == CPU_ISA_AVX512 && cpu_has_avx512_bf16());
}

attn_prec attn_prec_default(void) { return attn_prec_native(ATTN_PREC_BF16) ? ATTN_PREC_BF16 : ATTN_PREC_F32; }

const char *attn_prec_name(attn_prec prec) { return prec == ATTN_PREC_BF16 ? "bf16" : "f32"; }

const char *attn_prec_describe(attn_prec prec) {
    if (prec == ATTN_PREC_F32) return "f32";
    if (!attn_prec_native(prec)) return "f32 (bf16 unsupported here)";
    return cpu_has_amx_bf16() ? "bf16 (AMX)" : "bf16 (AVX-512 BF16)";
}

int attn_prec_parse(const char *s, attn_prec *out) {
    if (!strcmp(s, "f32")) *out = ATTN_PREC_F32;
    else if (!strcmp(s, "bf16")) *out = ATTN_PREC_BF16;
    else return -1;
    return 0;
}

/* Layout (attention_impl.h): the part, the scores (rows x (ATTN_SEG + 16)),
 * the merge's M and L, the packed Q (whole groups of 16 rows, head_dim + 16
 * floats each: room for bf16 rows padded to 32), then the BF16 paths'
 * segment K (ATTN_SEG keys x head_dim rounded up to 32), segment V (ATTN_SEG
 * keys x head_dim rounded up to 16) and weights (whole groups of 16 rows x
 * ATTN_SEG), all bf16, two to a float; last, the decoded K/V tile of a
 * non-f32 cache (attention_kv_impl.h, attn_kv_tile_floats). */
size_t attn_scratch_floats(int n_tok, int n_q, int head_dim) {
    size_t rows = (size_t)n_tok * (size_t)n_q;
    size_t rows16 = (rows + 15) / 16 * 16;
    size_t hd32 = ((size_t)head_dim + 31) / 32 * 32, hd16 = ((size_t)head_dim + 15) / 16 * 16;
    size_t bf16_floats = (ATTN_SEG * hd32 + ATTN_SEG * hd16 + rows16 * ATTN_SEG) / 2;
    return attn_part_floats(n_tok, n_q, head_dim) + rows * (ATTN_SEG + 16) + 2 * rows +
           rows16 * ((size_t)head_dim + 16) + bf16_floats + attn_kv_tile_floats(head_dim);
}

size_t attn_kv_tile_floats(int head_dim) { return 2 * (size_t)head_dim * ATTN_SEG + 16; }

void attn_segments(const attn_args *a, int *first, int *end) {
    int lo = a->window > 0 ? a->pos[0] - a->window + 1 : 0;
    if (lo < 0) lo = 0;
    *first = lo / ATTN_SEG;
    *end = a->pos[a->n_tok - 1] / ATTN_SEG + 1;
}

void kern_attention(const attn_args *a) {
    switch (cpu_isa_active()) {
    case CPU_ISA_AVX512: kern_attention_avx512(a); break;
    case CPU_ISA_AVX2: kern_attention_avx2(a); break;
    default: kern_attention_scalar(a); break;
    }
}

void kern_attention_part(const attn_args *a, int seg, float *part) {
    switch (cpu_isa_active()) {
    case CPU_ISA_AVX512: kern_attention_part_avx512(a, seg, part); break;
    case CPU_ISA_AVX2: kern_attention_part_avx2(a, seg, part); break;
    default: kern_attention_part_scalar(a, seg, part); break;
    }
}

void kern_attention_merge(const attn_args *a, const float *parts, int64_t part_stride) {
    switch (cpu_isa_active()) {
    case CPU_ISA_AVX512: kern_attention_merge_avx512(a, parts, part_stride); break;
    case CPU_ISA_AVX2: kern_attention_merge_avx2(a, parts, part_stride); break;
    default: kern_attention_merge_scalar(a, parts, part_stride); break;
    }
}
