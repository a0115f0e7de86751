/* peak_avx2.c - AVX2 FMA throughput loop for peak.c (see peak_avx512.c). */
#include <immintrin.h>
#include <stdint.h>

double peak_fma_avx2(int64_t iters, float *sink);

double peak_fma_avx2(int64_t iters, float *sink) {
    __m256 a[12], m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-3f);
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
    for (int64_t it = 0; it < iters; it++)
        for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], m, c);
    __m256 s = a[0];
    for (int i = 1; i < 12; i++) s = _mm256_add_ps(s, a[i]);
    float out[8];
    _mm256_storeu_ps(out, s);
    *sink = out[0];
    return (double)iters * 12 * 8 * 2;
}
