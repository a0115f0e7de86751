/* fuzz_serve_request.c - libFuzzer harness for the server's request parsing
 * and validation (Chat and Completions through recipe: api_job_parse / api_completion_parse in
 * src/serve/api_request.c; tokenize / detokenize: src/serve/api_tokenize.c), without a model or
 * the network.
 *
 * Input: the first byte picks the endpoint (chat completions, completions,
 * tokenize, detokenize), the rest is the HTTP body; or (mode 4) the rest is
 * generated text, and recipe's Chat / Completions stream chunk must parse back. Parsing may reject the
 * body, but must not crash or leak; a rejection must carry a 4xx/5xx status
 * and a message, and its OpenAI error JSON must format; an accepted request
 * must satisfy the invariants the generation core relies on (n in range,
 * stop strings non-empty, bias ids in the vocabulary, sampling in range, the speculative options
 * in range, cinfer.resume ids non-negative). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/api.h"

#define N_VOCAB 512

static void check_params(const gen_params *p) {
    if (p->n < 1 || p->n > 8) abort();
    if (p->n_stop < 0 || p->n_stop > 16) abort();
    for (int32_t i = 0; i < p->n_stop_ids; i++)
        if (p->stop_ids[i] < 0 || p->stop_ids[i] >= N_VOCAB) abort();
    if (p->min_tokens < 0) abort();
    if (p->has_resume && (p->n_resume_ids < 0 || !p->resume_ids || p->resume_text_bytes < 0)) abort();
    for (int32_t i = 0; p->has_resume && i < p->n_resume_ids; i++)
        if (p->resume_ids[i] < 0) abort(); /* the vocabulary bound is checked with the model (resume_prepare) */
    for (int32_t i = 0; i < p->n_stop; i++)
        if (!p->stop[i] || !p->stop[i][0]) abort();
    for (int32_t i = 0; i < p->sampling.n_bias; i++)
        if (p->bias[i].token < 0 || p->bias[i].token >= N_VOCAB) abort();
    if (p->speculative.drafter < 0 || p->speculative.drafter >= CINFER_SPEC_N || p->speculative.k < 0 ||
        p->speculative.k > CINFER_SPEC_MAX_K)
        abort(); /* cinfer.speculative (serve/spec_opts.c) */
    if (!(p->sampling.temperature >= 0 && p->sampling.temperature <= 2)) abort();
    if (!(p->sampling.top_p > 0 && p->sampling.top_p <= 1)) abort();
    if (p->max_tokens < 0 || p->top_logprobs < 0 || p->top_logprobs > 20) abort();
    if (p->kind == GEN_CHAT && (!p->req || p->req->n_messages == 0)) abort(); /* the template reads the request */
    if (p->kind == GEN_COMPLETION && !p->prompt && !p->prompt_ids) abort();
    for (int32_t i = 0; i < p->n_prompt_ids; i++)
        if (p->prompt_ids[i] < 0 || p->prompt_ids[i] >= N_VOCAB) abort();
}

static void check_error(const serve_error *e) {
    if (e->status < 400 || e->status > 599 || !e->message[0]) abort();
    char *j = serve_error_json(e);
    if (!j) abort();
    free(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const api_ctx ctx = {.parser = RECIPE_PARSER_PLAIN, .max_n = 8, .n_vocab = N_VOCAB};
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    serve_error e = {0};
    switch (data[0] % 5) {
    case 0:
    case 1: {
        gen_params p;
        api_job a; /* p.req points into it: freed last */
        memset(&a, 0, sizeof a);
        int rc = data[0] % 5 == 0 ? api_job_parse(&a, RECIPE_API_CHAT, body, len, &ctx, &p, &e)
                                  : api_completion_parse(&a, body, len, &ctx, &p, &e);
        if (rc == 0) {
            check_params(&p);
            gen_params_free(&p);
        } else check_error(&e);
        api_job_free(&a);
        break;
    }
    case 2: {
        char *prompt, *model;
        size_t plen;
        recipe_request req;
        bool add;
        recipe_request_init(&req);
        if (api_tokenize_parse(body, len, &prompt, &plen, &req, &add, &model, &e) == 0) {
            if (!prompt == !req.n_messages) abort(); /* exactly one of the two forms */
            free(prompt);
            free(model);
        } else check_error(&e);
        recipe_request_free(&req);
        break;
    }
    case 4: { /* generated text through recipe's OpenAI stream writer: a chunk that parses back */
        json_t *probe = json_stringn(body, len);
        if (!probe) break; /* engine text is always valid UTF-8 */
        json_decref(probe);
        recipe_stream_info info = {.id = "cmpl-1",
                                   .model = "m",
                                   .created = 7,
                                   .include_usage = len % 3 == 0,
                                   .n_choices = 2,
                                   .completion = len % 2 == 0};
        recipe_stream_encoder *enc = recipe_stream_encoder_new(RECIPE_API_CHAT, &info);
        if (!enc) break;
        recipe_buf out = {0};
        recipe_error re;
        recipe_event ev = {.type = RECIPE_EV_TEXT, .text = body, .len = len, .choice = (int)(len % 2)};
        if (recipe_stream_encoder_event(enc, &ev, &out, &re)) abort();
        const char *last = out.data; /* the last event: escaped text holds no raw newline */
        for (const char *q = out.data; q && (q = strstr(q, "\n\ndata: ")); q += 2) last = q + 2;
        json_t *o = last ? json_loads(last + 6, JSON_DISABLE_EOF_CHECK | JSON_ALLOW_NUL, NULL) : NULL;
        if (len && !o) abort();
        if (o) json_decref(o);
        recipe_buf_free(&out);
        recipe_stream_encoder_free(enc);
        break;
    }
    default: {
        int32_t *ids, n;
        char *model;
        if (api_detokenize_parse(body, len, ctx.n_vocab, &ids, &n, &model, &e) == 0) {
            for (int32_t i = 0; i < n; i++)
                if (ids[i] < 0 || ids[i] >= N_VOCAB) abort();
            free(ids);
            free(model);
        } else check_error(&e);
    }
    }
    return 0;
}
