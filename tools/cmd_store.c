/* cmd_store.c - `cinfer store gc|stats DIR`: maintenance of a persistent KV
 * block store directory (docs/store.md) without a server. gc runs one GC
 * pass (expired objects, stale temporaries, old quarantine, LRU beyond
 * --quota); it is safe while servers use the directory. stats reads every
 * object's header and prints a summary. Errors: one line, exit 1; usage
 * errors exit 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_util.h"
#include "commands.h"
#include "store/store_fs.h"
#include "store/store_gc.h"

int store_verify_cmd(const char *dir, int64_t now, const char *key_file); /* cmd_store_verify.c */

static void usage(FILE *out) {
    fprintf(out,
            "usage: cinfer store gc DIR [--quota GiB] [--now TIME]\n"
            "       cinfer store stats DIR [--now TIME]\n"
            "       cinfer store verify DIR [--now TIME] [--key-file PATH]\n"
            "\n"
            "Maintains a persistent KV block store directory (the --kv-store of `cinfer serve`).\n"
            "\n"
            "  gc      delete expired objects, temporaries left by dead writers (> 1 h old) and\n"
            "          quarantined objects older than 1 day; with --quota, then delete the least\n"
            "          recently used objects until the rest fits. Safe while servers use DIR.\n"
            "  stats   count objects, bytes, traffic classes, ages, quarantine and temporaries.\n"
            "  verify  read every object in full and check its header, name, length and checksum\n"
            "          (read-only; exit 1 if any object is bad, unreadable or not a regular file).\n"
            "          With --key-file, also the HMAC-SHA256 of every object under that key:\n"
            "          objects without a valid MAC count as bad.\n"
            "\n"
            "options:\n"
            "  --quota GiB   capacity for gc (default: none)\n"
            "  --now TIME    the store clock: unix seconds, or +DURATION / -DURATION from now\n"
            "                (e.g. +3d; units s m h d). Default: now, shifted by\n"
            "                CINFER_STORE_CLOCK_OFFSET when set (tests).\n"
            "  --key-file PATH  verify: the --kv-store-key-file of the servers (docs/store.md)\n"
            "  -h, --help    show this help\n");
}

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
    if (r.errors) return cli_fail("gc %s: %llu files could not be deleted or examined", dir, (unsigned long long)r.errors);
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
    for (int c = 0; c < CINFER_TRAFFIC_N; c++) {
        fmt_bytes(s.class_bytes[c], b, sizeof b);
        printf(" %s %llu (%s)%s", store_class_name(c), (unsigned long long)s.class_objects[c], b,
               c + 1 < CINFER_TRAFFIC_N ? "," : "\n");
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

int cmd_store(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1], *dir = NULL, *key_file = NULL;
    bool gc = !strcmp(sub, "gc");
    bool verify = !strcmp(sub, "verify");
    if (!gc && !verify && strcmp(sub, "stats")) return cli_fail("store: unknown subcommand '%s' (gc, stats, verify)", sub);
    int64_t now = 0, quota = 0;
    bool have_now = false;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--quota") && gc) {
            const char *v = cli_value(argc, argv, &i);
            double g;
            if (!v || cli_float("--quota", v, 0, 1 << 20, &g)) return 1;
            quota = (int64_t)(g * (double)(1ull << 30));
        } else if (!strcmp(a, "--key-file") && verify) {
            if (!(key_file = cli_value(argc, argv, &i))) return 1;
        } else if (!strcmp(a, "--now")) {
            const char *v = cli_value(argc, argv, &i);
            if (!v) return 1;
            if (parse_now(v, &now)) return cli_fail("--now expects unix seconds or +/-DURATION (e.g. +3d), got '%s'", v);
            have_now = true;
        } else if (a[0] == '-' && a[1]) {
            return cli_fail("store %s: unknown option '%s' (see cinfer store --help)", sub, a);
        } else if (dir) {
            return cli_fail("store %s: more than one DIR", sub);
        } else {
            dir = a;
        }
    }
    if (!dir) return cli_fail("store %s: missing DIR (see cinfer store --help)", sub);
    if (!have_now && default_now(&now)) return cli_fail("CINFER_STORE_CLOCK_OFFSET is not a duration");
    if (verify) return store_verify_cmd(dir, now, key_file);
    return gc ? store_gc_cmd(dir, now, quota) : store_stats_cmd(dir, now);
}
