/* gguf_internal.h - raw accessors shared by the GGUF reader (gguf.c) and the
 * writer (gguf_write.c, for gguf_writer_copy_kv). Not for other modules: the
 * public API in gguf.h converts and checks types; these hand out the index
 * as stored. All pointers are owned by the gguf_file. */
#ifndef CINFER_FORMAT_GGUF_INTERNAL_H
#define CINFER_FORMAT_GGUF_INTERNAL_H

#include "format/gguf.h"

/* Bytes of one scalar of type t (0 for STRING/ARRAY/invalid). */
size_t gguf_vtype_size(gguf_vtype t);
/* Scalar kv i: its little-endian bytes (gguf_vtype_size(type) of them). */
const void *gguf_kv_scalar_raw(const gguf_file *f, int64_t i);
/* String kv i, or NULL if not a string. */
const gguf_str *gguf_kv_str(const gguf_file *f, int64_t i);
/* Array kv i: for string arrays a `const gguf_str *` index, otherwise the
 * packed little-endian payload in the image (unaligned). NULL if not an array. */
const void *gguf_arr_raw(const gguf_file *f, int64_t i);

#endif
