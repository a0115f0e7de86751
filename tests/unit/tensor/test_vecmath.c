/* test_vecmath.c - the vectorised exp behind softmax and SwiGLU, on every
 * supported ISA, against libm in double: relative error within a few ulp over
 * the whole float range that matters, exact 0 below the underflow bound, and
 * silu(g)*u on lengths that are not multiples of the vector width. */
#include <math.h>
#include <stdlib.h>

#include "base/cpu.h"
#include "tensor/vecmath.h"
#include "testutil.h"

int main(void) {
    const int n = 200003;
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n), *u = malloc(sizeof(float) * n);
    for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
        if (!cpu_isa_supported((cpu_isa)isa)) continue;
        cpu_isa_force((cpu_isa)isa);
        /* exp(x - 0) over [-90, 10] */
        for (int i = 0; i < n; i++) x[i] = -90.0f + 100.0f * (float)i / (float)(n - 1);
        double want_sum = 0;
        for (int i = 0; i < n; i++) want_sum += exp((double)x[i]);
        float sum = kern_exp_sub_sum(x, n, 0.0f);
        double max_rel = 0;
        for (int i = 0; i < n; i++) {
            float xi = -90.0f + 100.0f * (float)i / (float)(n - 1);
            double w = exp((double)xi);
            if (xi < -87.3f) {
                CHECKF(x[i] == 0.0f || fabs(x[i] - w) < 1e-37, "%s: exp(%g) = %g", cpu_isa_name((cpu_isa)isa), xi,
                       x[i]);
                continue;
            }
            double rel = fabs(x[i] - w) / w;
            if (rel > max_rel) max_rel = rel;
        }
        CHECKF(max_rel < 4e-7, "%s: exp max rel error %g", cpu_isa_name((cpu_isa)isa), max_rel);
        CHECKF(fabs(sum - want_sum) / want_sum < 1e-5, "%s: sum %g want %g", cpu_isa_name((cpu_isa)isa), sum, want_sum);
        /* silu * u on odd lengths */
        for (int len = 1; len < 70; len += 3) {
            for (int i = 0; i < len; i++) {
                y[i] = -20.0f + 40.0f * (float)i / (float)len;
                u[i] = 0.5f + (float)i * 0.01f;
            }
            float g0[70];
            for (int i = 0; i < len; i++) g0[i] = y[i];
            kern_silu_mul(y, u, len);
            for (int i = 0; i < len; i++) {
                double w = (double)g0[i] / (1.0 + exp(-(double)g0[i])) * u[i];
                CHECKF(fabs(y[i] - w) <= 1e-6 * (fabs(w) + 1e-6), "%s: silu(%g)*%g = %g want %g",
                       cpu_isa_name((cpu_isa)isa), g0[i], u[i], y[i], w);
            }
        }
    }
    free(x);
    free(y);
    free(u);
    return test_finish();
}
