/* mem_opts.h - the start-up memory checks `cinfer serve` and `cinfer run`
 * share: refusing to start when the weights plus the KV pool would not fit
 * in available memory (MemAvailable), and --mlock. Owns nothing. */
#ifndef CINFER_TOOLS_MEM_OPTS_H
#define CINFER_TOOLS_MEM_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

/* MemAvailable from /proc/meminfo in bytes, or -1 when it cannot be read. */
int64_t mem_available_bytes(void);

/* Before loading: 0 when the model file's weights plus kv_bytes of KV pool
 * fit in MemAvailable (or it is unknown); else prints one line saying what
 * does not fit and how to go on (lower KV_OPT, --no-memory-check) and
 * returns 1. cmd is "serve" or "run"; kv_opt names the KV option or NULL.
 * weights_file_backed (--weights-cache): the weights are shared file pages,
 * which the kernel reclaims instead of killing the process, so only the KV
 * pool must fit; weights beyond MemAvailable get a note on stderr. */
int mem_check_fits(const char *cmd, const char *model_path, int64_t kv_bytes, const char *kv_opt,
                   bool weights_file_backed);

/* --mlock after loading: 0 ok, else prints the one-line error, returns 1. */
int mem_lock_model(const char *cmd, model *m);

#endif
