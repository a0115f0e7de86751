/* testutil.c - see testutil.h. Owns the failure / check counters and the
 * missing-fixture flag. */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int test_failures;
int test_checks;
static bool tu_skipped;

static bool tu_in_ci(void) {
    const char *ci = getenv("CI");
    return ci && (!strcmp(ci, "true") || !strcmp(ci, "1"));
}

const char *tu_kv_dtype(void) {
    const char *v = getenv("CINFER_TEST_KV_DTYPE");
    return v && v[0] ? v : NULL;
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
    char *b = bufs[slot++ & 7];
    if (root && *root) snprintf(b, sizeof bufs[0], "%s/%s", root, rel);
    else snprintf(b, sizeof bufs[0], "%s/%s", source_path("../shared"), rel); /* <source>/../shared */
    return b;
}

const char *source_path(const char *rel) {
    static char bufs[8][1024];
    static int slot;
    char *b = bufs[slot++ & 7];
    const char *root = getenv("CINFER_SRC");
    if (root && *root) {
        snprintf(b, sizeof bufs[0], "%s/%s", root, rel);
        return b;
    }
    const char *me = __FILE__, *tail = strstr(me, "tests/testutil.c");
    int rl = tail ? (int)(tail - me) : 0;
    snprintf(b, sizeof bufs[0], "%.*s%s", rl, me, rel);
    return b;
}

char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return NULL;
    }
    long n = ftell(f);
    if (n < 0) {
        fclose(f);
        return NULL;
    }
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
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

/* Child side of test_run: wires stdout/stderr, then execv. Never returns. */
static void run_child(const char *const argv[], int capture, int wfd) {
    int null = open("/dev/null", O_RDWR);
    int in = null >= 0 ? dup2(null, STDIN_FILENO) : -1;
    int o = dup2((capture & TEST_RUN_STDOUT) ? wfd : null, STDOUT_FILENO);
    int e = dup2((capture & TEST_RUN_STDERR) ? wfd : null, STDERR_FILENO);
    if (in < 0 || o < 0 || e < 0) _exit(127);
    execv(argv[0], (char *const *)argv);
    _exit(127);
}

int test_run(const char *const argv[], int capture, char *out, size_t cap) {
    if (!argv || !argv[0] || !out || !cap) return -1;
    out[0] = 0;
    int fds[2];
    if (pipe(fds) != 0) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        run_child(argv, capture, fds[1]);
    }
    close(fds[1]);
    size_t n = 0;
    char sink[4096];
    for (;;) {
        char *dst = n + 1 < cap ? out + n : sink;
        size_t room = n + 1 < cap ? cap - 1 - n : sizeof sink;
        ssize_t r = read(fds[0], dst, room);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        if (dst != sink) n += (size_t)r;
    }
    out[n] = 0;
    close(fds[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}

int test_finish(void) {
    fprintf(stderr, "%d checks, %d failures%s\n", test_checks, test_failures,
            tu_skipped && !test_failures ? " (skipped: a fixture is missing)" : "");
    if (test_failures) return 1;
    return tu_skipped ? 77 : 0;
}
