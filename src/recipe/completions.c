/* completions.c - OpenAI Completions request parser (POST /v1/completions; recipe_request_parse_text
 * with RECIPE_API_CHAT + RECIPE_PARSE_COMPLETIONS): the body -> the canonical request with
 * `completion` set and the prompt as text or token ids instead of messages.
 *
 * Invariants: on success exactly one of prompt / prompt_ids is set; prompt ids are >= 0 and fit
 * int32 (the vocabulary bound is the caller's); every other field is typed and range-checked as
 * in Chat (chat.c) and the shared extension fields (common.c); `logprobs` (an integer, the
 * number of alternatives) maps to logprobs = 1 + top_logprobs. Nothing is silently dropped:
 * fields the caller may not support (echo, suffix, best_of) are recorded for it to decide. */
#include <stdio.h>

#include "recipe/recipe_internal.h"

/* Token ids of a JSON array (non-empty, each an integer in [0, 2^31)). */
static int prompt_ids(recipe_request *r, const rj *a, recipe_error *err) {
    size_t n = rj_size(a);
    int32_t *ids = ra_alloc(&r->arena, n * sizeof *ids);
    if (!ids) return recipe_fail(err, RECIPE_ERR_SERVER, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const rj *t = rj_at(a, i);
        if (!rj_is_integer(t) || rj_int(t) < 0 || rj_int(t) > INT32_MAX)
            return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "prompt",
                               "'prompt[%zu]' must be a token id (an "
                               "integer >= 0)",
                               i);
        ids[i] = (int32_t)rj_int(t);
    }
    r->prompt_ids = ids;
    r->n_prompt_ids = n;
    return 0;
}

/* prompt: "text", [ids], ["text"] or [[ids]]. */
static int parse_prompt(recipe_request *r, const rj *pr, recipe_error *err) {
    if (rj_is_array(pr) && rj_size(pr) == 1 && (rj_is_string(rj_at(pr, 0)) || rj_is_array(rj_at(pr, 0))))
        pr = rj_at(pr, 0);
    if (rj_is_string(pr)) {
        r->prompt = rj_str(pr);
        r->prompt_len = rj_strlen(pr);
        return 0;
    }
    if (rj_is_array(pr) && rj_size(pr) > 0 && rj_is_number(rj_at(pr, 0))) return prompt_ids(r, pr, err);
    if (rj_is_array(pr) && rj_size(pr) > 1)
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "prompt",
                           "batched prompts (more than one) are not "
                           "supported; send one request per prompt");
    return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "prompt",
                       "'prompt' must be a string, a list of token ids, "
                       "or a list with one of those");
}

int completions_request_parse(recipe_request *r, rj *b, recipe_error *err);
int completions_request_parse(recipe_request *r, rj *b, recipe_error *err) {
    enum {
        P_MODEL = S_COUNT,
        P_PROMPT,
        P_STREAM_OPTIONS,
        P_MAX_TOKENS,
        P_PRESENCE,
        P_FREQUENCY,
        P_N,
        P_SEED,
        P_LOGPROBS,
        P_LOGIT_BIAS,
        P_STOP,
        P_ECHO,
        P_SUFFIX,
        P_BEST_OF,
        P_COUNT
    };
    static const jkey keys[P_COUNT] = {RECIPE_COMMON_KEYS,
                                       JKEY("model"),
                                       JKEY("prompt"),
                                       JKEY("stream_options"),
                                       JKEY("max_tokens"),
                                       JKEY("presence_penalty"),
                                       JKEY("frequency_penalty"),
                                       JKEY("n"),
                                       JKEY("seed"),
                                       JKEY("logprobs"),
                                       JKEY("logit_bias"),
                                       JKEY("stop"),
                                       JKEY("echo"),
                                       JKEY("suffix"),
                                       JKEY("best_of")};
    rj *v[P_COUNT];
    jpick(b, keys, P_COUNT, v);
    r->completion = true;
    if (rjv_str(v[P_MODEL], "model", &r->model, err, "")) return -1;
    if (parse_prompt(r, v[P_PROMPT], err)) return -1;
    if (parse_common_sampling_v(r, v, err)) return -1;
    if (r->top_logprobs != RECIPE_UNSET)
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "top_logprobs",
                           "Completions take 'logprobs' (an "
                           "integer), not 'top_logprobs'");
    rj *so = NULL;
    if (rjv_obj(v[P_STREAM_OPTIONS], "stream_options", &so, err, "")) return -1;
    if (so && !r->stream)
        return recipe_fail(err, RECIPE_ERR_INVALID_REQUEST, "stream_options",
                           "'stream_options' is only allowed when 'stream' is true");
    if (so && jget_bool(so, "include_usage", &r->include_usage, err, "stream_options")) return -1;
    if (rjv_int(v[P_MAX_TOKENS], "max_tokens", &r->max_tokens, 1, INT32_MAX, err, "")) return -1;
    if (rjv_num(v[P_PRESENCE], "presence_penalty", &r->presence_penalty, -2, 2, err, "")) return -1;
    if (rjv_num(v[P_FREQUENCY], "frequency_penalty", &r->frequency_penalty, -2, 2, err, "")) return -1;
    if (rjv_int(v[P_N], "n", &r->n, 1, 128, err, "")) return -1;
    if (rjv_int(v[P_SEED], "seed", &r->seed, INT64_MIN + 1, INT64_MAX, err, "")) return -1;
    int64_t lp = RECIPE_UNSET;
    if (rjv_int(v[P_LOGPROBS], "logprobs", &lp, 0, 20, err, "")) return -1;
    if (lp != RECIPE_UNSET) r->logprobs = 1, r->top_logprobs = lp;
    if (parse_logit_bias(r, v[P_LOGIT_BIAS], err) || parse_openai_stop(r, v[P_STOP], err)) return -1;
    if (rjv_bool(v[P_ECHO], "echo", &r->echo, err, "")) return -1;
    if (rjv_str(v[P_SUFFIX], "suffix", &r->suffix, err, "")) return -1;
    if (rjv_int(v[P_BEST_OF], "best_of", &r->best_of, 1, 128, err, "")) return -1;
    return 0;
}
