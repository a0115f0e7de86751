/* api_think.c - reasoning budgets for the recipe-backed chat APIs (see api.h,
 * docs/serve.md "Reasoning budget"): the request's budget -> the engine's
 * think_* options (cinfer_request, docs/engine.md), which force the end of the
 * reasoning block once the budget is spent (vLLM's thinking-token budget).
 *
 * Budget: Anthropic `thinking: {"type": "enabled", "budget_tokens": N}` -> N
 * (recipe validates N >= 1024 and < max_tokens); OpenAI `reasoning_effort`
 * (Chat) / `reasoning.effort` (Responses) -> recipe_budget_from_effort
 * (minimal/low 1024, medium 2048, high 4096); thinking disabled, effort
 * `none` (the template flag already turns thinking off) and Anthropic
 * adaptive thinking -> no budget; a request that sets no budget and does
 * not turn thinking off gets `--reasoning-budget-default` when given.
 * Markers: those of the output parser kind, tokenized like template text
 * (special tokens parsed); used only when each encodes to 1..16 ids whose
 * text, as the engine detokenizes it, is the marker again (otherwise the
 * parser could not see a forced end: no enforcement).
 * Called by api_job_prepare on the HTTP loop thread; no state. */
#include "serve/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool thinking_off(const recipe_request *r) {
    return r->thinking == 0 || r->reasoning_effort == RECIPE_EFFORT_NONE;
}

int64_t api_think_budget(const recipe_request *r) {
    if (thinking_off(r)) return -1;
    if (r->thinking == 1 && r->thinking_adaptive) return -1;
    if (r->thinking == 1 && r->thinking_budget != RECIPE_UNSET) return r->thinking_budget < 0 ? -1 : r->thinking_budget;
    if (r->reasoning_effort != RECIPE_EFFORT_UNSET) return recipe_budget_from_effort(r->reasoning_effort);
    return -1;
}

bool api_think_markers(recipe_parser_kind k, const char **start, const char **end) {
    return recipe_parser_think_markers(k, start, end); /* the markers the output parser splits on */
}

/* text -> ids (special tokens parsed) when they detokenize back to exactly text; returns the count, 0 if not. */
static int32_t marker_ids(const tokenizer *tok, const char *text, int32_t *out) {
    int32_t *ids = NULL;
    size_t n = 0;
    cf_err e = {0};
    int32_t got = 0;
    if (tokenizer_encode(tok, text, strlen(text), false, true, &ids, &n, &e) == 0 && n >= 1 &&
        n <= CINFER_MAX_THINK_MARKER) {
        size_t cap = 64 + tokenizer_max_token_len(tok), at = 0, tl = strlen(text);
        char *buf = malloc(cap);
        bool same = buf != NULL;
        detok_stream dt;
        detok_init(&dt, tok, false, false); /* as the engine's output text */
        for (size_t i = 0; same && i < n; i++) {
            size_t k = detok_push(&dt, ids[i], buf, cap);
            same = at + k <= tl && !memcmp(text + at, buf, k);
            at += k;
        }
        if (same) {
            size_t k = detok_flush(&dt, buf, cap);
            same = at + k == tl && !memcmp(text + at, buf, k);
        }
        free(buf);
        if (same) {
            memcpy(out, ids, n * sizeof *ids);
            got = (int32_t)n;
        }
    }
    free(ids);
    return got;
}

void api_job_think(const api_job *a, const api_ctx *ctx, gen_params *p) {
    const char *start, *end;
    int64_t budget = api_think_budget(&a->req);
    if (budget < 0 && ctx->has_think_default && ctx->think_default >= 0 && !thinking_off(&a->req))
        budget = ctx->think_default;
    p->think_budget = -1;
    if (budget < 0 || !ctx->tok || !api_think_markers(a->kind, &start, &end)) return;
    p->n_think_start = marker_ids(ctx->tok, start, p->think_start);
    p->n_think_end = marker_ids(ctx->tok, end, p->think_end);
    if (!p->n_think_start || !p->n_think_end) {
        p->n_think_start = p->n_think_end = 0;
        return;
    }
    snprintf(p->think_start_text, sizeof p->think_start_text, "%s", start);
    p->think_budget = budget > INT32_MAX ? INT32_MAX : (int32_t)budget;
}
