/* test_attention.c - kern_attention on every supported ISA against a float64
 * reference: GQA groups, head dims that are not multiples of the vector
 * width, key ranges inside and across blocks, soft-capping. */
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

static void reference(const attn_args *a, double *out) {
    int hd = a->head_dim, bt = a->block_tokens;
    for (int h = 0; h < a->n_q; h++) {
        const float *q = a->q + h * hd;
        double mx = -INFINITY, *s = calloc((size_t)a->j_end, sizeof(double));
        for (int j = a->j_begin; j < a->j_end; j++) {
            const float *k = a->blocks[j / bt] + a->k_off + (j % bt) * a->row_stride;
            double d = 0;
            for (int i = 0; i < hd; i++) d += (double)q[i] * k[i];
            d *= a->scale;
            if (a->softcap > 0) d = a->softcap * tanh(d / a->softcap);
            s[j] = d;
            if (d > mx) mx = d;
        }
        double sum = 0;
        for (int j = a->j_begin; j < a->j_end; j++) sum += (s[j] = exp(s[j] - mx));
        for (int i = 0; i < hd; i++) {
            double o = 0;
            for (int j = a->j_begin; j < a->j_end; j++)
                o += s[j] / sum * a->blocks[j / bt][a->v_off + (j % bt) * a->row_stride + i];
            out[h * hd + i] = o;
        }
        free(s);
    }
}

int main(void) {
    unsigned seed = 7;
    const int hds[] = {8, 13, 64, 128};
    const int ranges[][2] = {{0, 1}, {0, 5}, {0, 16}, {0, 17}, {3, 40}, {20, 100}};
    for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
        if (!cpu_isa_supported((cpu_isa)isa)) continue;
        cpu_isa_force((cpu_isa)isa);
        for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++)
            for (size_t ri = 0; ri < sizeof ranges / sizeof ranges[0]; ri++)
                for (int cap = 0; cap < 2; cap++) {
                    int hd = hds[hi], n_q = 3, n_kv = 2, bt = 16;
                    int64_t stride = (int64_t)n_kv * hd;
                    int n_blocks = (ranges[ri][1] + bt - 1) / bt;
                    int64_t block_floats = 2 * bt * stride; /* one layer: K then V */
                    float *mem = malloc(sizeof(float) * (size_t)(n_blocks * block_floats));
                    float **blocks = malloc(sizeof(float *) * (size_t)n_blocks);
                    for (int64_t i = 0; i < n_blocks * block_floats; i++) mem[i] = frand(&seed);
                    for (int b = 0; b < n_blocks; b++) blocks[b] = mem + b * block_floats;
                    float *q = malloc(sizeof(float) * (size_t)(n_q * hd)), *out = malloc(sizeof(float) * (size_t)(n_q * hd));
                    for (int i = 0; i < n_q * hd; i++) q[i] = frand(&seed) * 2;
                    float *scores = malloc(sizeof(float) * (size_t)(n_q * ranges[ri][1]));
                    attn_args a = {.q = q, .n_q = n_q, .head_dim = hd, .blocks = blocks, .block_tokens = bt,
                                   .k_off = hd, .v_off = bt * stride + hd, .row_stride = stride,
                                   .j_begin = ranges[ri][0], .j_end = ranges[ri][1],
                                   .scale = 1.0f / sqrtf((float)hd), .softcap = cap ? 0.5f : 0.0f,
                                   .scores = scores, .out = out};
                    kern_attention(&a);
                    double *ref = malloc(sizeof(double) * (size_t)(n_q * hd));
                    reference(&a, ref);
                    double md = 0;
                    for (int i = 0; i < n_q * hd; i++) md = fmax(md, fabs(ref[i] - out[i]));
                    CHECKF(md < 2e-6, "%s hd %d range [%d,%d) cap %d: max diff %g", cpu_isa_name((cpu_isa)isa), hd,
                           ranges[ri][0], ranges[ri][1], cap, md);
                    free(ref);
                    free(scores);
                    free(q);
                    free(out);
                    free(blocks);
                    free(mem);
                }
    }
    return test_finish();
}
