/* testutil_scratch.c - scratch directories for tests (see testutil.h): made
 * with mkdtemp through base/fsutil.h and removed only through it, so a test
 * never deletes a path it did not create. Separate from testutil.c because the
 * public-API tests (tests/unit/public/) see include/ only and do not link it. */
#include <stdio.h>
#include <string.h>

#include "base/fsutil.h"
#include "testutil.h"

const char *test_scratch_path(char *buf, size_t cap, const char *tag) {
    char prefix[128];
    cf_err err = {0};
    snprintf(prefix, sizeof prefix, "cinfer-test-%s-", tag);
    if (cap < 3 || fs_make_scratch_dir(NULL, prefix, buf, cap - 2, &err)) {
        fprintf(stderr, "warning: %s\n", err.msg);
        if (cap) buf[0] = 0;
        return NULL;
    }
    strcat(buf, "/d");
    return buf;
}

int test_scratch_remove(const char *path) {
    char dir[4096];
    const char *slash = path ? strrchr(path, '/') : NULL;
    if (!slash || (size_t)(slash - path) >= sizeof dir) {
        fprintf(stderr, "warning: '%s' is not a scratch path\n", path ? path : "(null)");
        return -1;
    }
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = 0;
    cf_err err = {0};
    if (fs_remove_tree_created(dir, &err)) {
        fprintf(stderr, "warning: %s\n", err.msg);
        return -1;
    }
    return 0;
}
