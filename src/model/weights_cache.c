/* weights_cache.c - the repacked-weights cache of one load (weights_cache.h):
 * finding and verifying a cache file, handing out its buffers, and building
 * and publishing a new one. */
#include "model/weights_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cpu.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "base/version.h"
#include "tensor/kernels.h"

#ifndef CINFER_GIT_COMMIT
#define CINFER_GIT_COMMIT "unknown"
#endif

#define WC_MAX_THREADS 8
#define WC_SUFFIX ".cwc"
#define WC_TMP_MARK ".tmp."

struct wcache {
    char dir[PATH_MAX], path[PATH_MAX], tmp[PATH_MAX];
    char name[192]; /* file name under dir */
    char rejected[256];
    wcache_id id;
    bool hit, failed, finished;
    int fd; /* build: the temporary file until finish; else -1 */
    uint8_t *map;
    size_t map_len; /* hit: the file; build: the reserved window */
    wcache_entry *e;
    uint32_t n, cap, next;
    uint64_t end; /* build: bytes of the file handed out so far */
    uint64_t buf_bytes;
    double seconds;
    model_progress_fn progress;
    void *progress_ctx;
};

/* Marks the cache failed (the load is to be redone without trusting it); -1. */
__attribute__((format(printf, 3, 4))) static int cache_fail(wcache *c, cf_err *err, const char *fmt, ...) {
    c->failed = true;
    va_list ap;
    va_start(ap, fmt);
    cf_vfail(err, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- identity and name ---- */

static int make_identity(const gguf_file *f, wcache_id *id) {
    memset(id, 0, sizeof *id);
    if (gguf_fingerprint(f, id->model_fp)) return -1;
    id->model_size = gguf_image_size(f);
    id->isa = (uint32_t)cpu_isa_active();
    id->pack_layout = KERN_PACK_LAYOUT_VERSION;
    id->loader_layout = WC_LOADER_LAYOUT;
    snprintf(id->version, sizeof id->version, "%s+%s", CINFER_VERSION, CINFER_GIT_COMMIT);
    return 0;
}

/* "<model stem>-<fingerprint hex>-<isa>.cwc": one file per model file and ISA,
 * so hosts with different CPUs can share a directory; a new cinfer version
 * replaces the file of the old one. */
static void make_name(const gguf_file *f, const wcache_id *id, char *out, size_t cap) {
    const char *p = gguf_path(f), *b = strrchr(p, '/');
    b = b ? b + 1 : p;
    size_t n = strlen(b);
    if (n > 5 && !strcmp(b + n - 5, ".gguf")) n -= 5;
    char stem[65];
    size_t k = 0;
    for (size_t i = 0; i < n && k < sizeof stem - 1; i++) {
        char ch = b[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                  ch == '-' || (ch == '.' && k > 0);
        stem[k++] = ok ? ch : '_';
    }
    stem[k] = 0;
    char hex[33];
    for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", id->model_fp[i]);
    snprintf(out, cap, "%s-%s-%s" WC_SUFFIX, k ? stem : "model", hex, cpu_isa_name((cpu_isa)id->isa));
}

/* ---- the mapping ---- */

#define WC_HUGE ((size_t)2 << 20)

/* Maps len bytes of fd at a 2 MiB aligned address and asks for huge pages:
 * buffers of 2 MiB or more start at 2 MiB file offsets, so the page cache's
 * large folios of this file can be mapped with PMD entries (fewer TLB misses
 * while a matmul streams the weights, as with the anonymous copies). */
static void *map_aligned(int fd, size_t len, int prot, int flags) {
    void *area = mmap(NULL, len + WC_HUGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (area == MAP_FAILED) return MAP_FAILED;
    uintptr_t a = ((uintptr_t)area + WC_HUGE - 1) / WC_HUGE * WC_HUGE;
    void *p = mmap((void *)a, len, prot, flags | MAP_FIXED, fd, 0);
    if (p == MAP_FAILED) {
        munmap(area, len + WC_HUGE);
        return MAP_FAILED;
    }
    if (a > (uintptr_t)area) munmap(area, a - (uintptr_t)area);
    size_t tail = (uintptr_t)area + len + WC_HUGE - (a + len);
    if (tail) munmap((void *)(a + len), tail);
    (void)madvise(p, len, MADV_HUGEPAGE); /* advisory */
    return p;
}

/* ---- checksums over the mapping, in parallel ---- */

typedef struct sum_job {
    wcache *c;
    bool compute; /* build: store the checksums; hit: compare */
    _Atomic uint32_t next;
    _Atomic uint64_t done_bytes;
    _Atomic int64_t bad; /* first entry index that failed, or -1 */
} sum_job;

static void sum_some(sum_job *j, bool report) {
    wcache *c = j->c;
    uint64_t total = c->buf_bytes;
    for (;;) {
        uint32_t i = atomic_fetch_add(&j->next, 1);
        if (i >= c->n || atomic_load(&j->bad) >= 0) return;
        wcache_entry *e = &c->e[i];
        uint64_t s = wcache_checksum(c->map + e->offset, (size_t)e->bytes);
        if (j->compute) e->checksum = s;
        else if (s != e->checksum) {
            int64_t none = -1;
            atomic_compare_exchange_strong(&j->bad, &none, (int64_t)i);
        }
        uint64_t d = atomic_fetch_add(&j->done_bytes, e->bytes) + e->bytes;
        if (report && c->progress) c->progress(c->progress_ctx, MODEL_LOAD_VERIFY, (int64_t)d, (int64_t)total);
    }
}

static void *sum_thread(void *arg) {
    sum_some(arg, false);
    return NULL;
}

/* Checksums every entry; returns the first bad entry's index or -1. */
static int64_t sum_entries(wcache *c, bool compute) {
    sum_job j = {.c = c, .compute = compute};
    atomic_init(&j.next, 0);
    atomic_init(&j.done_bytes, 0);
    atomic_init(&j.bad, -1);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = cpus > 1 ? (int)(cpus < WC_MAX_THREADS ? cpus : WC_MAX_THREADS) - 1 : 0;
    pthread_t th[WC_MAX_THREADS];
    int started = 0;
    for (; started < nt && c->n > 1; started++)
        if (pthread_create(&th[started], NULL, sum_thread, &j) != 0) break;
    sum_some(&j, !compute);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    return atomic_load(&j.bad);
}

/* ---- hit: an existing file ---- */

static int read_full(int fd, void *buf, size_t n, uint64_t off) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    return (int)(got == n ? 0 : -1);
}

/* Records why the existing file is not used; -1. */
static int reject(wcache *c, const char *why) {
    snprintf(c->rejected, sizeof c->rejected, "%s", why);
    return -1;
}

/* Checks the open file fd of st_size bytes: header, identity, index. 0, or
 * -1 with c->rejected set. */
static int check_file(wcache *c, int fd, uint64_t size, wcache_hdr *h) {
    uint8_t buf[WC_HEADER_BYTES];
    size_t have = size < WC_HEADER_BYTES ? (size_t)size : WC_HEADER_BYTES;
    const char *why = NULL;
    if (read_full(fd, buf, have, 0)) return reject(c, "cannot read the header");
    if (wcache_decode_header(buf, have, size, h, &why) != WC_VALID) return reject(c, why);
    char tmp[160];
    const char *mm = wcache_identity_mismatch(h, &c->id, tmp, sizeof tmp);
    if (mm) return reject(c, mm);
    size_t ib = (size_t)wcache_index_bytes(h->n_entries);
    uint8_t *idx = malloc(ib ? ib : 1);
    c->e = calloc(h->n_entries ? h->n_entries : 1, sizeof *c->e);
    if (!idx || !c->e) {
        free(idx);
        return reject(c, "out of memory reading the index");
    }
    int r = read_full(fd, idx, ib, h->index_offset);
    if (r) why = "cannot read the index";
    else r = wcache_check_index(h, idx, ib, c->e, &why);
    free(idx);
    if (r) return reject(c, why);
    c->n = c->cap = h->n_entries;
    return 0;
}

/* Opens, checks, maps and verifies c->path. 1 hit, 0 no usable file (c->rejected says why when one exists). */
static int try_hit(wcache *c) {
    int fd = open(c->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0) {
        if (errno != ENOENT) reject(c, errno == ELOOP ? "is a symbolic link" : strerror(errno));
        return 0;
    }
    struct stat st;
    wcache_hdr h;
    int ok = 0;
    if (fstat(fd, &st)) reject(c, strerror(errno));
    else if (!S_ISREG(st.st_mode)) reject(c, "not a regular file");
    else if (st.st_uid != geteuid()) reject(c, "owned by another user");
    else if (st.st_mode & (S_IWGRP | S_IWOTH)) reject(c, "writable by group or others");
    else if (check_file(c, fd, (uint64_t)st.st_size, &h) == 0) ok = 1;
    if (ok) {
        void *p = map_aligned(fd, (size_t)h.file_bytes, PROT_READ, MAP_SHARED);
        if (p == MAP_FAILED) {
            reject(c, strerror(errno));
            ok = 0;
        } else {
            c->map = p;
            c->map_len = (size_t)h.file_bytes;
        }
    }
    close(fd);
    if (!ok) return 0;
    for (uint32_t i = 0; i < c->n; i++) c->buf_bytes += c->e[i].bytes;
    double t0 = time_now();
    int64_t bad = sum_entries(c, false);
    c->seconds = time_now() - t0;
    if (bad >= 0) {
        snprintf(c->rejected, sizeof c->rejected, "buffer %lld of %u fails its checksum", (long long)bad, c->n);
        munmap(c->map, c->map_len);
        c->map = NULL;
        c->n = 0;
        c->buf_bytes = 0;
        return 0;
    }
    c->hit = true;
    return 1;
}

/* ---- build: a new file ---- */

/* Removes <name>.tmp.<pid>.* left by writers that no longer run. */
static void remove_stale_temps(const wcache *c) {
    DIR *d = opendir(c->dir);
    if (!d) return;
    size_t nl = strlen(c->name), ml = strlen(WC_TMP_MARK);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, c->name, nl) || strncmp(de->d_name + nl, WC_TMP_MARK, ml)) continue;
        char *end;
        long pid = strtol(de->d_name + nl + ml, &end, 10);
        if (end == de->d_name + nl + ml || *end != '.' || pid <= 0 || pid > INT_MAX) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        (void)unlinkat(dirfd(d), de->d_name, 0); /* best effort: another cleaner may have won */
    }
    closedir(d);
}

