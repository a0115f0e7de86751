/* test_attention.c - kern_attention on every supported ISA (F32), and in
 * BF16 on both BF16 paths the CPU has (AVX-512 vdpbf16ps, AMX tiles), against
 * a float64 reference (BF16 also against float64 of the bf16-rounded inputs;
 * bounds at BF16_BOUND below): chunks of 1..64 query tokens, GQA groups, head dims that are
 * not multiples of the vector width, positions inside and across blocks,
 * block sizes that are not 16 (K tiles gathered across blocks), sliding
 * windows, soft-capping and attention sinks, contexts spanning several
 * segments; the split form (kern_attention_part per segment, then
 * kern_attention_merge) must equal kern_attention bit for bit, and a row's
 * result must not depend on the chunk it is computed in. Cache layout as model.h: per block, K
 * dimension-major ([kv_dim][token]), V token-major ([token][kv_dim]); the
 * tests use the second KV head (k_off / v_off of head 1). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "tensor/attention.h"
#include "tensor/dtype.h"
#include "testutil.h"

static float frand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return ((float)((*s >> 8) & 0xffff) / 65536.0f - 0.5f) * 2.0f;
}

/* V row j (token-major) */
static const float *row(const attn_args *a, int64_t off, int j) {
    return a->blocks[j / a->block_tokens] + off + (int64_t)(j % a->block_tokens) * a->row_stride;
}

/* K element d of key j (dimension-major within a block) */
static float kel(const attn_args *a, int j, int d) {
    int bt = a->block_tokens;
    return a->blocks[j / bt][a->k_off + (int64_t)d * bt + j % bt];
}

/* x, or x rounded to bf16 (nearest even) when r */
static double rnd(float x, bool r) { return r ? (double)bf16_to_f32(f32_to_bf16(x)) : (double)x; }

/* Max |out - reference| over the call: the float64 attention of the
 * inputs, or (bf16_in) of scale * Q, K and V rounded to bf16 first, which
 * leaves only the BF16 path's rounding of the weights P and its f32 sums. */
static double reference_max_diff(const attn_args *a, bool bf16_in) {
    int hd = a->head_dim;
    double md = 0;
    for (int t = 0; t < a->n_tok; t++)
        for (int h = 0; h < a->n_q; h++) {
            const float *q = a->q + t * a->q_stride + h * hd;
            int hi = a->pos[t] + 1, lo = a->window > 0 ? a->pos[t] - a->window + 1 : 0;
            if (lo < 0) lo = 0;
            double *s = calloc((size_t)hi, sizeof(double)), mx = -INFINITY, sum = 0;
            for (int j = lo; j < hi; j++) {
                double d = 0;
                if (bf16_in)
                    for (int i = 0; i < hd; i++) d += rnd(q[i] * a->scale, true) * rnd(kel(a, j, i), true);
                else {
                    for (int i = 0; i < hd; i++) d += (double)q[i] * kel(a, j, i);
                    d *= a->scale;
                }
                if (a->softcap > 0) d = a->softcap * tanh(d / a->softcap);
                s[j] = d;
                if (d > mx) mx = d;
            }
            if (a->sinks && a->sinks[h] > mx) mx = a->sinks[h];
            for (int j = lo; j < hi; j++) sum += (s[j] = exp(s[j] - mx));
            if (a->sinks) sum += exp(a->sinks[h] - mx);
            for (int i = 0; i < hd; i++) {
                double o = 0;
                for (int j = lo; j < hi; j++) o += s[j] / sum * rnd(row(a, a->v_off, j)[i], bf16_in);
                md = fmax(md, fabs(o - a->out[t * a->out_stride + h * hd + i]));
            }
            free(s);
        }
    return md;
}

/* The split form equals the whole one bit for bit, and so does each token
 * computed alone (a chunk of one). */
