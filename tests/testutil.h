/* testutil.h - tiny test harness: CHECK macros that count failures, fixture
 * paths via CINFER_SHARED read at test time (default ../shared next to the
 * source tree), source-tree paths, whole-file reads, scratch directories the test itself made (and only those removed), running a
 * program with its output captured (fork/execv, no shell), the one rule for
 * missing fixtures. A test's main() returns test_finish().
 *
 * Missing fixtures (tu_missing_fixture): a test never passes for lack of its
 * input. Under CI=true (or 1) a missing fixture is a failure; elsewhere the
 * test exits 77, which ctest reports as skipped (SKIP_RETURN_CODE 77 on every
 * test in CMakeLists.txt). */
#ifndef CINFER_TESTUTIL_H
#define CINFER_TESTUTIL_H

#include <stddef.h>
#include <stdio.h>

extern int test_failures;
extern int test_checks;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        test_checks++;                                                               \
        if (!(cond)) {                                                               \
            test_failures++;                                                         \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                            \
    } while (0)

#define CHECKF(cond, ...)                                                            \
    do {                                                                             \
        test_checks++;                                                               \
        if (!(cond)) {                                                               \
            test_failures++;                                                         \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
        }                                                                            \
    } while (0)

/* Path of a file under the shared folder, in a static buffer (rotating, 8 slots). */
const char *shared_path(const char *rel);
/* Path of a file in the source tree: $CINFER_SRC/<rel>, else derived from
 * where testutil.c was compiled from. Static buffer (rotating, 8 slots). */
const char *source_path(const char *rel);
/* Reads a whole file (NUL-terminated, *len without the NUL); NULL on error. Caller frees. */
char *read_file(const char *path, size_t *len);
/* Writes a temp file path unique to this process into buf: /tmp/cinfer-test-<pid>-<tag>. */
const char *temp_path(char *buf, size_t cap, const char *tag);
/* A path that does not exist yet, <scratch>/d, inside a fresh directory made
 * with mkdtemp ($TMPDIR or /tmp, cinfer-test-<tag>-XXXXXX); NULL (and buf "")
 * if it cannot be made. */
const char *test_scratch_path(char *buf, size_t cap, const char *tag);
/* Removes the scratch directory that holds `path` (from test_scratch_path),
 * with everything in it; refuses any other directory. 0 ok, -1 (warning printed). */
int test_scratch_remove(const char *path);

#define TEST_RUN_STDOUT 1
#define TEST_RUN_STDERR 2
/* Runs argv[0] (a path; argv NULL-terminated) with execv, no shell. The streams
 * named in `capture` go into out (NUL-terminated, truncated to cap - 1), the
 * others to /dev/null. Returns the exit status, 128 + signal if killed, -1 if
 * it could not be started (127 if exec failed in the child). */
int test_run(const char *const argv[], int capture, char *out, size_t cap);
/* A fixture (model, data file, CINFER_BIN, ...) the test needs is missing:
 * prints why and records it. Returns the exit code main() should return right
 * away if nothing else can run: 1 under CI=true (the failure is counted), else
 * 77 (skip). A sub-test may instead just return: test_finish() then reports it. */
int tu_missing_fixture(const char *what);
/* The KV cache element type a parametrised test runs with: the name in
 * CINFER_TEST_KV_DTYPE ("bf16", "f16", "q8_0"; CMakeLists.txt registers the
 * *_kv_<type> variants), or NULL (unset: the engine's default). */
const char *tu_kv_dtype(void);
/* 1 if any CHECK failed; else 77 if a fixture was missing (outside CI); else 0. */
int test_finish(void);

#endif
