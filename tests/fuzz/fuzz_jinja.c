/* fuzz_jinja.c - libFuzzer harness for the chat-template engine.
 *
 * The input bytes are template text: parse, and when that succeeds render
 * twice (add_generation_prompt false / true) against a small fixed context
 * (messages with a system prompt, tool calls, a tool result, content parts;
 * a tools list; bos/eos tokens). Parse and render may fail with an error
 * message, but must not crash, leak, hang or exceed the engine's limits; a
 * successful render must give NUL-terminated output of the stated length. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat_template.h"

static json_t *g_ctx[2];

static const char g_context_json[] =
    "{\"bos_token\":\"<s>\",\"eos_token\":\"</s>\",\"messages\":["
    "{\"role\":\"system\",\"content\":\"Be brief.\"},"
    "{\"role\":\"user\",\"content\":\"Weather in Paris? \\u00e9\\ud83e\\udd99\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
    "\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\",\"n\":2.5}}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"21 C\"},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"thanks\"}]}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"d\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}}]}";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    for (int i = 0; i < 2; i++) {
        g_ctx[i] = json_loads(g_context_json, 0, NULL);
        if (!g_ctx[i]) abort();
        json_object_set_new(g_ctx[i], "add_generation_prompt", json_boolean(i));
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    chat_template *t = NULL;
    cf_err err;
    if (chat_template_parse((const char *)data, size, &t, &err) != 0) {
        if (!memchr(err.msg, 0, sizeof err.msg)) abort();
        return 0;
    }
    for (int i = 0; i < 2; i++) {
        char *out = NULL;
        size_t n = 0;
        if (chat_template_render_at(t, g_ctx[i], 1795910400, &out, &n, &err) == 0) {
            if (!out || out[n] != 0) abort();
            free(out);
        } else if (out) abort();
    }
    chat_template_free(t);
    return 0;
}
