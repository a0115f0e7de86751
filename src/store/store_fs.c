/* store_fs.c - see store_fs.h. Every syscall's result is checked; errno is
 * reported to the caller, which decides whether the store degrades. Objects
 * are opened O_NONBLOCK | O_NOFOLLOW and must be regular files (a FIFO or a
 * symlink planted under an object name is quarantined, never read). */
#include "store/store_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"

#define STORE_PATH_MAX 4096

static int mkdir_ok(const char *p) { return mkdir(p, 0755) == 0 || errno == EEXIST ? 0 : -1; }

int store_fs_prepare(const char *dir, cf_err *err) {
    char p[STORE_PATH_MAX];
    if (strlen(dir) + 32 > sizeof p) return cf_fail(err, "store: path '%s' is too long", dir);
    if (mkdir_ok(dir)) return cf_fail(err, "store: cannot create '%s': %s", dir, strerror(errno));
    snprintf(p, sizeof p, "%s/objects", dir);
    if (mkdir_ok(p)) return cf_fail(err, "store: cannot create '%s': %s", p, strerror(errno));
    snprintf(p, sizeof p, "%s/quarantine", dir);
    if (mkdir_ok(p)) return cf_fail(err, "store: cannot create '%s': %s", p, strerror(errno));
    return 0;
}

/* Makes objects/ab and objects/ab/cd for the object path p (…/objects/ab/cd/<hex>). */
static int store_fs_fanout(const char *p) {
    char d[STORE_PATH_MAX];
    size_t n = strlen(p);
    if (n < STORE_HEX_BYTES + 6 || n >= sizeof d) return -1;
    memcpy(d, p, n + 1);
    d[n - STORE_HEX_BYTES] = 0; /* …/objects/ab/cd */
    if (mkdir(d, 0755) == 0 || errno == EEXIST) return 0;
    if (errno != ENOENT) return -1;
    d[n - STORE_HEX_BYTES - 3] = 0; /* …/objects/ab */
    if (mkdir_ok(d)) return -1;
    d[n - STORE_HEX_BYTES - 3] = '/';
    return mkdir_ok(d);
}

static atomic_uint store_tmp_counter;

static int write_all(int fd, const struct iovec *iov0, int n_iov) {
    struct iovec iov[3];
    memcpy(iov, iov0, (size_t)n_iov * sizeof *iov);
    int i = 0;
    while (i < n_iov) {
        ssize_t w = writev(fd, iov + i, n_iov - i);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        size_t left = (size_t)w;
        while (i < n_iov && left >= iov[i].iov_len) left -= iov[i++].iov_len;
        if (i < n_iov) {
            iov[i].iov_base = (char *)iov[i].iov_base + left;
            iov[i].iov_len -= left;
        }
    }
    return 0;
}

store_pub_result store_fs_publish(const char *dir, store_obj_hdr *h, const int32_t *tokens, const void *payload,
                                  const store_mac_key *mac_key, bool sync, int64_t now, int *err_no, cf_err *err) {
    char path[STORE_PATH_MAX], tmp[STORE_PATH_MAX + 64];
    uint8_t hdr[STORE_HDR_FIXED + 4 * 1024];
    uint8_t *hb = hdr;
    *err_no = 0;
    if (store_object_path(dir, h->key, path, sizeof path)) {
        *err_no = ENAMETOOLONG;
        cf_fail(err, "store: path too long");
        return STORE_PUB_ERROR;
    }
    struct stat sb;
    if (stat(path, &sb) == 0) return STORE_PUB_EXISTS;
    uint32_t hl = store_header_len(h->n_tokens);
    if (hl > sizeof hdr && !(hb = malloc(hl))) {
        *err_no = ENOMEM;
        cf_fail(err, "store: out of memory");
        return STORE_PUB_ERROR;
    }
    store_pub_result res = STORE_PUB_ERROR;
    int fd = -1;
    const char *what = "encode";
    uint8_t mac[STORE_MAC_BYTES];
    h->flags = mac_key ? STORE_FLAG_MAC : 0;
    if (!store_encode(h, tokens, payload, hb, hl) ||
        (mac_key && store_mac(mac_key, hb, hl, payload, h->payload_len, mac))) {
        *err_no = EINVAL;
        cf_fail(err, "store: cannot encode a block of %u tokens", h->n_tokens);
        goto out;
    }
    what = "mkdir";
    if (store_fs_fanout(path)) goto fail;
    snprintf(tmp, sizeof tmp, "%s%s%d.%u", path, STORE_SUFFIX_TMP, (int)getpid(),
             atomic_fetch_add(&store_tmp_counter, 1));
    what = "create";
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) goto fail;
    struct iovec iov[3] = {{hb, hl}, {(void *)payload, (size_t)h->payload_len}, {mac, sizeof mac}};
    int n_iov = 1;
    if (h->payload_len) n_iov++;
    if (mac_key) iov[n_iov++] = iov[2];
    what = "write";
    if (write_all(fd, iov, n_iov)) goto fail;
    what = "fsync";
    if (sync && fsync(fd)) goto fail;
    struct timespec ts[2] = {{.tv_sec = now}, {.tv_sec = h->expires}}; /* atime = last use, mtime = expiry */
    what = "futimens";
    if (futimens(fd, ts)) goto fail;
    what = "close";
    int c = close(fd);
    fd = -1;
    if (c) goto fail;
    what = "rename";
    if (rename(tmp, path)) goto fail;
    if (sync) { /* make the rename durable */
        char d[STORE_PATH_MAX];
        snprintf(d, sizeof d, "%.*s", (int)(strlen(path) - STORE_HEX_BYTES), path);
        int dfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            if (fsync(dfd)) { /* the object is published; durability is best effort */
            }
            close(dfd);
        }
    }
    res = STORE_PUB_WRITTEN;
    goto out;
