/* randid.c - CSPRNG identifiers (see randid.h). Owns no state. */
#include "base/randid.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/log.h"

int cf_random_bytes(void *buf, size_t n) {
    unsigned char *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(p + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

int cf_random_id(const char *prefix, char *out, size_t cap) {
    static const char hex[] = "0123456789abcdef";
    size_t pl = strlen(prefix);
    unsigned char rnd[CF_RANDID_BYTES];
    if (cap) out[0] = 0;
    if (cap < pl + CF_RANDID_CHARS + 1) {
        errno = ERANGE;
        return -1;
    }
    if (cf_random_bytes(rnd, sizeof rnd)) return -1;
    memcpy(out, prefix, pl);
    for (size_t i = 0; i < CF_RANDID_BYTES; i++) {
        out[pl + 2 * i] = hex[rnd[i] >> 4];
        out[pl + 2 * i + 1] = hex[rnd[i] & 15];
    }
    out[pl + CF_RANDID_CHARS] = 0;
    return 0;
}

void cf_random_id_or_die(const char *prefix, char *out, size_t cap) {
    if (cf_random_id(prefix, out, cap) == 0) return;
    LOG_ERROR("cannot make a random id: %s", strerror(errno));
    abort();
}
