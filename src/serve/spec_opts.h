/* spec_opts.h - the per-request speculative decoding options of the API:
 * `"cinfer": {"speculative": {"drafter": "ngram" | "draft" | "mtp" | "dspark" | "off" | "default", "k": 1..16}}`,
 * or `"speculative": false` / `"off"` (off) / `true` / `"ngram"` (the n-gram drafter).
 * Absent: the server's default (--speculative, --spec-k). */
#ifndef CINFER_SERVE_SPEC_OPTS_H
#define CINFER_SERVE_SPEC_OPTS_H

#include "cinfer/engine.h"
#include "serve/serve_error.h"

/* Parses the `cinfer` object's JSON text (NULL: absent) into *out (zeroed first: the default).
 * 0, or -1 with a 400 naming cinfer.speculative. */
int spec_opts_parse(const char *cinfer_json, cinfer_speculative *out, serve_error *err);

#endif
