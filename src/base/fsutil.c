/* fsutil.c - scratch directories made with mkdtemp and removed with nftw
 * (see fsutil.h). The directories made are kept in a small table; removal
 * refuses anything not in it. */
#include "base/fsutil.h"

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FS_MAX_SCRATCH 64

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static char *g_made[FS_MAX_SCRATCH];

int fs_make_scratch_dir(const char *parent, const char *prefix, char *out, size_t cap, cf_err *err) {
    if (!parent || !*parent) parent = getenv("TMPDIR");
    if (!parent || !*parent) parent = "/tmp";
    if (!prefix || strchr(prefix, '/')) return cf_fail(err, "scratch dir: bad prefix");
    int n = snprintf(out, cap, "%s/%sXXXXXX", parent, prefix);
    if (n < 0 || (size_t)n >= cap) return cf_fail(err, "scratch dir: path under '%s' is too long", parent);
    if (!mkdtemp(out)) return cf_fail(err, "cannot make a scratch directory in '%s': %s", parent, strerror(errno));
    char *copy = strdup(out);
    int slot = -1;
    if (pthread_mutex_lock(&g_mu) == 0) {
        for (int i = 0; copy && i < FS_MAX_SCRATCH && slot < 0; i++)
            if (!g_made[i]) g_made[slot = i] = copy;
        pthread_mutex_unlock(&g_mu);
    }
    if (slot < 0) {
        free(copy);
        if (rmdir(out) != 0) { /* empty and ours: nothing else to do */
        }
        return cf_fail(err, "scratch dir: too many scratch directories");
    }
    return 0;
}

static _Thread_local int t_rm_errno;
static _Thread_local char t_rm_path[512];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)ftw;
    int rc = flag == FTW_DP ? rmdir(path) : unlink(path);
    if (rc != 0 && !t_rm_errno) {
        t_rm_errno = flag == FTW_DNR || flag == FTW_NS ? EACCES : errno;
        snprintf(t_rm_path, sizeof t_rm_path, "%s", path);
    }
    return 0; /* keep going: remove what can be removed */
}

int fs_remove_tree_created(const char *dir, cf_err *err) {
    int slot = -1;
    if (pthread_mutex_lock(&g_mu) != 0) return cf_fail(err, "scratch dir: lock failed");
    for (int i = 0; dir && i < FS_MAX_SCRATCH && slot < 0; i++)
        if (g_made[i] && !strcmp(g_made[i], dir)) slot = i;
    pthread_mutex_unlock(&g_mu);
    if (slot < 0)
        return cf_fail(err, "refusing to remove '%s': not a scratch directory made by this process",
                       dir ? dir : "(null)");
    t_rm_errno = 0;
    t_rm_path[0] = 0;
    if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) != 0 && !t_rm_errno) t_rm_errno = errno;
    if (t_rm_errno) return cf_fail(err, "cannot remove '%s': %s", t_rm_path[0] ? t_rm_path : dir, strerror(t_rm_errno));
    if (pthread_mutex_lock(&g_mu) == 0) {
        free(g_made[slot]);
        g_made[slot] = NULL;
        pthread_mutex_unlock(&g_mu);
    }
    return 0;
}