static void check_split_and_alone(const attn_args *a, const float *whole) {
    int first, end, nt = a->n_tok;
    attn_segments(a, &first, &end);
    int64_t ps = (int64_t)attn_part_floats(nt, a->n_q, a->head_dim);
    float *parts = malloc(sizeof(float) * (size_t)(ps * (end - first)));
    float *out2 = malloc(sizeof(float) * (size_t)(nt * a->out_stride));
    attn_args b = *a;
    b.out = out2;
    for (int g = end - 1; g >= first; g--) kern_attention_part(&b, g, parts + (g - first) * ps); /* any order */
    kern_attention_merge(&b, parts, ps);
    int same = 1;
    for (int t = 0; t < nt; t++)
        same = same && !memcmp(whole + t * a->out_stride, out2 + t * a->out_stride,
                               sizeof(float) * (size_t)(a->n_q * a->head_dim));
    CHECKF(same, "split != whole (pos %d+%d)", a->pos[0], nt);
    for (int t = 0; t < nt; t++) {
        attn_args c = *a;
        c.q = a->q + t * a->q_stride;
        c.out = out2;
        c.pos = a->pos + t;
        c.n_tok = 1;
        kern_attention(&c);
        same = !memcmp(whole + t * a->out_stride, out2, sizeof(float) * (size_t)(a->n_q * a->head_dim));
        CHECKF(same, "token %d alone != in its chunk (pos %d+%d)", t, a->pos[0], nt);
    }
    free(parts);
    free(out2);
}

/* Bounds on max |out - float64 reference| (|q| <= 2, |K|, |V| <= 1):
 * F32: 2e-6 on every ISA. BF16: Q, K, V and P carry 8-bit significands
 * (relative error <= 2^-9 each), so a score of head_dim terms is off by up
 * to ~2^-8 sum |scale q_d k_d| (worst case ~0.02 at head_dim 128) and the
 * output by that times |V| (measured: 3.8e-3 here): BF16_BOUND vs the exact inputs; with the inputs
 * rounded first, what is left is P's rounding (<= 2^-9 |V| per weight, in
 * sums of weights that add to 1) and f32 sums: BF16_ROUNDED_BOUND. */
#define BF16_BOUND 1e-2
#define BF16_ROUNDED_BOUND 4e-3

