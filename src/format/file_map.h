/* file_map.h - maps a model file (GGUF, safetensors) read-only. Owns
 * nothing after it returns: the caller keeps the mapping and unmaps it
 * with file_unmap. Invariant: on success the path named a regular file and
 * *base covers all of its *size bytes (NULL for an empty file). */
#ifndef CINFER_FORMAT_FILE_MAP_H
#define CINFER_FORMAT_FILE_MAP_H

#include <stddef.h>

#include "base/error.h"

/* 0 with *base / *size set; -1 with one line in err naming the path
 * (cannot open / stat / mmap, or not a regular file). */
int file_map_readonly(const char *path, const void **base, size_t *size, cf_err *err);
void file_unmap(const void *base, size_t size);

#endif
