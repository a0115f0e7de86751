/* test_attention_mqa.c - kern_attention in its shared-row MQA form
 * (attention.h: v_dim > 0, the MLA absorbed layout of DeepSeek V2/V3) on
 * every supported ISA against a float64 reference: one token-major row per
 * key (K = its first head_dim floats, V = its first v_dim), every query head
 * sharing it; head dims with and without vector tails (up to V3's 576 / 512),
 * block sizes that are not 16, a layer offset inside the block (k_off),
 * chunks of 1..64 tokens, contexts spanning several segments, a sliding
 * window. Batch invariance: the split form (kern_attention_part per segment
 * + kern_attention_merge) equals the whole call bit for bit, every token
 * computed alone equals its chunk's row, a head range computed alone equals
 * those heads in the full call, and ATTN_PREC_BF16 runs as F32 (same bits). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "tensor/attention.h"
#include "testutil.h"

static float frand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return ((float)((*s >> 8) & 0xffff) / 65536.0f - 0.5f) * 2.0f;
}

/* key j's row (K, and V as its first v_dim floats) */
static const float *key_row(const attn_args *a, int j) {
    return a->blocks[j / a->block_tokens] + a->k_off + (int64_t)(j % a->block_tokens) * a->row_stride;
}

static const float *out_row(const attn_args *a, const float *out, int t, int h) {
    return out + t * a->out_stride + (int64_t)h * a->v_dim;
}

/* Max |out - float64 attention of the inputs| over the call. */
static double reference_max_diff(const attn_args *a) {
    int hd = a->head_dim, vd = a->v_dim;
    double md = 0;
    for (int t = 0; t < a->n_tok; t++)
        for (int h = 0; h < a->n_q; h++) {
            const float *q = a->q + t * a->q_stride + (int64_t)h * hd;
            int hi = a->pos[t] + 1, lo = a->window > 0 ? a->pos[t] - a->window + 1 : 0;
            if (lo < 0) lo = 0;
            double *s = calloc((size_t)hi, sizeof(double)), mx = -INFINITY, sum = 0;
            for (int j = lo; j < hi; j++) {
                double d = 0;
                for (int i = 0; i < hd; i++) d += (double)q[i] * key_row(a, j)[i];
                s[j] = d * a->scale;
                if (s[j] > mx) mx = s[j];
            }
            for (int j = lo; j < hi; j++) sum += (s[j] = exp(s[j] - mx));
            for (int i = 0; i < vd; i++) {
                double o = 0;
                for (int j = lo; j < hi; j++) o += s[j] / sum * key_row(a, j)[i];
                md = fmax(md, fabs(o - out_row(a, a->out, t, h)[i]));
            }
            free(s);
        }
    return md;
}

static bool rows_equal(const attn_args *a, const float *x, const float *y, int t, int h0, int n_h) {
    return !memcmp(out_row(a, x, t, h0), out_row(a, y, t, h0), sizeof(float) * (size_t)(n_h * a->v_dim));
}

/* Split == whole; each token alone == its chunk's row; heads [1, n_q) alone
 * == those heads; BF16 requested == F32. All bit for bit. */
static void check_invariance(const attn_args *a, const float *whole) {
    int first, end, nt = a->n_tok;
    attn_segments(a, &first, &end);
    int64_t ps = (int64_t)attn_part_floats(nt, a->n_q, a->head_dim);
    float *parts = malloc(sizeof(float) * (size_t)(ps * (end - first)));
    float *out2 = calloc((size_t)(nt * a->out_stride), sizeof(float));
    attn_args b = *a;
    b.out = out2;
    for (int g = end - 1; g >= first; g--) kern_attention_part(&b, g, parts + (g - first) * ps); /* any order */
    kern_attention_merge(&b, parts, ps);
    bool same = true;
    for (int t = 0; t < nt; t++) same = same && rows_equal(a, whole, out2, t, 0, a->n_q);
    CHECKF(same, "split != whole (hd %d/%d pos %d+%d)", a->head_dim, a->v_dim, a->pos[0], nt);
    b.prec = ATTN_PREC_BF16;
    kern_attention(&b);
    same = true;
    for (int t = 0; t < nt; t++) same = same && rows_equal(a, whole, out2, t, 0, a->n_q);
    CHECKF(same, "bf16 requested != f32 (hd %d/%d pos %d+%d)", a->head_dim, a->v_dim, a->pos[0], nt);
    b = *a;
    b.q = a->q + a->head_dim; /* heads 1.. */
    b.out = out2 + a->v_dim;
    b.n_q = a->n_q - 1;
    kern_attention(&b);
    same = true;
    for (int t = 0; t < nt; t++) same = same && rows_equal(a, whole, out2, t, 1, a->n_q - 1);
    CHECKF(same, "head range != full call (hd %d/%d pos %d+%d)", a->head_dim, a->v_dim, a->pos[0], nt);
    for (int t = 0; t < nt; t++) {
        b = *a;
        b.q = a->q + t * a->q_stride;
        b.out = out2;
        b.pos = a->pos + t;
        b.n_tok = 1;
        kern_attention(&b);
        same = !memcmp(out_row(a, whole, t, 0), out2, sizeof(float) * (size_t)(a->n_q * a->v_dim));
        CHECKF(same, "token %d alone != in its chunk (hd %d/%d pos %d+%d)", t, a->head_dim, a->v_dim, a->pos[0], nt);
    }
    free(parts);
    free(out2);
}

