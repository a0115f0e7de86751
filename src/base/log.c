/* log.c - leveled logging (see log.h): one escaped line per message, and a
 * per-call-site rate limit for warnings and errors.
 *
 * The rate-limit table holds LOG_SITES call sites keyed by the format string
 * pointer; a site that finds the table full takes over the slot whose window
 * is oldest (its pending count is reported first). Guarded by `lk`. */
#include "base/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

cf_log_lvl cf_log_level = CF_LOG_WARN;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

#define LOG_SITES 64

typedef struct log_site {
    const char *fmt; /* NULL: free slot */
    cf_log_lvl lvl;
    double window_start;
    unsigned shown; /* lines written in this window */
    unsigned long dropped; /* lines suppressed in this window */
} log_site;

static log_site sites[LOG_SITES];
static unsigned burst = CF_LOG_BURST;
static double window_s = CF_LOG_WINDOW_S;
static pthread_mutex_t lk = PTHREAD_MUTEX_INITIALIZER;

static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

char *cf_log_escape(char *dst, size_t cap, const char *src, size_t len) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < len && src; i++) {
        unsigned char c = (unsigned char)src[i];
        char tmp[4];
        size_t n = 0;
        if (c == '\n') tmp[n++] = '\\', tmp[n++] = 'n';
        else if (c == '\r') tmp[n++] = '\\', tmp[n++] = 'r';
        else if (c == '\t') tmp[n++] = '\\', tmp[n++] = 't';
        else if (c < 0x20 || c == 0x7f) tmp[n++] = '\\', tmp[n++] = 'x', tmp[n++] = hex[c >> 4], tmp[n++] = hex[c & 15];
        else tmp[n++] = (char)c;
        if (o + n >= cap) break;
        memcpy(dst + o, tmp, n);
        o += n;
    }
    if (cap) dst[o < cap ? o : cap - 1] = 0;
    return dst;
}

char *cf_log_escape_str(char *dst, size_t cap, const char *src) {
    if (!src) src = "(null)";
    return cf_log_escape(dst, cap, src, strlen(src));
}

static void write_line(cf_log_lvl lvl, const char *msg) {
    char esc[2048];
    cf_log_escape_str(esc, sizeof esc, msg);
    fprintf(stderr, "cinfer %s: %s\n", level_names[lvl], esc);
}

static void report_dropped(log_site *st) {
    if (!st->dropped) return;
    char line[256];
    snprintf(line, sizeof line, "suppressed %lu similar messages in %gs (\"%.120s\")", st->dropped, window_s, st->fmt);
    write_line(st->lvl, line);
    st->dropped = 0;
}

/* true when the caller may write a line for `fmt` now. Holds no lock on return. */
static int site_admit(cf_log_lvl lvl, const char *fmt) {
    double now = mono_now();
    pthread_mutex_lock(&lk);
    log_site *st = NULL, *oldest = &sites[0];
    for (int i = 0; i < LOG_SITES && !st; i++) {
        if (sites[i].fmt == fmt) st = &sites[i];
        else if (!sites[i].fmt || sites[i].window_start < oldest->window_start) oldest = &sites[i];
    }
    if (!st) {
        st = oldest;
        if (st->fmt) report_dropped(st);
        *st = (log_site){.fmt = fmt, .lvl = lvl, .window_start = now};
    }
    if (now - st->window_start >= window_s) {
        report_dropped(st);
        st->window_start = now;
        st->shown = 0;
    }
    int ok = st->shown < burst;
    if (ok) st->shown++;
    else st->dropped++;
    pthread_mutex_unlock(&lk);
    return ok;
}

void cf_log_flush_suppressed(void) {
    double now = mono_now();
    pthread_mutex_lock(&lk);
    for (int i = 0; i < LOG_SITES; i++)
        if (sites[i].fmt && sites[i].dropped && now - sites[i].window_start >= window_s) {
            report_dropped(&sites[i]);
            sites[i].window_start = now;
            sites[i].shown = 0;
        }
    pthread_mutex_unlock(&lk);
}

void cf_log_set_rate_limit(unsigned lines, double seconds) {
    pthread_mutex_lock(&lk);
    burst = lines;
    window_s = seconds;
    pthread_mutex_unlock(&lk);
}

void cf_log(cf_log_lvl lvl, const char *fmt, ...) {
    if (lvl > cf_log_level) return;
    if (lvl <= CF_LOG_WARN && !site_admit(lvl, fmt)) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    write_line(lvl, line);
}

int cf_log_parse_level(const char *s, cf_log_lvl *out) {
    for (int i = 0; i < 4; i++)
        if (strcmp(s, level_names[i]) == 0) {
            *out = (cf_log_lvl)i;
            return 0;
        }
    return -1;
}
