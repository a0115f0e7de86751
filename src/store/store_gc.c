/* store_gc.c - see store_gc.h. The walk is depth-fixed (objects/ab/cd/file)
 * with *at() calls on directory fds, never following symlinks; the LRU
 * candidates are collected into one growing array, sorted once. GC only
 * stat()s (regular files only); the summary opens objects O_NONBLOCK |
 * O_NOFOLLOW, so a FIFO under an object name cannot block it. */
#include "store/store_gc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/store_format.h"
#include "store/store_fs.h"

typedef struct gc_walk {
    int64_t now, real_now;
    bool collect; /* a quota is set: remember live objects for the LRU pass (48 bytes each) */
    uint64_t live; /* bytes of live objects */
    store_gc_result *r;
    store_gc_cand *v;
    size_t n, cap;
    bool oom;
} gc_walk;

static bool is_hex2(const char *s) {
    for (int i = 0; i < 2; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return s[2] == 0;
}

/* Calls fn(ctx, dirfd, name) for every file under objects/ab/cd/. */
typedef void (*gc_file_fn)(void *ctx, int dfd, const char *name);

static int gc_for_each(const char *dir, gc_file_fn fn, void *ctx, cf_err *err) {
    char p[4096];
    snprintf(p, sizeof p, "%s/objects", dir);
    DIR *top = opendir(p);
    if (!top) return cf_fail(err, "store: cannot read '%s': %s", p, strerror(errno));
    struct dirent *a;
    while ((a = readdir(top))) {
        if (!is_hex2(a->d_name)) continue;
        int afd = openat(dirfd(top), a->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC); /* no symlinks */
        DIR *ad = afd >= 0 ? fdopendir(afd) : NULL;
        if (!ad) {
            if (afd >= 0) close(afd);
            continue;
        }
        struct dirent *b;
        while ((b = readdir(ad))) {
            if (!is_hex2(b->d_name)) continue;
            int bfd = openat(dirfd(ad), b->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            DIR *bd = bfd >= 0 ? fdopendir(bfd) : NULL;
            if (!bd) {
                if (bfd >= 0) close(bfd);
                continue;
            }
            struct dirent *f;
            while ((f = readdir(bd)))
                if (f->d_name[0] != '.') fn(ctx, dirfd(bd), f->d_name);
            closedir(bd);
        }
        closedir(ad);
    }
    closedir(top);
    return 0;
}

static void gc_unlink(gc_walk *w, int dfd, const char *name, uint64_t size, uint64_t *counter) {
    if (unlinkat(dfd, name, 0) == 0) {
        (*counter)++;
        w->r->bytes_deleted += size;
    } else if (errno != ENOENT) {
        w->r->errors++;
    }
}

static void gc_visit(void *ctx, int dfd, const char *name) {
    gc_walk *w = ctx;
    struct stat sb;
    if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW)) {
        if (errno != ENOENT) w->r->errors++;
        return;
    }
    if (!S_ISREG(sb.st_mode)) return;
    size_t len = strlen(name);
    uint8_t key[STORE_KEY_BYTES];
    if (len > STORE_HEX_BYTES - 1 && strstr(name, STORE_SUFFIX_TMP)) {
        if (sb.st_mtime <= w->real_now - STORE_GC_TMP_AGE_S) gc_unlink(w, dfd, name, 0, &w->r->deleted_tmp);
        return;
    }
    if (len != STORE_HEX_BYTES - 1 || store_hex_key(name, key)) return; /* not ours */
    w->r->objects++;
    w->r->bytes += (uint64_t)sb.st_size;
    if (store_is_expired((int64_t)sb.st_mtime, w->now)) {
        gc_unlink(w, dfd, name, (uint64_t)sb.st_size, &w->r->deleted_expired);
        return;
    }
    w->live += (uint64_t)sb.st_size;
    if (!w->collect) return;
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 1024;
        store_gc_cand *v = realloc(w->v, cap * sizeof *v);
        if (!v) {
            w->oom = true;
            return;
        }
        w->v = v;
        w->cap = cap;
    }
    store_gc_cand *e = &w->v[w->n++];
    memcpy(e->key, key, sizeof key);
    e->atime = sb.st_atime;
    e->size = sb.st_size;
}