int main(void) {
    unsigned seed = 7;
    double bf16_max[2] = {0, 0}, bf16_rounded_max[2] = {0, 0}; /* vdpbf16ps, AMX */
    const int hds[] = {8, 13, 32, 64, 80, 128};
    const int bts[] = {16, 7};
    /* {first position, chunk length, window} */
    const int cases[][3] = {{0, 1, 0},     {4, 1, 0},    {0, 16, 0},    {15, 2, 0},   {17, 5, 0},
                            {30, 16, 0},   {95, 1, 0},   {0, 9, 4},     {40, 16, 20}, {70, 3, 32},
                            {127, 2, 0},   {300, 1, 0},  {250, 11, 0},  {517, 16, 0}, {400, 7, 200},
                            {640, 1, 129}, {100, 64, 0}, {1000, 33, 0}, {200, 64, 50}};
    /* every ISA in F32, then AVX-512 in BF16 where the CPU has it: with
     * vdpbf16ps, then on AMX tiles where those are usable */
    for (int mode = 0; mode <= CPU_ISA_COUNT + 1; mode++) {
        int isa = mode < CPU_ISA_COUNT ? mode : CPU_ISA_AVX512;
        attn_prec prec = mode < CPU_ISA_COUNT ? ATTN_PREC_F32 : ATTN_PREC_BF16;
        if (!cpu_isa_supported((cpu_isa)isa)) continue;
        cpu_isa_force((cpu_isa)isa);
        cpu_amx_allow(mode == CPU_ISA_COUNT + 1);
        if (!attn_prec_native(prec) || (mode == CPU_ISA_COUNT + 1 && !cpu_has_amx_bf16())) continue;
        const char *path = mode < CPU_ISA_COUNT    ? cpu_isa_name((cpu_isa)isa)
                           : mode == CPU_ISA_COUNT ? "avx512-bf16"
                                                   : "amx-bf16";
        for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++)
            for (size_t bi = 0; bi < sizeof bts / sizeof bts[0]; bi++)
                for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
                    for (int cap = 0; cap < 4; cap++) { /* bit 0: soft-cap, bit 1: sinks */
                        int hd = hds[hi], n_q = 3, n_kv = 2, bt = bts[bi];
                        int p0 = cases[ci][0], nt = cases[ci][1];
                        if (nt > 16 && hd != 13 && hd != 64) continue; /* long chunks: two head dims (test time) */
                        int n_pos = p0 + nt;
                        int64_t stride = (int64_t)n_kv * hd;
                        int n_blocks = (n_pos + bt - 1) / bt;
                        int64_t block_floats = 2 * bt * stride; /* one layer: K then V */
                        float *mem = malloc(sizeof(float) * (size_t)(n_blocks * block_floats));
                        float **blocks = malloc(sizeof(float *) * (size_t)n_blocks);
                        for (int64_t i = 0; i < n_blocks * block_floats; i++) mem[i] = frand(&seed);
                        for (int b = 0; b < n_blocks; b++) blocks[b] = mem + b * block_floats;
                        int64_t qs = (int64_t)n_q * hd + 5; /* a row stride wider than the heads */
                        float *q = malloc(sizeof(float) * (size_t)(nt * qs));
                        float *out = malloc(sizeof(float) * (size_t)(nt * qs));
                        for (int i = 0; i < nt * qs; i++) q[i] = frand(&seed) * 2;
                        int32_t pos[ATTN_MAX_CHUNK];
                        for (int t = 0; t < nt; t++) pos[t] = p0 + t;
                        float *scratch = malloc(sizeof(float) * attn_scratch_floats(nt, n_q, hd));
                        const float sinks[3] = {0.3f, -1.0f, 4.0f};
                        attn_args a = {.q = q,
                                       .q_stride = qs,
                                       .out = out,
                                       .out_stride = qs,
                                       .pos = pos,
                                       .n_tok = nt,
                                       .n_q = n_q,
                                       .head_dim = hd,
                                       .blocks = blocks,
                                       .block_tokens = bt,
                                       .k_off = (int64_t)hd * bt,
                                       .v_off = bt * stride + hd,
                                       .row_stride = stride,
                                       .window = cases[ci][2],
                                       .scale = 1.0f / sqrtf((float)hd),
                                       .softcap = (cap & 1) ? 0.5f : 0.0f,
                                       .sinks = (cap & 2) ? sinks : NULL,
                                       .prec = prec,
                                       .scratch = scratch};
                        kern_attention(&a);
                        double md = reference_max_diff(&a, false);
                        double bound = prec == ATTN_PREC_BF16 ? BF16_BOUND : 2e-6;
                        CHECKF(md < bound, "%s hd %d bt %d pos %d+%d window %d cap %d: max diff %g", path, hd, bt, p0,
                               nt, cases[ci][2], cap, md);
                        if (prec == ATTN_PREC_BF16) {
                            double mr = reference_max_diff(&a, true);
                            CHECKF(mr < BF16_ROUNDED_BOUND,
                                   "%s hd %d bt %d pos %d+%d window %d cap %d: %g vs rounded inputs", path, hd, bt, p0,
                                   nt, cases[ci][2], cap, mr);
                            int k = mode - CPU_ISA_COUNT;
                            bf16_max[k] = fmax(bf16_max[k], md);
                            bf16_rounded_max[k] = fmax(bf16_rounded_max[k], mr);
                        }
                        check_split_and_alone(&a, out);
                        free(scratch);
                        free(q);
                        free(out);
                        free(blocks);
                        free(mem);
                    }
    }
    for (int k = 0; k < 2; k++)
        printf("%s: max diff %.3g vs float64 (bound %g), %.3g vs float64 of bf16 inputs (bound %g)%s\n",
               k ? "amx-bf16" : "avx512-bf16", bf16_max[k], BF16_BOUND, bf16_rounded_max[k], BF16_ROUNDED_BOUND,
               bf16_max[k] == 0 ? " (not run: the CPU lacks it)" : "");
    return test_finish();
}
