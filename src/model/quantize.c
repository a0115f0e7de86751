/* quantize.c - GGUF -> GGUF weight re-encoding (see quantize.h).
 *
 * Every tensor is decoded a row (ne[0] elements) at a time to float with
 * dtype_dequantize_row and re-encoded with dtype_quantize_row into the output
 * stream (gguf_writer_begin/write_data/finish), so memory use is two row
 * buffers regardless of model size; the input is read through the reader's
 * mapping, whose pages are released after each tensor. Tensors keep their names, shapes and order. */
#include "model/quantize.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

uint32_t quantize_file_type(dtype t) {
    switch (t) {
    case DT_F32: return 0;
    case DT_F16: return 1;
    case DT_Q4_0: return 2;
    case DT_Q8_0: return 7;
    case DT_BF16: return 32;
    case DT_Q4_K: return 15; /* LLAMA_FTYPE_MOSTLY_Q4_K_M: the mix quantize_tensor_type makes */
    case DT_Q5_K: return 17; /* LLAMA_FTYPE_MOSTLY_Q5_K_M */
    case DT_Q6_K: return 18;
    case DT_IQ4_XS: return 30;
    default: break;
    }
    return 0;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !memcmp(s + n - k, suffix, k);
}

/* Layer index of a "blk.N." tensor, -1 for others. */
static int layer_of(const char *name) {
    if (strncmp(name, "blk.", 4)) return -1;
    char *end;
    long v = strtol(name + 4, &end, 10);
    return end != name + 4 && *end == '.' && v >= 0 && v < 1 << 20 ? (int)v : -1;
}

quantize_mix quantize_mix_of(const gguf_file *f) {
    quantize_mix m = {0, 1};
    int64_t q_rows = 0, k_rows = 0;
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        int l = layer_of(t->name);
        if (l >= m.n_layer) m.n_layer = l + 1;
        if (l == 0 && t->n_dims == 2 && ends_with(t->name, ".attn_q.weight")) q_rows = t->ne[1];
        if (l == 0 && t->n_dims == 2 && ends_with(t->name, ".attn_k.weight")) k_rows = t->ne[1];
    }
    if (q_rows > 0 && k_rows > 0 && q_rows % k_rows == 0) m.n_gqa = (int)(q_rows / k_rows);
    return m;
}

/* llama.cpp's use_more_bits: the first and last eighth of the layers and every third between. */
static bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* llama.cpp's per-tensor choice (llama_tensor_get_type) for the mixes cinfer writes, dense models. */
static dtype mix_type(const char *name, dtype target, const quantize_mix *mix) {
    bool mixed = target == DT_Q4_K || target == DT_Q5_K || target == DT_IQ4_XS;
    int l = layer_of(name);
    if (!strcmp(name, "output.weight")) return target == DT_Q8_0 || !mixed ? target : DT_Q6_K;
    if (ends_with(name, ".attn_v.weight") && l >= 0) {
        if (target == DT_IQ4_XS && mix->n_gqa >= 4) return DT_Q5_K;
        if ((target == DT_Q4_K || target == DT_Q5_K) && use_more_bits(l, mix->n_layer)) return DT_Q6_K;
    }
    if (ends_with(name, ".ffn_down.weight") && l >= 0) {
        if ((target == DT_Q4_K || target == DT_Q5_K) && use_more_bits(l, mix->n_layer)) return DT_Q6_K;
        if (target == DT_IQ4_XS && l < mix->n_layer / 8) return DT_Q5_K;
    }
    return target;
}

dtype quantize_tensor_type(const gguf_tensor *t, dtype target, const quantize_mix *mix) {
    if (t->n_dims < 2 || !ends_with(t->name, ".weight")) return DT_F32;
    dtype want = mix_type(t->name, target, mix);
    if (t->ne[0] % dtype_block_elems(want) == 0) return want;
    if (t->ne[0] % dtype_block_elems(target) == 0) return target;
    return DT_F32;
}

/* Declares every output tensor (data streamed later) and checks sources decode. */
static int declare_tensors(gguf_writer *w, const gguf_file *in, dtype target, const quantize_mix *mix, size_t *max_row,
                           cf_err *err) {
    *max_row = 0;
    for (int64_t i = 0; i < gguf_tensor_count(in); i++) {
        const gguf_tensor *t = gguf_tensor_at(in, i);
        if (!dtype_computable(t->type))
            return cf_fail(err, "%s: tensor '%s' has type %s, which cinfer cannot decode", gguf_path(in), t->name,
                           dtype_name(t->type));
        if (gguf_writer_add_tensor(w, t->name, quantize_tensor_type(t, target, mix), t->n_dims, t->ne, NULL, false,
                                   err))
            return cf_prefix(err, "%s", gguf_path(in));
        if ((size_t)t->ne[0] > *max_row) *max_row = (size_t)t->ne[0];
    }
    return 0;
}

static int stream_tensor(gguf_writer *w, const gguf_tensor *t, dtype out_type, float *f, void *row, cf_err *err) {
    size_t in_row = dtype_row_bytes(t->type, t->ne[0]), out_row = dtype_row_bytes(out_type, t->ne[0]);
    size_t rows = t->nbytes / in_row;
    const uint8_t *src = t->data;
    for (size_t r = 0; r < rows; r++) {
        const void *bytes = src + r * in_row;
        if (t->type != (uint32_t)out_type) {
            dtype_dequantize_row((dtype)t->type, bytes, f, t->ne[0]);
            dtype_quantize_row(out_type, f, row, t->ne[0]);
            bytes = row;
        }
        if (gguf_writer_write_data(w, bytes, out_row, err)) return -1;
    }
    return 0;
}

/* Drops the source pages of a finished tensor from this process (they are
 * file-backed and re-read if touched again), so resident memory stays near
 * one tensor even for multi-GB inputs. Advisory: failure is harmless. */
static void release_source(const gguf_tensor *t) {
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0) return;
    uintptr_t a = (uintptr_t)t->data, b = a + t->nbytes;
    a = (a + (uintptr_t)pg - 1) / (uintptr_t)pg * (uintptr_t)pg;
    b = b / (uintptr_t)pg * (uintptr_t)pg;
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

int gguf_quantize(const char *in_path, const char *out_path, dtype target, cf_err *err) {
    gguf_file *in = NULL;
    gguf_writer *w = NULL;
    float *f = NULL;
    void *row = NULL;
    int rc = -1;
    size_t max_row;
    if (gguf_open(in_path, &in, err)) return -1;
    w = gguf_writer_create();
    if (!w) {
        cf_fail(err, "out of memory");
        goto done;
    }
    if (gguf_writer_copy_kv(w, in, err)) goto done;
    gguf_set_u32(w, "general.file_type", quantize_file_type(target));
    quantize_mix mix = quantize_mix_of(in);
    if (declare_tensors(w, in, target, &mix, &max_row, err)) goto done;
    f = malloc((max_row + 1) * sizeof *f);
    row = malloc((max_row + 1) * sizeof(float)); /* any encoding of a row fits in its f32 size */
    if (!f || !row) {
        cf_fail(err, "%s: out of memory", in_path);
        goto done;
    }
    if (gguf_writer_begin(w, out_path, err)) goto done;
    for (int64_t i = 0; i < gguf_tensor_count(in); i++) {
        const gguf_tensor *t = gguf_tensor_at(in, i);
        if (stream_tensor(w, t, quantize_tensor_type(t, target, &mix), f, row, err)) goto done;
        release_source(t);
    }
    rc = gguf_writer_finish(w, err);
done:
    free(f);
    free(row);
    gguf_writer_free(w);
    gguf_close(in);
    return rc;
}