int main(void) {
    unsigned seed = 11;
    /* {head_dim (K), v_dim, query heads} */
    const int dims[][3] = {{576, 512, 16}, {72, 64, 5}, {29, 13, 3}, {48, 48, 2}};
    const int bts[] = {16, 7};
    /* {first position, chunk length, window} */
    const int cases[][3] = {{0, 1, 0},   {5, 1, 0},   {0, 8, 0},   {15, 3, 0},   {120, 9, 0},
                            {300, 1, 0}, {250, 8, 0}, {60, 64, 0}, {200, 5, 50}, {700, 2, 0}};
    for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
        if (!cpu_isa_supported((cpu_isa)isa)) continue;
        cpu_isa_force((cpu_isa)isa);
        double worst = 0;
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
            for (size_t bi = 0; bi < sizeof bts / sizeof bts[0]; bi++)
                for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
                    int hd = dims[di][0], vd = dims[di][1], n_q = dims[di][2], bt = bts[bi];
                    int p0 = cases[ci][0], nt = cases[ci][1];
                    if (hd > 100 && (nt > 8 || bt != 16)) continue; /* V3 dims: fewer cases (test time) */
                    int n_pos = p0 + nt, n_blocks = (n_pos + bt - 1) / bt;
                    int64_t block_floats = 2 * (int64_t)bt * hd; /* two layers of rows; the test reads layer 1 */
                    float *mem = malloc(sizeof(float) * (size_t)(n_blocks * block_floats));
                    float **blocks = malloc(sizeof(float *) * (size_t)n_blocks);
                    for (int64_t i = 0; i < n_blocks * block_floats; i++) mem[i] = frand(&seed);
                    for (int b = 0; b < n_blocks; b++) blocks[b] = mem + b * block_floats;
                    int64_t qs = (int64_t)n_q * hd + 3, os = (int64_t)n_q * vd + 5; /* strides wider than the heads */
                    float *q = malloc(sizeof(float) * (size_t)(nt * qs));
                    float *out = malloc(sizeof(float) * (size_t)(nt * os));
                    for (int i = 0; i < nt * qs; i++) q[i] = frand(&seed) * 2;
                    int32_t pos[ATTN_MAX_CHUNK];
                    for (int t = 0; t < nt; t++) pos[t] = p0 + t;
                    float *scratch = malloc(sizeof(float) * attn_scratch_floats(nt, n_q, hd));
                    attn_args a = {.q = q,
                                   .q_stride = qs,
                                   .out = out,
                                   .out_stride = os,
                                   .pos = pos,
                                   .n_tok = nt,
                                   .n_q = n_q,
                                   .head_dim = hd,
                                   .blocks = blocks,
                                   .block_tokens = bt,
                                   .k_off = (int64_t)bt * hd,
                                   .v_off = (int64_t)bt * hd,
                                   .row_stride = hd,
                                   .window = cases[ci][2],
                                   .scale = 1.0f / sqrtf((float)hd),
                                   .v_dim = vd,
                                   .scratch = scratch};
                    kern_attention(&a);
                    double md = reference_max_diff(&a);
                    worst = fmax(worst, md);
                    CHECKF(md < 2e-6, "%s hd %d/%d bt %d pos %d+%d window %d: max diff %g", cpu_isa_name((cpu_isa)isa),
                           hd, vd, bt, p0, nt, cases[ci][2], md);
                    check_invariance(&a, out);
                    free(scratch);
                    free(q);
                    free(out);
                    free(blocks);
                    free(mem);
                }
        printf("%s: max diff %.3g vs float64\n", cpu_isa_name((cpu_isa)isa), worst);
    }
    return test_finish();
}
