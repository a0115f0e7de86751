/* log.c - leveled logging (see log.h). */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

cf_log_lvl cf_log_level = CF_LOG_WARN;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void cf_log(cf_log_lvl lvl, const char *fmt, ...) {
    if (lvl > cf_log_level) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cinfer %s: %s\n", level_names[lvl], line);
}

int cf_log_parse_level(const char *s, cf_log_lvl *out) {
    for (int i = 0; i < 4; i++)
        if (strcmp(s, level_names[i]) == 0) {
            *out = (cf_log_lvl)i;
            return 0;
        }
    return -1;
}
