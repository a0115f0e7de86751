/* testutil.h - tiny test harness: CHECK macros that count failures, fixture
 * paths via CINFER_SHARED (default ../shared), whole-file reads, the one rule
 * for missing fixtures. A test's main() returns test_finish().
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

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        test_checks++;                                                                     \
        if (!(cond)) {                                                                     \
            test_failures++;                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);       \
        }                                                                                  \
    } while (0)

#define CHECKF(cond, ...)                                                                  \
    do {                                                                                   \
        test_checks++;                                                                     \
        if (!(cond)) {                                                                     \
            test_failures++;                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);       \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
        }                                                                                  \
    } while (0)

/* Path of a file under the shared folder, in a static buffer (rotating, 8 slots). */
const char *shared_path(const char *rel);
/* Reads a whole file (NUL-terminated, *len without the NUL); NULL on error. Caller frees. */
char *read_file(const char *path, size_t *len);
/* Writes a temp file path unique to this process into buf: /tmp/cinfer-test-<pid>-<tag>. */
const char *temp_path(char *buf, size_t cap, const char *tag);
/* A fixture (model, data file, CINFER_BIN, ...) the test needs is missing:
 * prints why and records it. Returns the exit code main() should return right
 * away if nothing else can run: 1 under CI=true (the failure is counted), else
 * 77 (skip). A sub-test may instead just return: test_finish() then reports it. */
int tu_missing_fixture(const char *what);
/* 1 if any CHECK failed; else 77 if a fixture was missing (outside CI); else 0. */
int test_finish(void);

#endif
