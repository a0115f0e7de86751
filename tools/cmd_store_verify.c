/* cmd_store_verify.c - `cinfer store verify DIR`: reads every published
 * object of a persistent KV store directory (docs/store.md) in full and
 * checks it against itself: magic, version, header length, the key in the
 * header = the file name, token count, payload length = file size - header,
 * and the XXH3 checksum over header and payload (store_verify with the
 * expectations taken from the object's own header). What it cannot check
 * without the model is the fingerprint; a loading server checks that too.
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

typedef struct verify_count {
    unsigned long long ok, expired, other_version, bad, unreadable, tmp;
} verify_count;

/* Whole file into a malloc'd buffer; -1 on a read error. */
static int slurp(const char *path, uint8_t **out, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOATIME); /* atime is the LRU order: reading must not move it */
    if (fd < 0 && errno == EPERM) fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
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

static void verify_one(const char *path, const char *name, int64_t now, verify_count *c) {
    uint8_t key[STORE_KEY_BYTES];
    if (store_hex_key(name, key)) return; /* not an object name */
    uint8_t *buf;
    size_t len;
    if (slurp(path, &buf, &len)) {
        c->unreadable++;
        printf("unreadable  %s (%s)\n", path, strerror(errno));
        return;
    }
    store_obj_hdr h;
    cf_err err = {0};
    const char *why = NULL;
    store_verdict v = STORE_CORRUPT;
    int32_t *tokens = NULL;
    if (store_decode_header(buf, len, &h, &err) == 0 && h.header_len <= len) {
        tokens = malloc(sizeof *tokens * (h.n_tokens ? h.n_tokens : 1));
        if (tokens) {
            memcpy(tokens, buf + STORE_HDR_FIXED, sizeof *tokens * h.n_tokens);
            store_expect x = {.fingerprint = h.fingerprint, .key = key, .parent = h.parent, .tokens = tokens,
                              .n_tokens = h.n_tokens, .payload_len = len - h.header_len};
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
static int walk(const char *dir, int depth, int64_t now, verify_count *c) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
        if (depth < 2) {
            if (walk(path, depth + 1, now, c) && errno != ENOTDIR) c->unreadable++;
        } else if (strstr(e->d_name, STORE_SUFFIX_TMP)) c->tmp++;
        else verify_one(path, e->d_name, now, c);
    }
    closedir(d);
    return 0;
}

int store_verify_cmd(const char *dir, int64_t now) {
    char objs[4096];
    if (snprintf(objs, sizeof objs, "%s/objects", dir) >= (int)sizeof objs) return cli_fail("store verify: path too long");
    verify_count c = {0};
    if (walk(objs, 0, now, &c)) return cli_fail("store verify: cannot read %s: %s", objs, strerror(errno));
    printf("verify %s: %llu valid, %llu expired (intact), %llu of another format version, %llu bad, %llu unreadable, "
           "%llu temporaries (not objects)\n",
           dir, c.ok, c.expired, c.other_version, c.bad, c.unreadable, c.tmp);
    return c.bad || c.unreadable ? 1 : 0;
}
