/* peak.c - runs the per-ISA throughput loops on every pool thread and takes
 * the best of a few repetitions (see peak.h). */
#include "tensor/peak.h"

#include <stdint.h>

#include "base/cpu.h"
#include "base/timeutil.h"

double peak_fma_avx512(int64_t iters, float *sink);
double peak_vnni_avx512(int64_t iters, int32_t *sink);
double peak_fma_avx2(int64_t iters, float *sink);

typedef struct peak_job {
    int kind; /* 0 = fma, 1 = vnni */
    int64_t iters;
    double ops[256];
    float fsink[256];
    int32_t isink[256];
} peak_job;

static void peak_task(void *ctx, int ith, int nth) {
    (void)nth;
    peak_job *j = ctx;
    int s = ith & 255;
    cpu_isa isa = cpu_isa_active();
    if (j->kind == 1) j->ops[s] = isa == CPU_ISA_AVX512 ? peak_vnni_avx512(j->iters, &j->isink[s]) : 0;
    else if (isa == CPU_ISA_AVX512) j->ops[s] = peak_fma_avx512(j->iters, &j->fsink[s]);
    else if (isa == CPU_ISA_AVX2) j->ops[s] = peak_fma_avx2(j->iters, &j->fsink[s]);
    else {
        float a = 1.0f;
        for (int64_t i = 0; i < j->iters; i++) a = a * 0.999f + 1e-3f;
        j->fsink[s] = a;
        j->ops[s] = (double)j->iters * 2;
    }
}

static double measure(thread_pool *pool, int kind) {
    peak_job j = {.kind = kind, .iters = 2000000};
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = time_now();
        pool_run(pool, peak_task, &j);
        double t = time_now() - t0, ops = 0;
        for (int i = 0; i < pool_size(pool) && i < 256; i++) ops += j.ops[i];
        if (ops / t > best) best = ops / t;
    }
    return best;
}

peak_ops kern_measure_peak(thread_pool *pool) {
    peak_ops p = {measure(pool, 0), 0};
    if (cpu_isa_active() == CPU_ISA_AVX512) p.int8_ops = measure(pool, 1);
    return p;
}
