/* randid.h - unpredictable identifiers for everything a client can see
 * (request ids, response ids: chatcmpl-, cmpl-, msg_, resp_, req-, ...).
 *
 * Invariant: every id is PREFIX followed by CF_RANDID_CHARS lowercase hex
 * characters holding 128 bits from the kernel CSPRNG (getrandom(2)); knowing
 * any number of ids tells nothing about another. Thread-safe (no state). */
#ifndef CINFER_BASE_RANDID_H
#define CINFER_BASE_RANDID_H

#include <stddef.h>

#define CF_RANDID_BYTES 16
#define CF_RANDID_CHARS (2 * CF_RANDID_BYTES)

/* Fills buf with n random bytes from getrandom (blocking until the pool is
 * initialised; retried on EINTR / short reads). 0, or -1 when the kernel
 * refuses (errno set). */
int cf_random_bytes(void *buf, size_t n);

/* Writes PREFIX + 32 hex characters into out (cap must hold
 * strlen(prefix) + CF_RANDID_CHARS + 1). 0, or -1 when cap is too small or
 * the CSPRNG fails (out is then "" when cap > 0). */
int cf_random_id(const char *prefix, char *out, size_t cap);
/* cf_random_id for callers that cannot go on without an id: a CSPRNG failure
 * (or a cap too small, a programming error) is logged and aborts. */
void cf_random_id_or_die(const char *prefix, char *out, size_t cap);

#endif
