/* mkmodel_internal.h - what mkmodel.c (the shared writer) and the
 * per-architecture describers (mkmodel_ds4.c) share: the tensor description
 * and its constructors. Not a public header.
 *
 * A tdesc names one tensor, its shape (ne = {in, out[, n_expert]}), type and
 * how its values are drawn: mean + std * N(0,1) (std 0 = 0.02), or, when
 * int_range > 0, an I32 table whose rows hold ne[0] distinct ids in
 * [0, int_range) (deepseek4's token -> experts hash routing). */
#ifndef CINFER_MODEL_MKMODEL_INTERNAL_H
#define CINFER_MODEL_MKMODEL_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "format/gguf.h"
#include "model/mkmodel.h"
#include "tensor/dtype.h"

#define DT_I32_TABLE 26 /* ggml's GGML_TYPE_I32 */

typedef struct tdesc {
    char name[64];
    int n_dims;
    int64_t ne[3]; /* ne[2] = 1 unless 3-D */
    uint32_t type; /* a dtype, or DT_I32_TABLE */
    float mean; /* 1 for norms, 0 for matrices */
    float std; /* 0: 0.02 */
    int32_t int_range; /* > 0: distinct I32 ids in [0, int_range) per row */
    int32_t hot_n; /* the first hot_n values of each row get hot_add (a skewed router bias) */
    float hot_add;
} tdesc;

tdesc mat(const char *name, int64_t in, int64_t out, dtype t);
tdesc norm(const char *name, int64_t n);
tdesc experts(const char *name, int64_t in, int64_t out, int64_t n_exp, dtype t);

/* deepseek4 (mkmodel_ds4.c) */
#define MK_DS4_MAX_PER_LAYER 48
int mk_ds4_validate(const mkmodel_opts *o, cf_err *err);
int mk_ds4_describe(const mkmodel_opts *o, int64_t vocab, tdesc *t);
void mk_ds4_set_hparams(gguf_writer *w, const mkmodel_opts *o, int64_t vocab);
bool mk_ds4_has_options(const mkmodel_opts *o);

#endif
