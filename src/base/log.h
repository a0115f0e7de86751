/* log.h - leveled logging to stderr.
 * The level is the one process-wide singleton `cf_log_level` (set once from
 * --log-level / CINFER_LOG at start-up). Messages are single lines. */
#ifndef CINFER_BASE_LOG_H
#define CINFER_BASE_LOG_H

typedef enum { CF_LOG_ERROR = 0, CF_LOG_WARN, CF_LOG_INFO, CF_LOG_DEBUG } cf_log_lvl;

extern cf_log_lvl cf_log_level;

void cf_log(cf_log_lvl lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses "error|warn|info|debug"; returns -1 if unknown. */
int cf_log_parse_level(const char *s, cf_log_lvl *out);

#define LOG_ERROR(...) cf_log(CF_LOG_ERROR, __VA_ARGS__)
#define LOG_WARN(...) cf_log(CF_LOG_WARN, __VA_ARGS__)
#define LOG_INFO(...) cf_log(CF_LOG_INFO, __VA_ARGS__)
#define LOG_DEBUG(...) cf_log(CF_LOG_DEBUG, __VA_ARGS__)

#endif
