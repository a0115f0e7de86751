/* parser_kinds.c - the output-parser kinds (include/cinfer/recipe.h): their names and aliases,
 * their reasoning markers, and the kind a chat template / architecture implies. Pure functions
 * over constant tables; the state machine itself is parser.c. */
#include <stdbool.h>
#include <string.h>

#include "cinfer/recipe.h"

#define SP "\xE2\x96\x81" /* U+2581, as DeepSeek's tool-call markers spell a space */

static const char *const k_names[RECIPE_PARSER_COUNT] = {"plain",        "think",  "deepseek_r1", "deepseek_v3",
                                                         "deepseek_v31", "hermes", "llama3",      "mistral"};

const char *recipe_parser_name(recipe_parser_kind k) { return (unsigned)k < RECIPE_PARSER_COUNT ? k_names[k] : "?"; }

int recipe_parser_from_name(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < RECIPE_PARSER_COUNT; i++)
        if (!strcmp(name, k_names[i])) return i;
    if (!strcmp(name, "qwen") || !strcmp(name, "qwen3") || !strcmp(name, "qwen25")) return RECIPE_PARSER_HERMES;
    if (!strcmp(name, "deepseek_v3.1")) return RECIPE_PARSER_DEEPSEEK_V31;
    if (!strcmp(name, "llama") || !strcmp(name, "llama3_json")) return RECIPE_PARSER_LLAMA3;
    return -1;
}

bool recipe_parser_think_markers(recipe_parser_kind kind, const char **start, const char **end) {
    switch (kind) {
    case RECIPE_PARSER_THINK:
    case RECIPE_PARSER_DEEPSEEK_R1:
    case RECIPE_PARSER_DEEPSEEK_V31:
    case RECIPE_PARSER_HERMES: *start = "<think>", *end = "</think>"; return true;
    case RECIPE_PARSER_MISTRAL: *start = "[THINK]", *end = "[/THINK]"; return true;
    default: *start = *end = NULL; return false;
    }
}

recipe_parser_kind recipe_parser_detect(const char *t, const char *arch) {
    if (t) {
        if (strstr(t, "tool" SP "calls" SP "begin")) {
            /* V3/R1 render "name\n```json\nargs\n```"; V3.1 puts the arguments right after the separator */
            if (!strstr(t, "```json")) return RECIPE_PARSER_DEEPSEEK_V31;
            return strstr(t, "<think>") || strstr(t, "</think>") ? RECIPE_PARSER_DEEPSEEK_R1
                                                                 : RECIPE_PARSER_DEEPSEEK_V3;
        }
        if (strstr(t, "[TOOL_CALLS]") || strstr(t, "[THINK]")) return RECIPE_PARSER_MISTRAL;
        if (strstr(t, "<tool_call>")) return RECIPE_PARSER_HERMES;
        if (strstr(t, "<|python_tag|>") || (strstr(t, "<|start_header_id|>") && strstr(t, "\"parameters\"")))
            return RECIPE_PARSER_LLAMA3;
        if (strstr(t, "<think>") || strstr(t, "</think>")) return RECIPE_PARSER_THINK;
        if (strstr(t, "<|start_header_id|>ipython")) return RECIPE_PARSER_LLAMA3;
    }
    if (arch) {
        if (!strcmp(arch, "deepseek2") || !strcmp(arch, "deepseek3")) return RECIPE_PARSER_DEEPSEEK_V3;
        if (!strncmp(arch, "qwen", 4)) return RECIPE_PARSER_HERMES;
        if (!strcmp(arch, "llama") && t && strstr(t, "<|eot_id|>")) return RECIPE_PARSER_LLAMA3;
    }
    return RECIPE_PARSER_PLAIN;
}
