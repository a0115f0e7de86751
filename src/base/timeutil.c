/* timeutil.c - monotonic clock (see timeutil.h). */
#include "base/timeutil.h"

#include <time.h>

double time_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
