/* kv_dtype.c - names, sizes and the row codecs of the KV cache element types
 * (kv_dtype.h), on top of the GGUF element codecs of dtype.c. */
#include "tensor/kv_dtype.h"

#include <string.h>

#include "tensor/dtype.h"

static const char *const kv_names[KV_DTYPE_COUNT] = {"f32", "bf16", "f16", "q8_0"};
static const dtype kv_elem[KV_DTYPE_COUNT] = {DT_F32, DT_BF16, DT_F16, DT_Q8_0};

const char *kv_dtype_name(kv_dtype t) { return (unsigned)t < KV_DTYPE_COUNT ? kv_names[t] : "?"; }

int kv_dtype_parse(const char *s, kv_dtype *out) {
    for (int i = 0; s && i < KV_DTYPE_COUNT; i++)
        if (!strcmp(s, kv_names[i])) {
            *out = (kv_dtype)i;
            return 0;
        }
    return -1;
}

bool kv_dtype_fits(kv_dtype t, int64_t n) {
    if ((unsigned)t >= KV_DTYPE_COUNT || n < 0) return false;
    return t != KV_DTYPE_Q8_0 || n % QK8_0 == 0;
}

int64_t kv_dtype_bytes(kv_dtype t, int64_t n) { return (int64_t)dtype_row_bytes(kv_elem[t], n); }

int64_t kv_dtype_row_units(kv_dtype t, int64_t n) { return (kv_dtype_bytes(t, n) + 3) / 4; }

void kv_dtype_encode_row(kv_dtype t, const float *src, void *dst, int64_t n) {
    dtype_quantize_row(kv_elem[t], src, dst, n);
}

void kv_dtype_decode_row(kv_dtype t, const void *src, float *dst, int64_t n) {
    dtype_dequantize_row(kv_elem[t], src, dst, n);
}
