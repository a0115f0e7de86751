/* log.h - leveled logging to stderr.
 * The level is the one process-wide singleton `cf_log_level` (set once from
 * --log-level / CINFER_LOG at start-up). Messages are single lines.
 *
 * Invariants (log.c):
 *  - every line written is exactly one line: control characters (< 0x20 and
 *    0x7f) in the formatted message are escaped (\n, \r, \t, else \xNN), so no
 *    client-provided string can forge a log line (cf_log_escape is the one
 *    escaping helper; callers use it too when they quote client strings);
 *  - warnings and errors are rate limited per call site (the format string):
 *    at most CF_LOG_BURST lines per CF_LOG_WINDOW_S seconds (or as set by
 *    cf_log_set_rate_limit), the rest are
 *    counted and reported as one "suppressed K similar messages" line when the
 *    site logs again after its window, or from cf_log_flush_suppressed().
 *    Info and debug lines (one per request) are never suppressed.
 * Thread-safe: the rate-limit table is guarded by a mutex; lines are written
 * with one fprintf each. */
#ifndef CINFER_BASE_LOG_H
#define CINFER_BASE_LOG_H

#include <stddef.h>

typedef enum { CF_LOG_ERROR = 0, CF_LOG_WARN, CF_LOG_INFO, CF_LOG_DEBUG } cf_log_lvl;

#define CF_LOG_BURST 10
#define CF_LOG_WINDOW_S 10.0

extern cf_log_lvl cf_log_level;

void cf_log(cf_log_lvl lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses "error|warn|info|debug"; returns -1 if unknown. */
int cf_log_parse_level(const char *s, cf_log_lvl *out);

/* Copies src[0..len) into dst (capacity cap >= 1, always NUL-terminated,
 * truncated to fit) with control characters escaped: \n \r \t as two
 * characters, other bytes < 0x20 and 0x7f as \xNN. Returns dst. */
char *cf_log_escape(char *dst, size_t cap, const char *src, size_t len);
/* The same for a NUL-terminated string (NULL -> "(null)"). */
char *cf_log_escape_str(char *dst, size_t cap, const char *src);

/* Changes the warning/error rate limit (default CF_LOG_BURST lines per
 * CF_LOG_WINDOW_S seconds per call site; tests use a short window). */
void cf_log_set_rate_limit(unsigned lines, double seconds);
/* Writes the pending "suppressed K similar messages" lines of call sites
 * whose window has ended (a server calls this from a periodic timer). */
void cf_log_flush_suppressed(void);

#define LOG_ERROR(...) cf_log(CF_LOG_ERROR, __VA_ARGS__)
#define LOG_WARN(...) cf_log(CF_LOG_WARN, __VA_ARGS__)
#define LOG_INFO(...) cf_log(CF_LOG_INFO, __VA_ARGS__)
#define LOG_DEBUG(...) cf_log(CF_LOG_DEBUG, __VA_ARGS__)

#endif
