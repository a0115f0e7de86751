/* fuzz_ep_stats.c - libFuzzer harness for the parser `cinfer ep stats` runs
 * on whatever a rank's /metrics answered (ep_stats_parse, src/ep/
 * ep_stats_text.c): any bytes must parse without crashing or reading past
 * the input; a text the renderer wrote must read back to the same numbers.
 * Seed corpus: tests/fuzz/corpus/ep_stats/ (a rank's /metrics text):
 *   CC=clang cmake -S . -B build-fuzz -DCINFER_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
 *   cmake --build build-fuzz --target fuzz_ep_stats
 *   ./build-fuzz/fuzz_ep_stats -max_total_time=60 tests/fuzz/corpus/ep_stats */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ep/ep_stats_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *copy = malloc(size ? size : 1); /* exactly size bytes: no terminator to lean on */
    if (!copy) return 0;
    memcpy(copy, data, size);
    ep_stats s;
    if (ep_stats_parse(copy, size, &s)) {
        char *txt = NULL;
        size_t len = 0;
        ep_stats back;
        s.rank = s.rank < 0 ? 0 : s.rank; /* the renderer writes what it is given; ranks are >= 0 */
        if (ep_stats_render(&s, &txt, &len) == 0) {
            if (!ep_stats_parse(txt, len, &back) || back.rows_sent != s.rows_sent || back.rebalances != s.rebalances)
                abort();
            free(txt);
        }
    }
    free(copy);
    return 0;
}
