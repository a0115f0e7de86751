/* peak_avx512.c - AVX-512 FMA and VNNI throughput loops for peak.c: 12
 * independent accumulators hide the instruction latency, so the loop runs at
 * the issue rate of the execution ports. Returns operations performed. */
#include <immintrin.h>
#include <stdint.h>

double peak_fma_avx512(int64_t iters, float *sink);
double peak_vnni_avx512(int64_t iters, int32_t *sink);

double peak_fma_avx512(int64_t iters, float *sink) {
    __m512 a[12], m = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-3f);
    for (int i = 0; i < 12; i++) a[i] = _mm512_set1_ps((float)i);
    for (int64_t it = 0; it < iters; it++)
        for (int i = 0; i < 12; i++) a[i] = _mm512_fmadd_ps(a[i], m, c);
    __m512 s = a[0];
    for (int i = 1; i < 12; i++) s = _mm512_add_ps(s, a[i]);
    *sink = _mm512_reduce_add_ps(s);
    return (double)iters * 12 * 16 * 2;
}

double peak_vnni_avx512(int64_t iters, int32_t *sink) {
    __m512i a[12], u = _mm512_set1_epi8(3), v = _mm512_set1_epi8(-2);
    for (int i = 0; i < 12; i++) a[i] = _mm512_set1_epi32(i);
    for (int64_t it = 0; it < iters; it++)
        for (int i = 0; i < 12; i++) a[i] = _mm512_dpbusd_epi32(a[i], u, v);
    __m512i s = a[0];
    for (int i = 1; i < 12; i++) s = _mm512_add_epi32(s, a[i]);
    *sink = _mm512_reduce_add_epi32(s);
    return (double)iters * 12 * 64 * 2;
}