fail:
    *err_no = errno ? errno : EIO;
    cf_fail(err, "store: %s %s: %s", what, fd >= 0 || !strcmp(what, "create") ? tmp : path, strerror(*err_no));
    if (fd >= 0) close(fd);
    if (strcmp(what, "mkdir") && strcmp(what, "create") && strcmp(what, "encode")) unlink(tmp);
out:
    if (hb != hdr) free(hb);
    return res;
}

int store_fs_open_file(const char *path, int *err_no) {
    /* O_NONBLOCK: opening a FIFO for reading does not wait for a writer (regular files ignore it);
     * O_NOFOLLOW: a symlink fails with ELOOP instead of reading whatever it points at */
    int fl = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW;
    int fd = open(path, fl | O_NOATIME);
    if (fd < 0 && errno == EPERM) fd = open(path, fl);
    if (fd < 0) {
        *err_no = errno == ELOOP ? STORE_ENOTREG : errno;
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb)) {
        *err_no = errno;
        close(fd);
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        *err_no = STORE_ENOTREG;
        return -1;
    }
    *err_no = 0;
    return fd;
}

int store_fs_open(const char *dir, const uint8_t key[STORE_KEY_BYTES], int *err_no) {
    char path[STORE_PATH_MAX];
    if (store_object_path(dir, key, path, sizeof path)) {
        *err_no = ENAMETOOLONG;
        return -1;
    }
    int fd = store_fs_open_file(path, err_no);
    if (fd < 0 && *err_no == STORE_ENOTREG) {
        cf_err qe;
        char hex[STORE_HEX_BYTES];
        store_key_hex(key, hex);
        if (store_fs_quarantine(dir, key, &qe)) LOG_WARN("store: %s is not a regular file; %s", hex, qe.msg);
        else LOG_WARN("store: %s is not a regular file: quarantined", hex);
    }
    return fd;
}

static ssize_t pread_all(int fd, struct iovec *iov, int n_iov, uint64_t total) {
    uint64_t got = 0;
    while (got < total) {
        ssize_t r = preadv(fd, iov, n_iov, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) break;
        got += (uint64_t)r;
        size_t left = (size_t)r;
        while (n_iov > 0 && left >= iov[0].iov_len) {
            left -= iov[0].iov_len;
            iov++;
            n_iov--;
        }
        if (n_iov > 0) {
            iov[0].iov_base = (char *)iov[0].iov_base + left;
            iov[0].iov_len -= left;
        }
    }
    return (ssize_t)got;
}

store_load_result store_fs_load_fd(const char *dir, int fd, const store_expect *x0, uint8_t *hdr_buf, void *payload_dst,
                                   int64_t now, int64_t touch_interval_s, uint64_t *bytes_read, cf_err *err) {
    *bytes_read = 0;
    struct stat sb;
    if (fstat(fd, &sb)) {
        int e = errno;
        close(fd);
        cf_fail(err, "store: fstat: %s", strerror(e));
        return STORE_LOAD_ERROR;
    }
    uint32_t hl = store_header_len(x0->n_tokens);
    uint64_t want = hl + x0->payload_len;
    uint8_t mac[STORE_MAC_BYTES];
    store_expect x = *x0;
    x.mac = NULL;
    store_load_result res;
    const char *why = NULL;
    if (!S_ISREG(sb.st_mode)) {
        why = "not a regular file";
        res = STORE_LOAD_QUARANTINED;
    } else if ((uint64_t)sb.st_size != want && (uint64_t)sb.st_size != want + STORE_MAC_BYTES) {
        why = "file length (truncated or padded)";
        res = STORE_LOAD_QUARANTINED;
    } else {
        /* a file one MAC longer carries a trailer: read it too (store_verify checks it matches the flags) */
        struct iovec iov[3] = {{hdr_buf, hl}, {payload_dst, (size_t)x.payload_len}, {mac, sizeof mac}};
        if ((uint64_t)sb.st_size > want) {
            want += STORE_MAC_BYTES;
            x.mac = mac;
        }
        ssize_t got = pread_all(fd, iov, x.mac ? 3 : 2, want);
        if (got < 0) {
            int e = errno;
            close(fd);
            cf_fail(err, "store: read: %s", strerror(e));
            return STORE_LOAD_ERROR;
        }
        *bytes_read = (uint64_t)got;
        store_verdict v = (uint64_t)got != want
                              ? STORE_CORRUPT
                              : store_verify(hdr_buf, hl, payload_dst, (uint64_t)sb.st_size, &x, now, &why);
        if (v == STORE_VALID) {
            if (sb.st_atime < now - touch_interval_s) {
                struct timespec ts[2] = {{.tv_sec = now}, {.tv_nsec = UTIME_OMIT}};
                if (futimens(fd, ts)) { /* read-only store: LRU order just goes stale */
                }
            }
            close(fd);
            return STORE_LOAD_HIT;
        }
        if (v == STORE_EXPIRED || v == STORE_OTHER_VERSION) {
            close(fd);
            return v == STORE_EXPIRED ? STORE_LOAD_EXPIRED : STORE_LOAD_MISS;
        }
        if (!why) why = "short read";
        res = STORE_LOAD_QUARANTINED;
    }
    close(fd);
    cf_err qe;
    if (store_fs_quarantine(dir, x.key, &qe)) cf_fail(err, "store: corrupt object (%s); %s", why, qe.msg);
    else cf_fail(err, "store: corrupt object quarantined (%s)", why);
    return res;
}

