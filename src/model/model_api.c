/* model_api.c - the public model API (include/cinfer/model.h) over the
 * internal loader (model.h): a cinfer_model IS the internal model (one struct,
 * two names), so an engine given a cinfer_model needs no conversion.
 * Invariant: nothing here keeps state of its own; every getter reads the
 * immutable hyper-parameters model_load() filled. */
#include "cinfer/model.h"

#include <stdio.h>

#include "model/model.h"

cinfer_model *cinfer_model_open(const char *path, const cinfer_model_options *opts, char *err, size_t err_len) {
    cf_err ce = {0};
    model *m = NULL;
    if (opts && opts->flags) {
        if (err && err_len) snprintf(err, err_len, "%s: unknown model options 0x%x", path, (unsigned)opts->flags);
        return NULL;
    }
    model_load_opts lo = {.weights_cache_dir = opts ? opts->weights_cache_dir : NULL};
    if (model_load_with(path, &lo, &m, &ce)) {
        if (err && err_len) snprintf(err, err_len, "%s", ce.msg);
        return NULL;
    }
    return m;
}

void cinfer_model_close(cinfer_model *m) { model_free(m); }

const char *cinfer_model_arch(const cinfer_model *m) { return model_get_hparams(m)->arch; }
uint64_t cinfer_model_n_params(const cinfer_model *m) { return model_n_params(m); }
int32_t cinfer_model_n_ctx_train(const cinfer_model *m) { return model_get_hparams(m)->n_ctx_train; }
int32_t cinfer_model_n_vocab(const cinfer_model *m) { return model_get_hparams(m)->n_vocab; }
int32_t cinfer_model_n_layer(const cinfer_model *m) { return model_get_hparams(m)->n_layer; }
