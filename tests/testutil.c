/* testutil.c - see testutil.h. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int test_failures;
int test_checks;

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
    fprintf(stderr, "%d checks, %d failures\n", test_checks, test_failures);
    return test_failures ? 1 : 0;
}
