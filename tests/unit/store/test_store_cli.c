/* test_store_cli.c - `cinfer store gc|stats DIR` (the CLI binary from
 * CINFER_BIN) on a directory of real objects: stats counts objects per
 * class; gc --now +4d deletes the default and agent objects (1 d, 3 d) and
 * keeps chat (7 d); gc --quota evicts least recently used objects; bad
 * input is a one-line message with exit status 1. */
#include <sys/wait.h>
#include <time.h>

#include "store_testlib.h"

static char g_bin[1024];

/* Runs `cinfer <args>`, output (stdout + stderr) into out; returns the exit status. */
static int run_cli(const char *args, char *out, size_t cap) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", g_bin, args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(void) {
    const char *bin = getenv("CINFER_BIN");
    if (!bin || !*bin) {
        return tu_missing_fixture("CINFER_BIN (the cinfer binary) is not set");
    }
    snprintf(g_bin, sizeof g_bin, "%s", bin);
    char dir[512], args[2048], out[8192];
    st_dir(dir, sizeof dir, "store-cli");
    cf_err err;
    CHECK(store_fs_prepare(dir, &err) == 0);
    int64_t now = time(NULL);
    const int64_t ret[3] = {86400, 7 * 86400, 3 * 86400};
    static st_obj o[12];
    for (int i = 0; i < 12; i++) {
        st_obj_make(&o[i], (uint32_t)(40 + i));
        CHECK(st_publish(dir, &o[i], i % 3, now - 100 + i, now + ret[i % 3]) == STORE_PUB_WRITTEN);
    }
    snprintf(args, sizeof args, "store stats '%s'", dir);
    CHECK(run_cli(args, out, sizeof out) == 0);
    fprintf(stderr, "%s", out);
    CHECK(strstr(out, "objects       12 ") != NULL);
    CHECK(strstr(out, "default 4 (") && strstr(out, "chat 4 (") && strstr(out, "agent 4 ("));

    snprintf(args, sizeof args, "store gc '%s' --now +2d", dir);
    CHECK(run_cli(args, out, sizeof out) == 0);
    fprintf(stderr, "%s", out);
    CHECK(strstr(out, "deleted 4 expired") != NULL);
    snprintf(args, sizeof args, "store gc '%s' --now +4d", dir);
    CHECK(run_cli(args, out, sizeof out) == 0);
    CHECK(strstr(out, "deleted 4 expired") && strstr(out, "; 4 objects"));
    for (int i = 0; i < 12; i++) CHECK(st_exists(dir, o[i].key) == (i % 3 == 1));

    /* quota: 2 of the 4 chat objects fit; the two least recently used go (objects 1 and 4) */
    double obj = (double)(store_header_len(ST_BT) + ST_PAYLOAD);
    snprintf(args, sizeof args, "store gc '%s' --quota %.12f", dir, 2.5 * obj / (double)(1ull << 30));
    CHECK(run_cli(args, out, sizeof out) == 0);
    fprintf(stderr, "%s", out);
    CHECK(strstr(out, "2 least recently used") != NULL);
    CHECK(!st_exists(dir, o[1].key) && !st_exists(dir, o[4].key) && st_exists(dir, o[7].key) &&
          st_exists(dir, o[10].key));

    /* errors: one line, exit 1 */
    CHECK(run_cli("store stats /nonexistent-cinfer-dir", out, sizeof out) == 1 && strchr(out, '\n') == strrchr(out, '\n') &&
          strstr(out, "cannot read"));
    CHECK(run_cli("store gc", out, sizeof out) == 1 && strstr(out, "missing DIR"));
    snprintf(args, sizeof args, "store gc '%s' --now soon", dir);
    CHECK(run_cli(args, out, sizeof out) == 1 && strstr(out, "--now"));
    snprintf(args, sizeof args, "store gc '%s' --quota -1", dir);
    CHECK(run_cli(args, out, sizeof out) == 1);
    CHECK(run_cli("store compact x", out, sizeof out) == 1 && strstr(out, "unknown subcommand"));
    CHECK(run_cli("store --help", out, sizeof out) == 0 && strstr(out, "usage: cinfer store"));
    st_rmrf(dir);
    return test_finish();
}
