/* safetensors.h - reader of Hugging Face .safetensors files (over mmap) and of
 * sharded sets (model.safetensors.index.json).
 *
 * File layout: u64 little-endian header length N | N bytes of JSON | data.
 * The JSON is an object: "__metadata__" (optional, string -> string) and one
 * entry per tensor: {"dtype": "BF16", "shape": [rows, cols], "data_offsets":
 * [begin, end]} with offsets relative to the data section (byte 8 + N).
 *
 * st_open() validates everything before anything is returned: the header
 * length (at least 2, at most 100 MiB and inside the file), the JSON (an
 * object, no duplicate keys), every tensor entry (known dtype, shape of at most
 * ST_MAX_DIMS non-negative dimensions, begin <= end <= data size, end - begin
 * equal to elements x element size without overflow, data aligned to the
 * element size) and that no two tensors' bytes overlap. Any violation is a
 * one-line message "<path>: <what>" naming the tensor and the field (names
 * from the file escaped) and -1; no input can crash it.
 *
 * Shapes are as the file stores them (row-major: shape[n_dims - 1] is
 * contiguous), the reverse of GGUF's ne[]. Everything returned is owned by the
 * st_file and lives until st_close(); data pointers point into the mapping. */
#ifndef CINFER_FORMAT_SAFETENSORS_H
#define CINFER_FORMAT_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER (100u << 20)

typedef enum st_dtype {
    ST_BOOL,
    ST_U8,
    ST_I8,
    ST_F8_E4M3,
    ST_F8_E5M2,
    ST_F8_E8M0,
    ST_I16,
    ST_U16,
    ST_F16,
    ST_BF16,
    ST_I32,
    ST_U32,
    ST_F32,
    ST_I64,
    ST_U64,
    ST_F64,
    ST_DTYPE_COUNT
} st_dtype;

typedef struct st_tensor {
    const char *name; /* NUL-terminated, owned by the file */
    st_dtype dtype;
    int n_dims; /* 0 for a scalar */
    int64_t shape[ST_MAX_DIMS];
    uint64_t begin; /* offset of the data in the data section */
    const void *data; /* into the mapping */
    size_t nbytes;
} st_tensor;

typedef struct st_file st_file;

int st_open(const char *path, st_file **out, cf_err *err);
/* Parses an image already in memory (not copied; must outlive the file);
 * `name` is used in messages. Used by the fuzzer and the tests. */
int st_open_memory(const void *data, size_t size, const char *name, st_file **out, cf_err *err);
void st_close(st_file *f);

const char *st_path(const st_file *f);
/* "F32", "BF16", ... ("?" for out-of-range values). */
const char *st_dtype_name(st_dtype t);
size_t st_dtype_size(st_dtype t);
int64_t st_tensor_count(const st_file *f);
const st_tensor *st_tensor_at(const st_file *f, int64_t i); /* in data order */
const st_tensor *st_find_tensor(const st_file *f, const char *name); /* NULL if absent */
/* A "__metadata__" value, or NULL. */
const char *st_metadata(const st_file *f, const char *key);

/* Renders a name from a file for a one-line message into out (cap >= 16):
 * control bytes become \xNN, long names are cut with "...". Returns out. */
const char *st_escape(const char *s, char *out, size_t cap);

/* ---- a set of shards: one model's weights ---- */

typedef struct st_set st_set;

/* Opens the weights of a Hugging Face model directory: model.safetensors.index.json
 * (its "weight_map" names each tensor's shard: plain file names in `dir`; every
 * shard is opened once and must hold exactly the tensors the map gives it, no
 * tensor may appear in two shards), or else a single model.safetensors.
 * Errors name the file and the field. */
int st_set_open_dir(const char *dir, st_set **out, cf_err *err);
void st_set_close(st_set *s);
int64_t st_set_count(const st_set *s);
/* The i-th tensor across all shards (shard order, then data order). */
const st_tensor *st_set_at(const st_set *s, int64_t i);
/* NULL if absent; *file (if non-NULL) gets the shard's path. */
const st_tensor *st_set_find(const st_set *s, const char *name, const char **file);

#endif
