/* timeutil.h - monotonic clock helpers. */
#ifndef CINFER_BASE_TIMEUTIL_H
#define CINFER_BASE_TIMEUTIL_H
/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC). */
double time_now(void);
#endif
