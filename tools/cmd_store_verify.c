/* cmd_store_verify.c - `cinfer store verify DIR`: reads every published
 * object of a persistent KV store directory (docs/store.md) in full and
 * checks it against itself: magic, version, header length, the key in the
 * header = the file name, token count, payload length = file size - header,
 * and the XXH3 checksum over header and payload (store_verify with the
 * expectations taken from the object's own header), and with --key-file the
 * HMAC-SHA256 trailer (an object without a valid MAC is bad). What it cannot
 * check without the model is the fingerprint; a loading server checks that.
 * Files are opened O_NONBLOCK | O_NOFOLLOW (store_fs_open_file): a FIFO or
 * symlink under an object name is reported bad, never read or followed.
 * Read-only: nothing is moved or deleted, and files are opened O_NOATIME
 * so the LRU order (atime) stays as it was (a server quarantines a bad object
 * when it meets it). Prints each bad object and a summary; exit 0 when every
 * object verifies, 1 otherwise. Called by cmd_store.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "store/store_format.h"
#include "store/store_fs.h"

typedef struct verify_count {
    unsigned long long ok, expired, other_version, bad, unreadable, tmp;
} verify_count;

/* Whole file into a malloc'd buffer; -1 on a read error. */
static int slurp(const char *path, uint8_t **out, size_t *len) {
    int e0 = 0;
    int fd = store_fs_open_file(path, &e0); /* O_NOATIME: atime is the LRU order, reading must not move it */
    if (fd < 0) {
        errno = e0 == STORE_ENOTREG ? EINVAL : e0;
        return e0 == STORE_ENOTREG ? -2 : -1;
    }
    struct stat st;
    uint8_t *b = NULL;
    if (fstat(fd, &st)) goto fail;
    if (st.st_size > (1ll << 30)) { /* no block object is that large: do not read it into memory */
        errno = EFBIG;
        goto fail;
    }
    if (!(b = malloc((size_t)st.st_size + 1))) goto fail;
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, b + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fd);
    *out = b;
    *len = got;
    return 0;
fail:;
    int e = errno;
    free(b);
    close(fd);
    errno = e;
    return -1;
}

static void verify_one(const char *path, const char *name, int64_t now, const store_mac_key *mk, verify_count *c) {
    uint8_t key[STORE_KEY_BYTES];
    if (store_hex_key(name, key)) return; /* not an object name */
    uint8_t *buf;
    size_t len;
    int sr = slurp(path, &buf, &len);
    if (sr == -2) {
        c->bad++;
        printf("bad         %s (not a regular file)\n", path);
        return;
    }
    if (sr) {
        c->unreadable++;
        printf("unreadable  %s (%s)\n", path, strerror(errno));
        return;
    }
    store_obj_hdr h;
    cf_err err = {0};
    const char *why = NULL;
    store_verdict v = STORE_CORRUPT;
    int32_t *tokens = NULL;
    if (store_decode_header(buf, len, &h, &err) == 0 && h.header_len + store_trailer_len(h.flags) <= len) {
        uint64_t pl = len - h.header_len - store_trailer_len(h.flags);
        tokens = malloc(sizeof *tokens * (h.n_tokens ? h.n_tokens : 1));
        if (tokens) {
            memcpy(tokens, buf + STORE_HDR_FIXED, sizeof *tokens * h.n_tokens);
            store_expect x = {.fingerprint = h.fingerprint,
                              .key = key,
                              .parent = h.parent,
                              .tokens = tokens,
                              .n_tokens = h.n_tokens,
                              .payload_len = pl,
                              .mac_key = mk,
                              .mac = h.flags & STORE_FLAG_MAC ? buf + h.header_len + pl : NULL};
            v = store_verify(buf, h.header_len, buf + h.header_len, len, &x, now, &why);
        } else why = "out of memory";
    } else why = err.msg[0] ? err.msg : "truncated header";
    if (v == STORE_VALID) c->ok++;
    else if (v == STORE_EXPIRED) c->expired++;
    else if (v == STORE_OTHER_VERSION) c->other_version++;
    else {
        c->bad++;
        printf("bad         %s (%s)\n", path, why ? why : "mismatch");
    }
    free(tokens);
    free(buf);
}

/* objects/ab/cd/<hex>: walks the two fan-out levels. */
static int walk(const char *dir, int depth, int64_t now, const store_mac_key *mk, verify_count *c) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
        if (depth < 2) {
            if (walk(path, depth + 1, now, mk, c) && errno != ENOTDIR) c->unreadable++;
        } else if (strstr(e->d_name, STORE_SUFFIX_TMP)) c->tmp++;
        else verify_one(path, e->d_name, now, mk, c);
    }
    closedir(d);
    return 0;
}

int store_verify_cmd(const char *dir, int64_t now, const char *key_file) {
    char objs[4096];
    if (snprintf(objs, sizeof objs, "%s/objects", dir) >= (int)sizeof objs)
        return cli_fail("store verify: path too long");
    verify_count c = {0};
    store_mac_key *mk = NULL;
    if (key_file) {
        cf_err kerr = {0};
        if (!(mk = malloc(sizeof *mk))) return cli_fail("store verify: out of memory");
        if (store_key_load(key_file, mk, &kerr)) {
            free(mk);
            return cli_fail("store verify: %s", kerr.msg);
        }
    }
    int wr = walk(objs, 0, now, mk, &c);
    int we = errno;
    free(mk);
    if (wr) return cli_fail("store verify: cannot read %s: %s", objs, strerror(we));
    printf("verify %s: %llu valid, %llu expired (intact), %llu of another format version, %llu bad, %llu unreadable, "
           "%llu temporaries (not objects)\n",
           dir, c.ok, c.expired, c.other_version, c.bad, c.unreadable, c.tmp);
    return c.bad || c.unreadable ? 1 : 0;
}