store_load_result store_fs_load(const char *dir, const store_expect *x, uint8_t *hdr_buf, void *payload_dst,
                                int64_t now, int64_t touch_interval_s, uint64_t *bytes_read, cf_err *err) {
    int e = 0;
    *bytes_read = 0;
    int fd = store_fs_open(dir, x->key, &e);
    if (fd < 0) {
        if (e == ENOENT || e == ENOTDIR) return STORE_LOAD_MISS;
        if (e == STORE_ENOTREG) {
            cf_fail(err, "store: not a regular file: quarantined");
            return STORE_LOAD_QUARANTINED;
        }
        cf_fail(err, "store: open: %s", strerror(e));
        return STORE_LOAD_ERROR;
    }
    return store_fs_load_fd(dir, fd, x, hdr_buf, payload_dst, now, touch_interval_s, bytes_read, err);
}

int store_fs_quarantine(const char *dir, const uint8_t key[STORE_KEY_BYTES], cf_err *err) {
    char path[STORE_PATH_MAX], q[STORE_PATH_MAX + 128], hex[STORE_HEX_BYTES];
    if (store_object_path(dir, key, path, sizeof path)) return cf_fail(err, "store: path too long");
    store_key_hex(key, hex);
    snprintf(q, sizeof q, "%s/quarantine/%s.%lld.%d", dir, hex, (long long)time(NULL), (int)getpid());
    if (rename(path, q) && errno != ENOENT) return cf_fail(err, "cannot quarantine %s: %s", hex, strerror(errno));
    return 0;
}

int store_key_load(const char *path, store_mac_key *k, cf_err *err) {
    memset(k, 0, sizeof *k);
    int e = 0;
    int fd = store_fs_open_file(path, &e);
    if (fd < 0) {
        if (e == STORE_ENOTREG) return cf_fail(err, "store key file %s: not a regular file", path);
        return cf_fail(err, "store key file %s: %s", path, strerror(e));
    }
    struct stat sb;
    if (fstat(fd, &sb)) {
        e = errno;
        close(fd);
        return cf_fail(err, "store key file %s: fstat: %s", path, strerror(e));
    }
    if (sb.st_mode & (S_IROTH | S_IWOTH)) {
        close(fd);
        return cf_fail(err, "store key file %s: readable or writable by others (mode %03o): chmod o-rw it", path,
                       (unsigned)(sb.st_mode & 0777));
    }
    if (sb.st_size < STORE_MAC_KEY_MIN || sb.st_size > STORE_MAC_KEY_MAX) {
        close(fd);
        return cf_fail(err, "store key file %s: %lld bytes (need %d to %d)", path, (long long)sb.st_size,
                       STORE_MAC_KEY_MIN, STORE_MAC_KEY_MAX);
    }
    size_t got = 0;
    while (got < (size_t)sb.st_size) {
        ssize_t r = read(fd, k->bytes + got, (size_t)sb.st_size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != (size_t)sb.st_size) {
        memset(k, 0, sizeof *k);
        return cf_fail(err, "store key file %s: short read", path);
    }
    k->len = got;
    return 0;
}

int store_parse_duration(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0) return -1;
    long long mul = 1;
    if (*end == 's') mul = 1, end++;
    else if (*end == 'm') mul = 60, end++;
    else if (*end == 'h') mul = 3600, end++;
    else if (*end == 'd') mul = 86400, end++;
    if (*end || v > LLONG_MAX / mul) return -1;
    *out = v * mul;
    return 0;
}
