/* timeutil.h - monotonic and process CPU clock helpers. */
#ifndef CINFER_BASE_TIMEUTIL_H
#define CINFER_BASE_TIMEUTIL_H
/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC). */
double time_now(void);
/* CPU seconds this process has run, all threads together
 * (CLOCK_PROCESS_CPUTIME_ID). On a shared machine, work per CPU-second does
 * not count other processes' turns the way the wall clock does. */
double time_process_cpu(void);
#endif
