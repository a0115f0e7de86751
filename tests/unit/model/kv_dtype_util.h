/* kv_dtype_util.h - the KV cache element type of a parametrised model test
 * (CINFER_TEST_KV_DTYPE, tests/testutil.h tu_kv_dtype) and the logit
 * tolerance each type is held to against f32 references. Header-only
 * (static), included by test files; not a library.
 *
 * The bounds are what rounding K and V rows costs on the fixture models
 * (measured by test_kv_dtype at 4k+ positions and by the fixture tests, then
 * rounded up): bf16 keeps 8 significant bits, f16 11, q8_0 about 7 per 32-element
 * block. The fixtures' smallest top-1 lead is 1.3e-4, below what any rounding
 * type moves logits by, so with such a type an argmax is held to the
 * reference only where its lead exceeds twice the tolerance
 * (kv_argmax_binding); with f32 always. */
#ifndef CINFER_TESTS_KV_DTYPE_UTIL_H
#define CINFER_TESTS_KV_DTYPE_UTIL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/kv_dtype.h"
#include "testutil.h"

/* max |logit - f32 reference| allowed, per kv_dtype: the fixture models with
 * random weights (tiny-llama, tiny-gemma2; measured up to 7.2e-4 f16, 4.0e-3
 * bf16, 1.6e-2 q8_0), and stories260K, a trained model whose K/V rows are
 * large (measured 0.13 f16, 0.42 bf16 on the 772-position paragraph). */
static const double kv_dtype_tol[KV_DTYPE_COUNT] = {0.0, 8e-3, 1.5e-3, 3.2e-2};
static const double kv_dtype_tol_stories[KV_DTYPE_COUNT] = {0.0, 0.85, 0.26, 0.0};

/* The tolerance of a fixture check at f32 tolerance `tol` on model `path`. */
static inline double kv_fixture_tol(kv_dtype dt, const char *path, double tol) {
    double t = strstr(path, "stories260K") ? kv_dtype_tol_stories[dt] : kv_dtype_tol[dt];
    return t > tol ? t : tol;
}

/* Must the argmax match the reference's? Always with an f32 cache; with
 * another type only where the reference's top-1 lead (top = the fixture's
 * [[id, logit], ...] list, best first) exceeds twice the tolerance: a lead
 * smaller than the rounding a cache type is allowed may flip. */
static inline bool kv_argmax_binding(kv_dtype dt, json_t *top, double tol) {
    if (dt == KV_DTYPE_F32 || json_array_size(top) < 2) return true;
    double a = json_number_value(json_array_get(json_array_get(top, 0), 1));
    double b = json_number_value(json_array_get(json_array_get(top, 1), 1));
    return a - b > 2 * tol;
}

static inline kv_dtype test_kv_dtype(void) {
    kv_dtype dt = KV_DTYPE_F32;
    const char *name = tu_kv_dtype();
    if (name && kv_dtype_parse(name, &dt)) {
        fprintf(stderr, "CINFER_TEST_KV_DTYPE=%s: not a KV cache type (f32, bf16, f16, q8_0)\n", name);
        exit(1);
    }
    return dt;
}

#endif
