/* test_store_cli.c - `cinfer store gc|stats DIR` (the CLI binary from
 * CINFER_BIN) on a directory of real objects: stats counts objects per
 * class; gc --now +4d deletes the default and agent objects (1 d, 3 d) and
 * keeps chat (7 d); gc --quota evicts least recently used objects; a
 * runtime error is a one-line message with exit status 1, a usage error
 * (bad option, missing DIR, unknown subcommand) one line with exit 2. */
#include <time.h>

#include "store_testlib.h"

static char g_bin[1024];

/* Runs `cinfer` with the NULL-terminated args (no shell), output (stdout +
 * stderr) into out; returns the exit status. */
static int run_cli(const char *const *args, char *out, size_t cap) {
    const char *argv[16] = {g_bin};
    for (int i = 0; args[i] && i < 14; i++) argv[i + 1] = args[i];
    return test_run(argv, TEST_RUN_STDOUT | TEST_RUN_STDERR, out, cap);
}
#define CLI(...) run_cli((const char *const[]){__VA_ARGS__, NULL}, out, sizeof out)

int main(void) {
    const char *bin = getenv("CINFER_BIN");
    if (!bin || !*bin) { return tu_missing_fixture("CINFER_BIN (the cinfer binary) is not set"); }
    snprintf(g_bin, sizeof g_bin, "%s", bin);
    char dir[512], quota[64], out[8192];
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
    CHECK(CLI("store", "stats", dir) == 0);
    fprintf(stderr, "%s", out);
    CHECK(strstr(out, "objects       12 ") != NULL);
    CHECK(strstr(out, "default 4 (") && strstr(out, "chat 4 (") && strstr(out, "agent 4 ("));

    CHECK(CLI("store", "gc", dir, "--now", "+2d") == 0);
    fprintf(stderr, "%s", out);
    CHECK(strstr(out, "deleted 4 expired") != NULL);
    CHECK(CLI("store", "gc", dir, "--now", "+4d") == 0);
    CHECK(strstr(out, "deleted 4 expired") && strstr(out, "; 4 objects"));
    for (int i = 0; i < 12; i++) CHECK(st_exists(dir, o[i].key) == (i % 3 == 1));

    /* quota: 2 of the 4 chat objects fit; the two least recently used go (objects 1 and 4) */
    double obj = (double)(store_header_len(ST_BT) + ST_PAYLOAD);
    snprintf(quota, sizeof quota, "%.12f", 2.5 * obj / (double)(1ull << 30));
    CHECK(CLI("store", "gc", dir, "--quota", quota) == 0);
    fprintf(stderr, "%s", out);
    CHECK(strstr(out, "2 least recently used") != NULL);
    CHECK(!st_exists(dir, o[1].key) && !st_exists(dir, o[4].key) && st_exists(dir, o[7].key) &&
          st_exists(dir, o[10].key));

    /* errors: one line, exit 1 */
    CHECK(CLI("store", "stats", "/nonexistent-cinfer-dir") == 1 && strchr(out, '\n') == strrchr(out, '\n') &&
          strstr(out, "cannot read"));
    /* usage errors: one line, exit 2 */
    CHECK(CLI("store", "gc") == 2 && strstr(out, "missing DIR"));
    CHECK(CLI("store", "gc", dir, "--now", "soon") == 2 && strstr(out, "--now"));
    CHECK(CLI("store", "gc", dir, "--quota", "-1") == 2);
    CHECK(CLI("store", "compact", "x") == 2 && strstr(out, "unknown subcommand"));
    CHECK(CLI("store", "--help") == 0 && strstr(out, "usage: cinfer store"));
    st_rmrf(dir);
    return test_finish();
}
