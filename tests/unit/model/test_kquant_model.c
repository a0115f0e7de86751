/* test_kquant_model.c - a Q4_K_M-style model (Q4_K + Q6_K + F32) loads and
 * runs, on every ISA the machine has.
 *
 * tiny-llama (F32/F16) is re-encoded with gguf_quantize to Q4_K, which makes
 * llama.cpp's Q4_K_M mix (attention/ffn_gate/ffn_up/token_embd Q4_K; attn_v
 * Q6_K in use_more_bits layers, i.e. layers 2 and 3 of 4, Q4_K in 0 and 1
 * (output is tied to token_embd); ffn_down, whose rows are 688 wide, F32) -
 * file A. A is then
 * re-encoded to F32 - file B, holding exactly A's dequantized weights (the
 * dequantization is checked bit-exact against gguf-py in test_dtype). The
 * paragraph prompt is fed (teacher-forced) through A and B under each ISA:
 *   A vs B:   scalar (f32 activations, exact dequantization): every logit
 *             within 1e-3 absolute (same weights, only f32 summation order
 *             differs; observed max 0), same top-1. AVX2 and AVX-512 multiply
 *             Q4_K and Q6_K by activations quantized per 256 (Q8_K, as
 *             llama.cpp does): relative RMS logit error <= 0.03 (observed
 *             0.015), top-1 agreement >= 0.9 (observed 0.96; tiny-llama's
 *             random weights give tiny margins);
 *   A vs the original F32 model: top-1 agreement >= 0.35 and relative RMS
 *             logit error <= 0.35 (about the Q4_0 bounds of test_quantized_models;
 *             tiny-llama has random weights, so top-1 margins are tiny: observed
 *             0.396-0.416 with this mix). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "engine/generate.h"
#include "format/gguf.h"
#include "model/model.h"
#include "model/quantize.h"
#include "testutil.h"
#include "unit/model/logits_util.h"

/* Counts A's tensors per type: it must hold Q4_K and Q6_K matrices. */
static void check_mix(const char *path) {
    gguf_file *f;
    cf_err err = {0};
    if (gguf_open(path, &f, &err)) {
        CHECKF(0, "%s", err.msg);
        return;
    }
    int q4k = 0, q6k = 0, other = 0;
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        uint32_t t = gguf_tensor_at(f, i)->type;
        q4k += t == DT_Q4_K, q6k += t == DT_Q6_K, other += t != DT_Q4_K && t != DT_Q6_K;
    }
    fprintf(stderr, "q4_k mix: %d Q4_K, %d Q6_K, %d other tensors\n", q4k, q6k, other);
    /* 4 layers x (q k o gate up) + token_embd + attn_v of layers 0, 1; attn_v of layers 2, 3 (output tied) */
    CHECK(q4k == 4 * 5 + 1 + 2 && q6k == 2);
    gguf_close(f);
}

static void compare(const char *what, const float *a, const float *b, int n, int nv, double *max_abs, double *agree,
                    double *rel_rms) {
    double d2 = 0, r2 = 0, mx = 0;
    int same = 0;
    for (int p = 0; p < n; p++) {
        const float *x = a + (int64_t)p * nv, *y = b + (int64_t)p * nv;
        same += argmax(x, nv) == argmax(y, nv);
        for (int v = 0; v < nv; v++) {
            double d = (double)x[v] - y[v];
            d2 += d * d, r2 += (double)x[v] * x[v], mx = fmax(mx, fabs(d));
        }
    }
    *max_abs = mx, *agree = (double)same / n, *rel_rms = sqrt(d2 / r2);
    fprintf(stderr, "%-40s max |diff| %.3g, top-1 agreement %.3f, relative RMS %.4f\n", what, mx, *agree, *rel_rms);
}

int main(void) {
    const char *src = shared_path("models/tiny/tiny-llama.gguf");
    json_error_t jerr;
    json_t *root = json_load_file(shared_path("fixtures/llama-cpp/tiny-llama.paragraph.json"), 0, &jerr);
    FILE *probe = fopen(src, "rb");
    if (!root || !probe) {
        if (root) json_decref(root);
        if (probe) fclose(probe);
        return tu_missing_fixture("models/tiny/tiny-llama.gguf and fixtures/llama-cpp/tiny-llama.paragraph.json");
    }
    fclose(probe);
    json_t *jids = json_object_get(root, "input_ids");
    int n = (int)json_array_size(jids);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, (size_t)i));
    json_decref(root);

    char a_path[512], b_path[600];
    CHECK(test_scratch_path(a_path, sizeof a_path, "kquant") != NULL);
    snprintf(b_path, sizeof b_path, "%s.f32", a_path);
    cf_err err = {0};
    int rc = gguf_quantize(src, a_path, DT_Q4_K, &err);
    CHECKF(rc == 0, "%s", err.msg);
    if (rc == 0) rc = gguf_quantize(a_path, b_path, DT_F32, &err);
    CHECKF(rc == 0, "%s", err.msg);
    if (rc == 0) {
        check_mix(a_path);
        thread_pool *pool = pool_create(2);
        cpu_isa best = cpu_isa_active();
        for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
            if (!cpu_isa_supported((cpu_isa)isa)) continue;
            cpu_isa_force((cpu_isa)isa);
            int nv = 0, nv2 = 0, nv3 = 0;
            float *la = run_all(a_path, ids, n, &nv, pool), *lb = run_all(b_path, ids, n, &nv2, pool);
            float *lf = run_all(src, ids, n, &nv3, pool);
            if (la && lb && lf && nv == nv2 && nv == nv3) {
                char what[96];
                double mx, agree, rel;
                snprintf(what, sizeof what, "%s q4_k mix vs its f32 dequantization", cpu_isa_name((cpu_isa)isa));
                compare(what, la, lb, n, nv, &mx, &agree, &rel);
                if (isa != CPU_ISA_SCALAR) /* Q4_K/Q6_K x Q8_K-quantized activations (integer paths) */
                    CHECKF(rel <= 0.03 && agree >= 0.9, "%s: relative RMS %.4f, top-1 agreement %.3f", what, rel,
                           agree);
                else CHECKF(mx <= 1e-3 && agree == 1.0, "%s: max |diff| %.3g, top-1 agreement %.3f", what, mx, agree);
                snprintf(what, sizeof what, "%s q4_k mix vs the original model", cpu_isa_name((cpu_isa)isa));
                compare(what, la, lf, n, nv, &mx, &agree, &rel);
                CHECKF(agree >= 0.35 && rel <= 0.35, "%s: top-1 agreement %.3f, relative RMS %.4f", what, agree, rel);
            }
            free(la), free(lb), free(lf);
        }
        cpu_isa_force(best);
        pool_destroy(pool);
    }
    remove(b_path);
    test_scratch_remove(a_path);
    free(ids);
    return test_finish();
}
