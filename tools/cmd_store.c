/* cmd_store.c - `cinfer store gc|stats DIR`: maintenance of a persistent KV
 * block store directory (docs/store.md) without a server. gc runs one GC
 * pass (expired objects, stale temporaries, old quarantine, LRU beyond
 * --quota); it is safe while servers use the directory. stats reads every
 * object's header and prints a summary. Errors: one line, exit 1; usage
 * errors exit 2. Options: one cli_opt table per subcommand. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cli_opt.h"
#include "commands.h"
#include "store/store_fs.h"
#include "store/store_gc.h"

int store_verify_cmd(const char *dir, int64_t now, const char *key_file); /* cmd_store_verify.c */

static const char store_usage[] = "cinfer store gc DIR [--quota GiB] [--now TIME]\n"
                                  "cinfer store stats DIR [--now TIME]\n"
                                  "cinfer store verify DIR [--now TIME] [--key-file PATH]";
static const char store_about[] =
    "\nMaintains a persistent KV block store directory (the --kv-store of `cinfer serve`).\n"
    "\n"
    "  gc      delete expired objects, temporaries left by dead writers (> 1 h old) and\n"
    "          quarantined objects older than 1 day; with --quota, then delete the least\n"
    "          recently used objects until the rest fits. Safe while servers use DIR.\n"
    "  stats   count objects, bytes, traffic classes, ages, quarantine and temporaries.\n"
    "  verify  read every object in full and check its header, name, length and checksum\n"
    "          (read-only; exit 1 if any object is bad, unreadable or not a regular file).\n"
    "          With --key-file, also the HMAC-SHA256 of every object under that key:\n"
    "          objects without a valid MAC count as bad.";

static int parse_now(const char *s, int64_t *out) {
    int64_t d;
    if ((s[0] == '+' || s[0] == '-') && store_parse_duration(s + 1, &d) == 0) {
        *out = (int64_t)time(NULL) + (s[0] == '-' ? -d : d);
        return 0;
    }
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || v < 0) return -1;
    *out = v;
    return 0;
}

static int default_now(int64_t *out) {
    *out = (int64_t)time(NULL);
    const char *off = getenv("CINFER_STORE_CLOCK_OFFSET");
    if (!off || !off[0]) return 0;
    int64_t d;
    bool neg = off[0] == '-';
    if (store_parse_duration(off + neg, &d)) return -1;
    *out += neg ? -d : d;
    return 0;
}

static void fmt_bytes(uint64_t b, char *out, size_t cap) {
    if (b >= (1ull << 30)) snprintf(out, cap, "%.2f GiB", (double)b / (double)(1ull << 30));
    else if (b >= (1ull << 20)) snprintf(out, cap, "%.1f MiB", (double)b / (double)(1ull << 20));
    else if (b >= 1024) snprintf(out, cap, "%.1f KiB", (double)b / 1024.0);
    else snprintf(out, cap, "%llu B", (unsigned long long)b);
}

static void fmt_time(int64_t t, char *out, size_t cap) {
    if (t == 0) {
        snprintf(out, cap, "-");
        return;
    }
    time_t tt = (time_t)t;
    struct tm tm;
    if (!gmtime_r(&tt, &tm) || !strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm)) snprintf(out, cap, "%lld", (long long)t);
}

static int store_gc_cmd(const char *dir, int64_t now, int64_t quota) {
    store_gc_result r;
    cf_err err;
    if (store_gc(dir, now, quota, &r, &err)) return cli_fail("%s", err.msg);
    char b1[32], b2[32], b3[32];
    fmt_bytes(r.bytes, b1, sizeof b1);
    fmt_bytes(r.bytes_deleted, b2, sizeof b2);
    fmt_bytes(r.bytes_after, b3, sizeof b3);
    printf("gc %s: %llu objects (%s) scanned; deleted %llu expired, %llu least recently used, %llu stale "
           "temporaries, %llu quarantined; %s freed; %llu objects (%s) left\n",
           dir, (unsigned long long)r.objects, b1, (unsigned long long)r.deleted_expired,
           (unsigned long long)r.deleted_lru, (unsigned long long)r.deleted_tmp,
           (unsigned long long)r.deleted_quarantine, b2, (unsigned long long)r.objects_after, b3);
    if (r.errors)
        return cli_fail("gc %s: %llu files could not be deleted or examined", dir, (unsigned long long)r.errors);
    return 0;
}