static int gc_cmp(const void *a, const void *b) {
    const store_gc_cand *x = a, *y = b;
    if (x->atime != y->atime) return x->atime < y->atime ? -1 : 1;
    return memcmp(x->key, y->key, STORE_KEY_BYTES);
}

int64_t store_expiry_for(int64_t now, int cls, const int64_t retention_s[STORE_N_CLASSES]) {
    if (cls < 0 || cls >= STORE_N_CLASSES) cls = 0;
    return now + retention_s[cls];
}

size_t store_gc_lru_victims(store_gc_cand *v, size_t n, uint64_t live, int64_t quota_bytes) {
    if (quota_bytes <= 0 || live <= (uint64_t)quota_bytes) return 0;
    qsort(v, n, sizeof *v, gc_cmp);
    size_t k = 0;
    while (k < n && live > (uint64_t)quota_bytes) live -= (uint64_t)v[k++].size;
    return k;
}

static void gc_quarantine(const char *dir, gc_walk *w) {
    char p[4096];
    snprintf(p, sizeof p, "%s/quarantine", dir);
    DIR *d = opendir(p);
    if (!d) return;
    struct dirent *f;
    while ((f = readdir(d))) {
        struct stat sb;
        if (f->d_name[0] == '.' || fstatat(dirfd(d), f->d_name, &sb, AT_SYMLINK_NOFOLLOW) || !S_ISREG(sb.st_mode))
            continue;
        if (sb.st_ctime <= w->real_now - STORE_GC_QUARANTINE_AGE_S)
            gc_unlink(w, dirfd(d), f->d_name, (uint64_t)sb.st_size, &w->r->deleted_quarantine);
    }
    closedir(d);
}

int store_gc(const char *dir, int64_t now, int64_t quota_bytes, store_gc_result *r, cf_err *err) {
    memset(r, 0, sizeof *r);
    gc_walk w = {.now = now, .real_now = (int64_t)time(NULL), .r = r, .collect = quota_bytes > 0};
    if (gc_for_each(dir, gc_visit, &w, err)) return -1;
    gc_quarantine(dir, &w);
    uint64_t live = w.live;
    /* the decision is store_gc_lru_victims; a victim that cannot be unlinked stays live, so the
       decision is asked again over the objects after it */
    size_t i = 0;
    while (!w.oom && i < w.n && live > (uint64_t)quota_bytes && quota_bytes > 0) {
        size_t k = store_gc_lru_victims(w.v + i, w.n - i, live, quota_bytes);
        if (k == 0) break;
        for (size_t j = i; j < i + k; j++) {
            char path[4096];
            if (store_object_path(dir, w.v[j].key, path, sizeof path)) continue;
            if (unlink(path) == 0) {
                r->deleted_lru++;
                r->bytes_deleted += (uint64_t)w.v[j].size;
            } else if (errno != ENOENT) {
                r->errors++;
                continue;
            }
            live -= (uint64_t)w.v[j].size;
        }
        i += k;
    }
    if (w.oom) r->errors++;
    r->objects_after = r->objects - r->deleted_expired - r->deleted_lru;
    r->bytes_after = live;
    free(w.v);
    return 0;
}

/* ---- summary ---- */

typedef struct sum_walk {
    int64_t now;
    store_summary *s;
    uint8_t fps[16][STORE_KEY_BYTES];
    int n_fps;
} sum_walk;

