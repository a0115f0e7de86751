/* testutil.c - see testutil.h. Owns the failure / check counters and the
 * missing-fixture flag. */
#include "testutil.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int test_failures;
int test_checks;
static bool tu_skipped;

static bool tu_in_ci(void) {
    const char *ci = getenv("CI");
    return ci && (!strcmp(ci, "true") || !strcmp(ci, "1"));
}

int tu_missing_fixture(const char *what) {
    if (tu_in_ci()) {
        test_failures++;
        fprintf(stderr, "FAIL: missing fixture: %s (CI=true: fixtures are required)\n", what);
        return 1;
    }
    tu_skipped = true;
    fprintf(stderr, "SKIP: missing fixture: %s (exit 77; under CI=true this fails)\n", what);
    return 77;
}

const char *shared_path(const char *rel) {
    static char bufs[8][1024];
    static int slot;
    const char *root = getenv("CINFER_SHARED");
    if (!root || !*root) root = "../shared";
    char *b = bufs[slot++ & 7];
    snprintf(b, sizeof bufs[0], "%s/%s", root, rel);
    return b;
}

char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return NULL; }
    long n = ftell(f);
    if (n < 0) { fclose(f); return NULL; }
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    fclose(f);
    if (!buf) return NULL;
    buf[n] = 0;
    if (len) *len = (size_t)n;
    return buf;
}

const char *temp_path(char *buf, size_t cap, const char *tag) {
    snprintf(buf, cap, "/tmp/cinfer-test-%d-%s", (int)getpid(), tag);
    return buf;
}

int test_finish(void) {
    fprintf(stderr, "%d checks, %d failures%s\n", test_checks, test_failures,
            tu_skipped && !test_failures ? " (skipped: a fixture is missing)" : "");
    if (test_failures) return 1;
    return tu_skipped ? 77 : 0;
}