static int store_stats_cmd(const char *dir, int64_t now) {
    store_summary s;
    cf_err err;
    if (store_summarize(dir, now, &s, &err)) return cli_fail("%s", err.msg);
    char b[32], t1[40], t2[40];
    fmt_bytes(s.bytes, b, sizeof b);
    printf("store %s\n", dir);
    printf("objects       %llu (%s), %llu expired (awaiting gc), %llu unreadable\n", (unsigned long long)s.objects, b,
           (unsigned long long)s.expired, (unsigned long long)s.unreadable);
    printf("by class     ");
    for (int c = 0; c < STORE_N_CLASSES; c++) {
        fmt_bytes(s.class_bytes[c], b, sizeof b);
        printf(" %s %llu (%s)%s", store_class_name(c), (unsigned long long)s.class_objects[c], b,
               c + 1 < STORE_N_CLASSES ? "," : "\n");
    }
    fmt_time(s.oldest_created, t1, sizeof t1);
    fmt_time(s.newest_created, t2, sizeof t2);
    printf("created       oldest %s, newest %s\n", t1, t2);
    fmt_time(s.oldest_access, t1, sizeof t1);
    fmt_time(s.next_expiry, t2, sizeof t2);
    printf("last use      oldest %s\nnext expiry   %s\n", t1, t2);
    fmt_bytes(s.quarantined_bytes, b, sizeof b);
    printf("quarantine    %llu files (%s)\ntemporaries   %llu\nfingerprints  %llu model/layout fingerprints\n",
           (unsigned long long)s.quarantined, b, (unsigned long long)s.tmp_files, (unsigned long long)s.fingerprints);
    return 0;
}

static int opt_now(void *ctx, const char *v, char *msg, size_t cap) {
    if (parse_now(v, (int64_t *)ctx) == 0) return 0;
    snprintf(msg, cap, "expects unix seconds or +/-DURATION (e.g. +3d), got '%s'", v);
    return -1;
}

int cmd_store(int argc, char **argv) {
    const char *sub = argc >= 2 ? argv[1] : "";
    bool gc = !strcmp(sub, "gc"), verify = !strcmp(sub, "verify"), stats = !strcmp(sub, "stats");
    int64_t now = INT64_MIN;
    double quota_gib = 0;
#define NOW_ROW                                                                                                 \
    {                                                                                                           \
        "now", 0, "TIME",                                                                                       \
            "the store clock: unix seconds, or +DURATION / -DURATION from now\n"                                \
            "(e.g. +3d; units s m h d). Default: now, shifted by\nCINFER_STORE_CLOCK_OFFSET when set (tests).", \
            CLI_CALL(opt_now, &now)                                                                             \
    }
    /* one table per subcommand */
    const cli_opt gc_t[] = {NOW_ROW, {"quota", 0, "GiB", "capacity (default: none)", CLI_NUM(&quota_gib, 0, 1 << 20)}};
    const cli_opt stats_t[] = {NOW_ROW};
    const char *key_file = NULL;
    const cli_opt verify_t[] = {
        NOW_ROW, {"key-file", 0, "PATH", "the --kv-store-key-file of the servers (docs/store.md)", CLI_STR(&key_file)}};
#undef NOW_ROW
    char name[32];
    snprintf(name, sizeof name, "store%s%s", *sub ? " " : "", gc || verify || stats ? sub : "");
    cli_cmd c = {.name = name, .usage = store_usage, .about = store_about};
    if (gc) c.opts = gc_t, c.n_opts = sizeof gc_t / sizeof gc_t[0];
    else if (stats) c.opts = stats_t, c.n_opts = sizeof stats_t / sizeof stats_t[0];
    else if (verify) c.opts = verify_t, c.n_opts = sizeof verify_t / sizeof verify_t[0];
    if (!gc && !verify && !stats) {
        if (argc >= 2 && (!strcmp(sub, "-h") || !strcmp(sub, "--help"))) return cli_help(&c, stdout), 0;
        if (argc < 2) return cli_usage_error(&c, "a subcommand is required (gc, stats, verify)");
        return cli_usage_error(&c, "unknown subcommand '%s' (gc, stats, verify)", sub);
    }
    int pos, rc = cli_parse(&c, argc - 1, argv + 1, &pos);
    if (rc) return rc == CLI_HELP ? 0 : rc;
    pos++; /* index into argv */
    if (pos >= argc) return cli_usage_error(&c, "missing DIR");
    if (argc - pos > 1) return cli_usage_error(&c, "more than one DIR");
    const char *dir = argv[pos];
    if (now == INT64_MIN && default_now(&now)) return cli_fail("CINFER_STORE_CLOCK_OFFSET is not a duration");
    if (verify) return store_verify_cmd(dir, now, key_file);
    return gc ? store_gc_cmd(dir, now, (int64_t)(quota_gib * (double)(1ull << 30))) : store_stats_cmd(dir, now);
}