static void sum_visit(void *ctx, int dfd, const char *name) {
    sum_walk *w = ctx;
    store_summary *s = w->s;
    if (strstr(name, STORE_SUFFIX_TMP)) {
        s->tmp_files++;
        return;
    }
    uint8_t key[STORE_KEY_BYTES];
    if (strlen(name) != STORE_HEX_BYTES - 1 || store_hex_key(name, key)) return;
    /* never blocks on (or follows) what is under an object name: a FIFO or symlink counts as unreadable */
    int fl = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW;
    int fd = openat(dfd, name, fl | O_NOATIME);
    if (fd < 0 && errno == EPERM) fd = openat(dfd, name, fl);
    uint8_t buf[STORE_HDR_FIXED];
    struct stat sb;
    store_obj_hdr h;
    bool ok = fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
              pread(fd, buf, sizeof buf, 0) == (ssize_t)sizeof buf &&
              store_decode_header(buf, sizeof buf, &h, NULL) == 0;
    if (fd >= 0) close(fd);
    if (!ok) {
        s->unreadable++;
        return;
    }
    s->objects++;
    s->bytes += (uint64_t)sb.st_size;
    if (h.expires <= w->now) s->expired++;
    int c = h.traffic_class >= 0 && h.traffic_class < STORE_N_CLASSES ? h.traffic_class : 0;
    s->class_objects[c]++;
    s->class_bytes[c] += (uint64_t)sb.st_size;
    if (s->objects == 1 || h.created < s->oldest_created) s->oldest_created = h.created;
    if (s->objects == 1 || h.created > s->newest_created) s->newest_created = h.created;
    if (s->objects == 1 || sb.st_atime < s->oldest_access) s->oldest_access = sb.st_atime;
    if (h.expires > w->now && (s->next_expiry == 0 || h.expires < s->next_expiry)) s->next_expiry = h.expires;
    for (int i = 0; i < w->n_fps; i++)
        if (!memcmp(w->fps[i], h.fingerprint, STORE_KEY_BYTES)) return;
    if (w->n_fps < 16) memcpy(w->fps[w->n_fps++], h.fingerprint, STORE_KEY_BYTES);
    s->fingerprints = (uint64_t)w->n_fps;
}

int store_summarize(const char *dir, int64_t now, store_summary *s, cf_err *err) {
    memset(s, 0, sizeof *s);
    sum_walk w = {.now = now, .s = s};
    if (gc_for_each(dir, sum_visit, &w, err)) return -1;
    char p[4096];
    snprintf(p, sizeof p, "%s/quarantine", dir);
    DIR *d = opendir(p);
    if (d) {
        struct dirent *f;
        while ((f = readdir(d))) {
            struct stat sb;
            if (f->d_name[0] == '.' || fstatat(dirfd(d), f->d_name, &sb, AT_SYMLINK_NOFOLLOW)) continue;
            s->quarantined++;
            s->quarantined_bytes += (uint64_t)sb.st_size;
        }
        closedir(d);
    }
    return 0;
}

/* ---- retention ---- */

static const char *const class_names[STORE_N_CLASSES] = {"default", "chat", "agent"};

void store_retention_defaults(int64_t out[STORE_N_CLASSES]) {
    out[STORE_CLASS_DEFAULT] = STORE_RETENTION_DEFAULT_S;
    out[STORE_CLASS_CHAT] = STORE_RETENTION_CHAT_S;
    out[STORE_CLASS_AGENT] = STORE_RETENTION_AGENT_S;
}

int store_class_parse(const char *name) {
    for (int i = 0; i < STORE_N_CLASSES; i++)
        if (!strcmp(name, class_names[i])) return i;
    return -1;
}

const char *store_class_name(int cls) { return cls >= 0 && cls < STORE_N_CLASSES ? class_names[cls] : "?"; }

int store_retention_parse(const char *spec, int64_t out[STORE_N_CLASSES], int64_t *swa_s, cf_err *err) {
    store_retention_defaults(out);
    if (swa_s) *swa_s = 0;
    const char *p = spec;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[64];
        if (len == 0 || len >= sizeof item) return cf_fail(err, "retention: bad item in '%s'", spec);
        memcpy(item, p, len);
        item[len] = 0;
        char *eq = strchr(item, '=');
        if (!eq) return cf_fail(err, "retention: '%s' is not CLASS=DURATION (e.g. agent=3d)", item);
        *eq = 0;
        bool swa = swa_s && !strcmp(item, "swa");
        int c = store_class_parse(item);
        if (c < 0 && !swa)
            return cf_fail(err, "retention: unknown traffic class '%s' (default, chat, agent%s)", item,
                           swa_s ? ", swa" : "");
        int64_t s;
        if (store_parse_duration(eq + 1, &s) || s <= 0)
            return cf_fail(err, "retention: bad duration '%s' for %s (e.g. 90s, 15m, 12h, 3d)", eq + 1, item);
        if (swa) *swa_s = s;
        else out[c] = s;
        p += len;
        if (*p == ',') p++;
    }
    return 0;
}
