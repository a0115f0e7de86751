/* fuzz_rjson.c - libFuzzer harness for the recipe JSON reader (src/recipe/rjson.c) with
 * jansson as the oracle (tests/unit/recipe/rjson_oracle.h): the reader accepts exactly
 * what json_loads accepts, builds the same value (opaque objects included, built on
 * access) and its raw text parses back to that value. Any disagreement aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../unit/recipe/rjson_oracle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *bad = rjson_check((const char *)data, size);
    if (bad) {
        fprintf(stderr, "rjson disagrees with jansson: %s\n", bad);
        abort();
    }
    return 0;
}
