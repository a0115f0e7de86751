/* gguf.h - GGUF v2/v3 reader (over mmap) and writer.
 *
 * Reader: gguf_open() maps the file and validates everything before anything
 * is returned: magic, version (2 or 3; v1 and big-endian files are rejected
 * with a clear message), counts against the file size, every string (length
 * within the file), every value type, array element types (nested arrays are
 * rejected) and lengths, bools (0 or 1), keys (non-empty, no NUL, unique),
 * tensor names (non-empty, no NUL, unique), dims (n_dims 1..4, each >= 1,
 * element and byte counts without overflow), tensor types (known ggml ids,
 * ne[0] a multiple of the block size), general.alignment (uint32 power of
 * two; default 32), tensor offsets (multiples of the alignment, data within
 * the file; overlaps are not checked). The data section starts at the first
 * aligned offset after the tensor infos. Any violation gives a one-line
 * message "<path>: <what> (offset N)" (names from the file are escaped) and
 * -1; no input can crash it, and allocations grow only with bytes parsed.
 *
 * Everything returned (keys, strings, tensor infos) is owned by the
 * gguf_file and lives until gguf_close(). Strings are NUL-terminated copies
 * (GGUF strings may contain NUL; `len` is the true length). Tensor data
 * pointers point into the mapping (aligned to general.alignment relative to
 * the file start). Key and tensor lookups are hashed.
 *
 * Writer: collects key/values and tensors, writes GGUF v3 (alignment 32, or
 * general.alignment if set) to `path.tmp` and renames it into place, so a
 * failed write never leaves a half file. Tensor data can be given up front or
 * streamed (gguf_writer_begin/write_data/finish) for models larger than RAM. */
#ifndef CINFER_FORMAT_GGUF_H
#define CINFER_FORMAT_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef enum gguf_vtype {
    GGUF_UINT8 = 0,
    GGUF_INT8 = 1,
    GGUF_UINT16 = 2,
    GGUF_INT16 = 3,
    GGUF_UINT32 = 4,
    GGUF_INT32 = 5,
    GGUF_FLOAT32 = 6,
    GGUF_BOOL = 7,
    GGUF_STRING = 8,
    GGUF_ARRAY = 9,
    GGUF_UINT64 = 10,
    GGUF_INT64 = 11,
    GGUF_FLOAT64 = 12,
    GGUF_VTYPE_COUNT
} gguf_vtype;

typedef struct gguf_str {
    const char *s; /* NUL-terminated copy owned by the file */
    uint64_t len;
} gguf_str;

#define GGUF_MAX_DIMS 4

typedef struct gguf_tensor {
    const char *name;
    uint32_t type; /* ggml type id (tensor/dtype.h) */
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS]; /* ne[0] contiguous; unused dims are 1 */
    uint64_t offset; /* relative to the data section */
    const void *data; /* into the mapping */
    size_t nbytes;
} gguf_tensor;

typedef struct gguf_file gguf_file;

int gguf_open(const char *path, gguf_file **out, cf_err *err);
/* Parses a GGUF image already in memory (not copied; must outlive the file).
 * `name` is used in messages. Used by the fuzzer and tests. */
int gguf_open_memory(const void *data, size_t size, const char *name, gguf_file **out, cf_err *err);
/* A file assembled from parts (a Hugging Face directory read as GGUF): the
 * key/values of `meta`, a GGUF image without tensors (malloc'd; the file takes
 * it and frees it), and `tensors` whose data lives elsewhere: each entry's
 * name, type, n_dims, ne, data and nbytes are copied and checked like a
 * file's (unique non-empty names, known types, nbytes equal to the shape's).
 * Unlike a file, a part may be DT_F8_B128 (FP8 with its scales in a separate
 * "<name>_scale_inv" F32 tensor).
 * `owner` keeps the data alive; release(owner) runs at gguf_close (and right
 * away when this fails). Not mapped: gguf_release_range does nothing. */
int gguf_open_parts(void *meta, size_t meta_size, const char *name, const gguf_tensor *tensors, int64_t n_tensors,
                    void *owner, void (*release)(void *), gguf_file **out, cf_err *err);
void gguf_close(gguf_file *f);

const char *gguf_path(const gguf_file *f);
uint32_t gguf_version(const gguf_file *f);
size_t gguf_alignment(const gguf_file *f);
/* File offset of the data section (tensor offsets are relative to it). */
uint64_t gguf_data_offset(const gguf_file *f);
/* Bytes of the whole image (the file's size), and its first byte. */
uint64_t gguf_image_size(const gguf_file *f);
const void *gguf_image(const gguf_file *f);
/* A 128-bit identity of the file's contents, cheap to compute (gguf_fingerprint.c):
 * XXH3-128 over the image size, every byte before the data section (header,
 * metadata, tensor table) and three 64-byte samples (start, middle, end) of
 * every tensor. Reads a few pages per tensor, not the weights. 0, or -1 when
 * out of memory. */
int gguf_fingerprint(const gguf_file *f, uint8_t out[16]);
/* "uint32", "string", "array", ...; "invalid" for out-of-range values. */
const char *gguf_vtype_name(gguf_vtype t);