static int begin_build(wcache *c, cf_err *err) {
    remove_stale_temps(c);
    static _Atomic unsigned seq;
    unsigned s = atomic_fetch_add(&seq, 1);
    if ((size_t)snprintf(c->tmp, sizeof c->tmp, "%s%s%ld.%u", c->path, WC_TMP_MARK, (long)getpid(), s) >= sizeof c->tmp)
        return cf_fail(err, "weights cache: path too long under %s", c->dir);
    c->fd = open(c->tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (c->fd < 0) return cf_fail(err, "weights cache: cannot create a file in %s: %s", c->dir, strerror(errno));
    /* a window for every buffer: they total a few times the model at most
     * (f32 copies of quantized vectors); only address space is reserved */
    c->map_len = (size_t)(8 * c->id.model_size + (1ull << 30));
    void *p = map_aligned(c->fd, c->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE);
    if (p == MAP_FAILED) {
        c->map_len = 0;
        return cf_fail(err, "weights cache: cannot map %s: %s", c->tmp, strerror(errno));
    }
    c->map = p;
    c->end = WC_HEADER_BYTES;
    return 0;
}

static void *take_build(wcache *c, const char *name, uint32_t kind, size_t bytes, cf_err *err) {
    uint64_t align = bytes >= WC_HUGE ? WC_HUGE : bytes >= 4096 ? 4096 : WC_ALIGN;
    uint64_t off = (c->end + align - 1) / align * align;
    if (off + bytes > c->map_len)
        return cache_fail(c, err, "weights cache: the buffers of %s outgrow the reserved window", name), NULL;
    int r = posix_fallocate(c->fd, (off_t)off, (off_t)bytes);
    if (r) return cache_fail(c, err, "weights cache: cannot grow %s: %s", c->tmp, strerror(r)), NULL;
    if (c->n == c->cap) {
        uint32_t cap = c->cap ? 2 * c->cap : 256;
        wcache_entry *e = cap <= WC_MAX_ENTRIES ? realloc(c->e, cap * sizeof *e) : NULL;
        if (!e) return cache_fail(c, err, "weights cache: out of memory for the index"), NULL;
        c->e = e;
        c->cap = cap;
    }
    c->e[c->n++] = (wcache_entry){.offset = off, .bytes = bytes, .kind = kind, .tag = wcache_tag(name)};
    c->end = off + bytes;
    c->buf_bytes += bytes;
    return c->map + off;
}

static int write_all(int fd, const void *p, size_t n, uint64_t off) {
    size_t done = 0;
    while (done < n) {
        ssize_t w = pwrite(fd, (const char *)p + done, n - done, (off_t)(off + done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        done += (size_t)w;
    }
    return 0;
}

static int publish(wcache *c, cf_err *err) {
    double t0 = time_now();
    (void)sum_entries(c, true);
    wcache_hdr h = {.n_entries = c->n, .data_offset = WC_HEADER_BYTES, .id = c->id};
    h.index_offset = (c->end + WC_ALIGN - 1) / WC_ALIGN * WC_ALIGN;
    size_t ib = (size_t)wcache_index_bytes(c->n);
    h.file_bytes = h.index_offset + ib;
    uint8_t *idx = malloc(ib ? ib : 1), hdr[WC_HEADER_BYTES];
    if (!idx) return cache_fail(c, err, "weights cache: out of memory");
    h.index_checksum = wcache_encode_index(c->e, c->n, idx);
    wcache_encode_header(&h, hdr);
    const char *what = NULL;
    if (write_all(c->fd, idx, ib, h.index_offset) || write_all(c->fd, hdr, sizeof hdr, 0)) what = "write";
    else if (ftruncate(c->fd, (off_t)h.file_bytes)) what = "truncate";
    else if (fsync(c->fd)) what = "fsync";
    else if (rename(c->tmp, c->path)) what = "rename";
    int e = errno;
    free(idx);
    if (what) return cache_fail(c, err, "weights cache: cannot %s %s: %s", what, c->tmp, strerror(e));
    c->tmp[0] = 0;
    int dfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) { /* the rename's durability is best effort: the file is published either way */
        (void)fsync(dfd);
        close(dfd);
    }
    close(c->fd);
    c->fd = -1;
    (void)mprotect(c->map, c->map_len, PROT_READ); /* from now on the weights are read-only */
    c->seconds = time_now() - t0;
    return 0;
}

/* ---- the interface ---- */

int wcache_open(const char *dir, const gguf_file *f, bool force_build, model_progress_fn progress, void *progress_ctx,
                wcache **out, cf_err *err) {
    *out = NULL;
    if (!gguf_is_mapped(f)) return cf_fail(err, "weights cache: the model is not a mapped file");
    wcache *c = calloc(1, sizeof *c);
    if (!c) return cf_fail(err, "weights cache: out of memory");
    c->fd = -1;
    c->progress = progress;
    c->progress_ctx = progress_ctx;
    if (make_identity(f, &c->id)) {
        free(c);
        return cf_fail(err, "weights cache: out of memory");
    }
    make_name(f, &c->id, c->name, sizeof c->name);
    if ((size_t)snprintf(c->dir, sizeof c->dir, "%s", dir) >= sizeof c->dir ||
        (size_t)snprintf(c->path, sizeof c->path, "%s/%s", dir, c->name) >= sizeof c->path) {
        free(c);
        return cf_fail(err, "weights cache: directory name too long");
    }
    if (mkdir(dir, 0755) && errno != EEXIST) {
        cf_fail(err, "weights cache: cannot make directory %s: %s", dir, strerror(errno));
        free(c);
        return -1;
    }
    if (!force_build && try_hit(c)) {
        *out = c;
        return 0;
    }
    if (c->rejected[0]) {
        char p[512];
        LOG_WARN("weights cache %s rejected: %s; rebuilding it", cf_log_escape_str(p, sizeof p, c->path), c->rejected);
    }
    free(c->e);
    c->e = NULL;
    c->n = c->cap = 0;
    if (begin_build(c, err)) {
        wcache_close(c);
        return -1;
    }
    *out = c;
    return 0;
}

void *wcache_take(wcache *c, const char *name, uint32_t kind, size_t bytes, bool *filled, cf_err *err) {
    *filled = c->hit;
    if (c->failed) return cf_fail(err, "weights cache: already failed"), NULL;
    if (!c->hit) return take_build(c, name, kind, bytes, err);
    if (c->next >= c->n) return cache_fail(c, err, "weights cache: the file has no buffer for %s", name), NULL;
    const wcache_entry *e = &c->e[c->next];
    if (e->kind != kind || e->bytes != bytes || e->tag != wcache_tag(name))
        return cache_fail(c, err, "weights cache: the file's buffer %u does not match %s", c->next, name), NULL;
    c->next++;
    return c->map + e->offset;
}

int wcache_finish(wcache *c, cf_err *err) {
    if (c->failed) return cf_fail(err, "weights cache: already failed");
    if (c->finished) return 0;
    if (c->hit && c->next != c->n)
        return cache_fail(c, err, "weights cache: the file holds %u unused buffers", c->n - c->next);
    if (!c->hit && publish(c, err)) return -1;
    c->finished = true;
    return 0;
}

bool wcache_failed(const wcache *c) { return c && c->failed; }
bool wcache_is_hit(const wcache *c) { return c && c->hit; }

void wcache_region(const wcache *c, void **p, size_t *n) {
    *p = c->map;
    *n = c->hit ? c->map_len : (size_t)c->end;
}

uint64_t wcache_buffer_bytes(const wcache *c) { return c->buf_bytes; }
const char *wcache_path(const wcache *c) { return c->path; }
const char *wcache_rejected(const wcache *c) { return c->rejected; }
double wcache_seconds(const wcache *c) { return c->seconds; }

void wcache_close(wcache *c) {
    if (!c) return;
    if (c->map) munmap(c->map, c->map_len);
    if (c->fd >= 0) close(c->fd);
    if (c->tmp[0]) (void)unlink(c->tmp); /* an unfinished build */
    free(c->e);
    free(c);
}
