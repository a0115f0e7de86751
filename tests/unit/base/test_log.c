/* test_log.c - base/log.c: cf_log_escape escapes control characters (\n \r \t, \xNN for the
 * rest and 0x7f) and truncates safely; every cf_log line is one line whatever the arguments
 * hold; warnings from one call site are rate limited (burst, then one "suppressed K similar
 * messages" line), info lines never are; cf_log_flush_suppressed reports a site that went
 * quiet. stderr is redirected to a temporary file and read back (failure counts survive;
 * their messages land in that file). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "testutil.h"

static char path[] = "/tmp/cinfer_test_log_XXXXXX";

static char *read_log(void) {
    fflush(stderr);
    FILE *f = fopen(path, "rb");
    if (!f) return strdup("");
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    if (!freopen(path, "w", stderr)) abort(); /* truncate for the next step */
    return buf;
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static void test_escape(void) {
    char out[64];
    CHECK(!strcmp(cf_log_escape_str(out, sizeof out, "a\nb\rc\td"), "a\\nb\\rc\\td"));
    CHECK(!strcmp(cf_log_escape(out, sizeof out, "x\0y\x1b\x7f", 5), "x\\x00y\\x1b\\x7f"));
    CHECK(!strcmp(cf_log_escape_str(out, sizeof out, "plain \"text\" \\ ok"), "plain \"text\" \\ ok"));
    CHECK(!strcmp(cf_log_escape_str(out, 5, "\n\n\n"), "\\n\\n")); /* never splits an escape */
    CHECK(!strcmp(cf_log_escape_str(out, sizeof out, NULL), "(null)"));
}

static void test_lines(void) {
    cf_log_level = CF_LOG_INFO;
    LOG_INFO("request %s status=%d", "/v1/x\nFORGED line", 404);
    char *log = read_log();
    CHECK(count(log, "\n") == 1);
    CHECK(strstr(log, "/v1/x\\nFORGED line") != NULL);
}

static void warn_site(int i) { LOG_WARN("accept failed %d", i); }

static void test_rate_limit(void) {
    cf_log_set_rate_limit(3, 0.3);
    for (int i = 0; i < 50; i++) warn_site(i);
    for (int i = 0; i < 20; i++) LOG_INFO("info %d", i);
    char *log = read_log();
    CHECK(count(log, "accept failed") == 3);
    CHECK(count(log, "info ") == 20);
    CHECK(count(log, "suppressed") == 0);
    struct timespec ts = {0, 350 * 1000 * 1000};
    nanosleep(&ts, NULL);
    warn_site(99); /* the window ended: the summary, then this line */
    log = read_log();
    CHECKF(strstr(log, "suppressed 47 similar messages") != NULL, "%s", log);
    CHECK(count(log, "accept failed 99") == 1);
    for (int i = 0; i < 10; i++) warn_site(i);
    nanosleep(&ts, NULL);
    cf_log_flush_suppressed(); /* the site went quiet: the timer reports it */
    log = read_log();
    CHECKF(strstr(log, "suppressed 8 similar messages") != NULL, "%s", log);
    cf_log_set_rate_limit(CF_LOG_BURST, CF_LOG_WINDOW_S);
}

int main(void) {
    int saved = dup(2), fd = mkstemp(path);
    if (saved < 0 || fd < 0 || !freopen(path, "w", stderr)) return 1;
    close(fd);
    test_escape();
    test_lines();
    test_rate_limit();
    fflush(stderr);
    if (dup2(saved, 2) < 0) return 1; /* CHECK failures above went to the log file; the count did not */
    unlink(path);
    return test_finish();
}