/* ---- key/values ---- */
int64_t gguf_kv_count(const gguf_file *f);
int64_t gguf_find_key(const gguf_file *f, const char *key); /* -1 if absent */
const char *gguf_key_name(const gguf_file *f, int64_t i);
gguf_vtype gguf_kv_type(const gguf_file *f, int64_t i);
/* For arrays: element type and length. */
gguf_vtype gguf_arr_type(const gguf_file *f, int64_t i);
uint64_t gguf_arr_len(const gguf_file *f, int64_t i);

/* Typed getters by key. Return 0 if found and convertible, 1 if the key is
 * absent (out untouched), -1 if present with an unusable type (err says so).
 * get_int accepts any integer type and bool; get_float any number type. */
int gguf_get_int(const gguf_file *f, const char *key, int64_t *out, cf_err *err);
int gguf_get_float(const gguf_file *f, const char *key, double *out, cf_err *err);
int gguf_get_bool(const gguf_file *f, const char *key, bool *out, cf_err *err);
int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, cf_err *err);
/* Arrays: strings point into the file's index (owned by the file); numeric
 * arrays are converted into a malloc'd copy the caller frees. */
int gguf_get_arr_str(const gguf_file *f, const char *key, const gguf_str **out, uint64_t *n, cf_err *err);
int gguf_get_arr_f32(const gguf_file *f, const char *key, float **out, uint64_t *n, cf_err *err);
int gguf_get_arr_i64(const gguf_file *f, const char *key, int64_t **out, uint64_t *n, cf_err *err);
int gguf_get_arr_f64(const gguf_file *f, const char *key, double **out, uint64_t *n, cf_err *err);

/* ---- tensors ---- */
int64_t gguf_tensor_count(const gguf_file *f);
const gguf_tensor *gguf_tensor_at(const gguf_file *f, int64_t i);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name); /* NULL if absent */
/* Index of a tensor returned by gguf_tensor_at / gguf_find_tensor. */
int64_t gguf_tensor_index(const gguf_file *f, const gguf_tensor *t);

/* True when the image is a file mapping (gguf_open), false for
 * gguf_open_memory. */
bool gguf_is_mapped(const gguf_file *f);
/* Drops this process's resident pages of [p, p + n) inside the mapping
 * (rounded inward to whole pages, so a neighbour's bytes on a shared page stay)
 * with MADV_DONTNEED: the mapping is read-only and file-backed, so a later read
 * faults the bytes back in from the file (page cache) unchanged. Used after a
 * tensor has been copied (repacked), so its bytes are not resident twice.
 * Returns the bytes released (0 for an in-memory image or a range under a
 * page). */
size_t gguf_release_range(const gguf_file *f, const void *p, size_t n);

/* ---- writer ---- */
typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_create(void);
void gguf_writer_free(gguf_writer *w);
/* Setting an existing key replaces its value (order of first set is kept). */
void gguf_set_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_set_i32(gguf_writer *w, const char *key, int32_t v);
void gguf_set_f32(gguf_writer *w, const char *key, float v);
void gguf_set_bool(gguf_writer *w, const char *key, bool v);
void gguf_set_str(gguf_writer *w, const char *key, const char *v);
void gguf_set_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n);
void gguf_set_arr_str_len(gguf_writer *w, const char *key, const gguf_str *v, uint64_t n);
void gguf_set_arr_f32(gguf_writer *w, const char *key, const float *v, uint64_t n);
void gguf_set_arr_i32(gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
void gguf_set_arr_u8(gguf_writer *w, const char *key, const uint8_t *v, uint64_t n);
void gguf_set_arr_f64(gguf_writer *w, const char *key, const double *v, uint64_t n);
/* Copies every key/value of `src` (all types, arrays included). */
int gguf_writer_copy_kv(gguf_writer *w, const gguf_file *src, cf_err *err);
void gguf_writer_remove_key(gguf_writer *w, const char *key);
/* Adds a tensor; `data` (nbytes = row bytes of ne[0] x rest) is copied if
 * `copy`, otherwise referenced and must stay valid until write. `data` may be
 * NULL to declare a tensor whose bytes are streamed with the calls below.
 * Fails on a duplicate name, n_dims outside 1..4, a dim < 1, an unknown type
 * or ne[0] not a multiple of the type's block size. */
int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne,
                           const void *data, bool copy, cf_err *err);
/* Writes everything (every tensor must have data) to path.tmp, then renames. */
int gguf_writer_write(gguf_writer *w, const char *path, cf_err *err);
/* The key/values alone as a GGUF image (no tensors) in a malloc'd buffer the
 * caller owns (for gguf_open_parts). */
int gguf_writer_meta_image(gguf_writer *w, void **out, size_t *size, cf_err *err);

/* Streaming: begin() writes the header, key/values and tensor infos to
 * path.tmp; then the tensors' bytes are appended in the order they were added
 * (write_data may split or join tensors freely; padding is inserted at tensor
 * boundaries); finish() checks every byte arrived, closes and renames. After
 * begin(), no keys or tensors may be added. On any failure, or if the writer
 * is freed before finish(), path.tmp is removed. */
int gguf_writer_begin(gguf_writer *w, const char *path, cf_err *err);
int gguf_writer_write_data(gguf_writer *w, const void *data, size_t n, cf_err *err);
int gguf_writer_finish(gguf_writer *w, cf_err *err);

#endif
