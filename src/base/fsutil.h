/* fsutil.h - scratch directories a process makes and later removes: each is a
 * fresh mkdtemp directory under a parent the caller names (or $TMPDIR, or
 * /tmp), and fs_remove_tree_created removes only directories this process
 * made with fs_make_scratch_dir -- never a path taken from input, never
 * through a shell. Used by the benchmarks and the tests. */
#ifndef CINFER_BASE_FSUTIL_H
#define CINFER_BASE_FSUTIL_H

#include <stddef.h>

#include "base/error.h"

/* Makes <parent>/<prefix>XXXXXX (mode 0700) with mkdtemp and writes its path to
 * out. parent NULL or "" means $TMPDIR, or /tmp when that is unset. prefix must
 * not contain '/'. Remembers the directory for fs_remove_tree_created. */
int fs_make_scratch_dir(const char *parent, const char *prefix, char *out, size_t cap, cf_err *err);

/* Removes dir and everything below it, without following symbolic links and
 * without crossing into other file systems. Refuses (-1, nothing touched) any
 * dir that fs_make_scratch_dir did not return to this process. */
int fs_remove_tree_created(const char *dir, cf_err *err);

#endif
