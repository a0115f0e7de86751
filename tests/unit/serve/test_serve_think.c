/* test_serve_think.c - reasoning budgets on the server side (src/serve/api_think.c), without an
 * engine: the budget of parsed Messages / Chat / Responses bodies (budget_tokens; efforts minimal
 * .. high -> 1024 / 1024 / 2048 / 4096; disabled, adaptive, effort none, nothing -> none), the
 * markers per parser kind, and api_job_prepare leaving no budget when there is no tokenizer, the
 * parser has no block, or the vocabulary cannot write "<think>" (stories260K). The end-to-end
 * runs (markers tokenized by a vocabulary that has them, the engine forcing "</think>") are in
 * tests/clients/test_reasoning_budget.py. */
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "serve/api.h"
#include "testutil.h"

static int64_t budget_of(recipe_api api, const char *body) {
    recipe_request r;
    recipe_request_init(&r);
    recipe_error re = {0};
    int64_t b = -99;
    if (recipe_request_parse_text(api, body, strlen(body), 0, &r, &re) == 0) b = api_think_budget(&r);
    else fprintf(stderr, "parse: %s\n", re.message);
    recipe_request_free(&r);
    return b;
}

#define MSG(extra) \
    "{\"model\":\"m\",\"max_tokens\":5000,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]" extra "}"
#define CHAT(extra) "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]" extra "}"
#define RESP(extra) "{\"model\":\"m\",\"input\":\"hi\"" extra "}"

static void test_budgets(void) {
    CHECK(budget_of(RECIPE_API_MESSAGES, MSG(",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024}")) == 1024);
    CHECK(budget_of(RECIPE_API_MESSAGES, MSG(",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":3000}")) == 3000);
    CHECK(budget_of(RECIPE_API_MESSAGES, MSG(",\"thinking\":{\"type\":\"disabled\"}")) == -1);
    CHECK(budget_of(RECIPE_API_MESSAGES, MSG(",\"thinking\":{\"type\":\"adaptive\"}")) == -1);
    CHECK(budget_of(RECIPE_API_MESSAGES, MSG("")) == -1);
    CHECK(budget_of(RECIPE_API_CHAT, CHAT(",\"reasoning_effort\":\"minimal\"")) == 1024);
    CHECK(budget_of(RECIPE_API_CHAT, CHAT(",\"reasoning_effort\":\"low\"")) == 1024);
    CHECK(budget_of(RECIPE_API_CHAT, CHAT(",\"reasoning_effort\":\"medium\"")) == 2048);
    CHECK(budget_of(RECIPE_API_CHAT, CHAT(",\"reasoning_effort\":\"high\"")) == 4096);
    CHECK(budget_of(RECIPE_API_CHAT, CHAT(",\"reasoning_effort\":\"none\"")) == -1);
    CHECK(budget_of(RECIPE_API_CHAT, CHAT("")) == -1);
    CHECK(budget_of(RECIPE_API_RESPONSES, RESP(",\"reasoning\":{\"effort\":\"high\"}")) == 4096);
    CHECK(budget_of(RECIPE_API_RESPONSES, RESP("")) == -1);
}

static void test_markers(void) {
    const char *s = NULL, *e = NULL;
    CHECK(api_think_markers(RECIPE_PARSER_HERMES, &s, &e) && !strcmp(s, "<think>") && !strcmp(e, "</think>"));
    CHECK(api_think_markers(RECIPE_PARSER_THINK, &s, &e) && !strcmp(e, "</think>"));
    CHECK(api_think_markers(RECIPE_PARSER_DEEPSEEK_R1, &s, &e) && !strcmp(e, "</think>"));
    CHECK(api_think_markers(RECIPE_PARSER_DEEPSEEK_V31, &s, &e) && !strcmp(e, "</think>"));
    CHECK(api_think_markers(RECIPE_PARSER_MISTRAL, &s, &e) && !strcmp(s, "[THINK]") && !strcmp(e, "[/THINK]"));
    CHECK(!api_think_markers(RECIPE_PARSER_PLAIN, &s, &e));
    CHECK(!api_think_markers(RECIPE_PARSER_LLAMA3, &s, &e));
    CHECK(!api_think_markers(RECIPE_PARSER_DEEPSEEK_V3, &s, &e));
}

/* api_job_parse + api_job_prepare of a Messages body with budget 2000; returns p.think_budget. */
static int32_t prepared_budget(recipe_parser_kind k, const tokenizer *tok, int32_t *n_end) {
    const char *body = MSG(",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":2000}");
    api_ctx ctx = {.parser = k, .now = 1, .max_n = 8, .n_vocab = 512, .tok = tok};
    api_job a;
    gen_params p;
    serve_error e;
    memset(&a, 0, sizeof a);
    memset(&e, 0, sizeof e);
    int32_t b = -99;
    *n_end = -1;
    if (api_job_parse(&a, RECIPE_API_MESSAGES, body, strlen(body), &ctx, &p, &e) == 0) {
        if (api_job_prepare(&a, &ctx, &p, &e) == 0) {
            b = p.think_budget;
            *n_end = p.n_think_end;
        }
        gen_params_free(&p);
    }
    api_job_free(&a);
    return b;
}

static void test_prepare(const tokenizer *tok) {
    int32_t n_end;
    CHECK(prepared_budget(RECIPE_PARSER_HERMES, NULL, &n_end) == -1 && n_end == 0); /* no tokenizer */
    if (!tok) return;
    CHECK(prepared_budget(RECIPE_PARSER_LLAMA3, tok, &n_end) == -1 && n_end == 0); /* no block */
    /* stories260K has no "<think>" token: SentencePiece writes " <think>" (space prefix) */
    CHECK(prepared_budget(RECIPE_PARSER_HERMES, tok, &n_end) == -1 && n_end == 0);
    CHECK(prepared_budget(RECIPE_PARSER_MISTRAL, tok, &n_end) == -1 && n_end == 0);
}

int main(void) {
    test_budgets();
    test_markers();
    gguf_file *f = NULL;
    tokenizer *tok = NULL;
    cf_err err = {0};
    if (gguf_open(shared_path("models/stories260K.gguf"), &f, &err) || tokenizer_load_gguf(f, &tok, &err))
        tu_missing_fixture(err.msg);
    test_prepare(tok);
    tokenizer_free(tok);
    gguf_close(f);
    return test_finish();
}
