"""test_tool_calls.py - tool calls and reasoning through all three chat APIs of `cinfer serve`
(OpenAI Chat Completions, Anthropic Messages, OpenAI Responses) with the official SDKs.

The model is the TEST-ONLY scripted bigram GGUF written by scripted_bigram_model.py: a real
llama GGUF (real tokenizer, engine, forward pass, Hermes output parser chosen by detection
from its chat template) whose weights make it replay fixed scripts: a <tool_call> for
get_weather(city=Paris) when tools are offered, "The weather in Paris is sunny." after a tool
result, and <think>The user says hello.</think>Hello! How can I help? otherwise; forced tool calls
(tool_choice required / named: the server appends the tool-call opener to the prompt, the model
continues it under the call's grammar); strict tools under tool_choice auto (the call the model
chooses is held to the schema); usage reasoning tokens.
Run by tests/integration/serve_tools.sh."""
import json
import os
import tempfile
import unittest

import anthropic
import openai

import scripted_bigram_model as sbm
from cinfer_server import Server

SRV = None
TMP = None
NAME = "scripted"
OAI = None
ANT = None

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather",
                                            "parameters": {"type": "object",
                                                           "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}
ANT_TOOL = {"name": "get_weather", "description": "Current weather",
            "input_schema": WEATHER["function"]["parameters"]}
RESP_TOOL = {"type": "function", "name": "get_weather", "description": "Current weather",
             "parameters": WEATHER["function"]["parameters"]}


def setUpModule():
    global SRV, TMP, OAI, ANT
    TMP = tempfile.TemporaryDirectory()
    path = sbm.write(os.path.join(TMP.name, NAME + ".gguf"))
    SRV = Server(model=path, ctx=2048)
    assert "output parser: hermes (detected)" in SRV.log_text(), SRV.log_text()
    OAI = openai.OpenAI(base_url=SRV.url + "/v1", api_key="x", max_retries=0, timeout=60)
    ANT = anthropic.Anthropic(base_url=SRV.url, api_key="x", max_retries=0, timeout=60)


def tearDownModule():
    rc = SRV.stop()
    TMP.cleanup()
    assert rc == 0, "server exit code %r\n%s" % (rc, SRV.log_text()[-3000:])


USER = {"role": "user", "content": "What is the weather in Paris?"}


class TestChatTools(unittest.TestCase):
    def test_tool_call_then_answer(self):
        r = OAI.chat.completions.create(model=NAME, messages=[USER], tools=[WEATHER])
        ch = r.choices[0]
        self.assertEqual(ch.finish_reason, "tool_calls")
        self.assertIsNone(ch.message.content)
        tc = ch.message.tool_calls[0]
        self.assertEqual(tc.function.name, "get_weather")
        self.assertEqual(json.loads(tc.function.arguments), {"city": "Paris"})
        self.assertTrue(tc.id.startswith("call_"))
        r2 = OAI.chat.completions.create(model=NAME, tools=[WEATHER], messages=[
            USER, ch.message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": tc.id, "content": '{"sky": "sunny"}'}])
        self.assertEqual(r2.choices[0].message.content, sbm.ANSWER_TEXT)
        self.assertEqual(r2.choices[0].finish_reason, "stop")

    def test_tool_call_stream(self):
        chunks = list(OAI.chat.completions.create(model=NAME, messages=[USER], tools=[WEATHER], stream=True,
                                                  stream_options={"include_usage": True}))
        calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
        self.assertEqual(calls[0].function.name, "get_weather")
        self.assertTrue(calls[0].id.startswith("call_"))
        self.assertEqual(json.loads("".join(tc.function.arguments or "" for tc in calls)), {"city": "Paris"})
        self.assertEqual([c.choices[0].finish_reason for c in chunks if c.choices][-1], "tool_calls")
        self.assertEqual(chunks[-1].usage.completion_tokens, len(sbm.SCRIPTS["<|call|>"]) + 1)  # + EOS

    def test_tool_choice_none_is_text(self):
        r = OAI.chat.completions.create(model=NAME, messages=[USER], tools=[WEATHER], tool_choice="none")
        self.assertIsNone(r.choices[0].message.tool_calls)  # tools not offered to the template: no call
        self.assertEqual(r.choices[0].message.content, sbm.THINK_ANSWER_TEXT)

    def test_reasoning_content(self):
        r = OAI.chat.completions.create(model=NAME, messages=[{"role": "user", "content": "hi"}])
        m = r.choices[0].message
        self.assertEqual(m.content, sbm.THINK_ANSWER_TEXT)
        self.assertEqual(m.model_extra["reasoning_content"], sbm.REASONING_TEXT)
        self.assertEqual(r.usage.completion_tokens, len(sbm.SCRIPTS["<|think|>"]) + 1)  # the model wrote <think>
        chunks = list(OAI.chat.completions.create(model=NAME, messages=[{"role": "user", "content": "hi"}],
                                                  stream=True))
        deltas = [c.choices[0].delta for c in chunks if c.choices]
        self.assertEqual("".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas),
                         sbm.REASONING_TEXT)
        self.assertEqual("".join(d.content or "" for d in deltas), sbm.THINK_ANSWER_TEXT)


class TestAnthropicTools(unittest.TestCase):
    def test_tool_use_then_answer(self):
        m = ANT.messages.create(model=NAME, max_tokens=64, messages=[USER], tools=[ANT_TOOL])
        self.assertEqual(m.stop_reason, "tool_use")
        tu = [b for b in m.content if b.type == "tool_use"][0]
        self.assertEqual((tu.name, tu.input), ("get_weather", {"city": "Paris"}))
        m2 = ANT.messages.create(model=NAME, max_tokens=64, tools=[ANT_TOOL], messages=[
            USER, {"role": "assistant", "content": [b.model_dump() for b in m.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tu.id, "content": "sunny"}]}])
        self.assertEqual(m2.stop_reason, "end_turn")
        self.assertEqual(m2.content[0].text, sbm.ANSWER_TEXT)

    def test_tool_use_stream_helpers(self):
        with ANT.messages.stream(model=NAME, max_tokens=64, messages=[USER], tools=[ANT_TOOL]) as s:
            events = list(s)
            final = s.get_final_message()
        self.assertEqual(final.stop_reason, "tool_use")
        tu = final.content[-1]
        self.assertEqual((tu.type, tu.name, tu.input), ("tool_use", "get_weather", {"city": "Paris"}))
        partial = "".join(e.partial_json for e in events if e.type == "input_json")
        self.assertEqual(json.loads(partial), {"city": "Paris"})

    def test_thinking(self):
        m = ANT.messages.create(model=NAME, max_tokens=1500, messages=[{"role": "user", "content": "hi"}],
                                thinking={"type": "enabled", "budget_tokens": 1024})
        self.assertEqual([b.type for b in m.content], ["thinking", "text"])
        # thinking on: the template already wrote <think> (the output starts inside reasoning)
        self.assertEqual(m.usage.output_tokens, len(sbm.SCRIPTS["<|think|>"]) - 1 + 1)  # - <think> + EOS
        self.assertEqual(m.content[0].thinking, sbm.REASONING_TEXT)
        self.assertTrue(m.content[0].signature)
        self.assertEqual(m.content[1].text, sbm.THINK_ANSWER_TEXT)
        with ANT.messages.stream(model=NAME, max_tokens=1500, messages=[{"role": "user", "content": "hi"}],
                                 thinking={"type": "enabled", "budget_tokens": 1024}) as s:
            thinking = "".join(e.thinking for e in s if e.type == "thinking")
            final = s.get_final_message()
        self.assertEqual(thinking, sbm.REASONING_TEXT)
        self.assertEqual(final.content[1].text, sbm.THINK_ANSWER_TEXT)


class TestResponsesTools(unittest.TestCase):
    def test_function_call_continuation(self):
        r = OAI.responses.create(model=NAME, input="What is the weather in Paris?", tools=[RESP_TOOL])
        self.assertEqual(r.status, "completed")
        fc = [o for o in r.output if o.type == "function_call"][0]
        self.assertEqual((fc.name, json.loads(fc.arguments)), ("get_weather", {"city": "Paris"}))
        r2 = OAI.responses.create(model=NAME, previous_response_id=r.id, tools=[RESP_TOOL], input=[
            {"type": "function_call_output", "call_id": fc.call_id, "output": '{"sky": "sunny"}'}])
        self.assertEqual(r2.output_text, sbm.ANSWER_TEXT)
        self.assertGreater(r2.usage.input_tokens, r.usage.input_tokens)

    def test_function_call_stream_helper(self):
        with OAI.responses.stream(model=NAME, input="Weather in Paris?", tools=[RESP_TOOL]) as s:
            events = list(s)
            final = s.get_final_response()
        args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
        self.assertEqual(json.loads(args), {"city": "Paris"})
        done = [e for e in events if e.type == "response.function_call_arguments.done"][0]
        self.assertEqual(json.loads(done.arguments), {"city": "Paris"})
        fc = [o for o in final.output if o.type == "function_call"][0]
        self.assertEqual(fc.name, "get_weather")
        # the stored object carries the same call id as the stream
        self.assertEqual([o for o in OAI.responses.retrieve(final.id).output if o.type == "function_call"][0].call_id,
                         fc.call_id)

    def test_reasoning_item(self):
        r = OAI.responses.create(model=NAME, input="hi", reasoning={"effort": "low"})
        self.assertEqual([o.type for o in r.output], ["reasoning", "message"])
        self.assertEqual(r.output_text, sbm.THINK_ANSWER_TEXT)


# usage reasoning tokens: the tokens of <think>The user says hello.</think> (markers included),
# counted per token by the server (docs/serve.md); with thinking on the template writes <think>
REASONING_TOKENS = 4


class TestReasoningTokens(unittest.TestCase):
    def test_chat(self):
        hi = [{"role": "user", "content": "hi"}]
        r = OAI.chat.completions.create(model=NAME, messages=hi)
        self.assertEqual(r.usage.completion_tokens_details.reasoning_tokens, REASONING_TOKENS)
        chunks = list(OAI.chat.completions.create(model=NAME, messages=hi, stream=True,
                                                  stream_options={"include_usage": True}))
        self.assertEqual(chunks[-1].usage.completion_tokens_details.reasoning_tokens, REASONING_TOKENS)
        self.assertEqual(chunks[-1].usage.completion_tokens, len(sbm.SCRIPTS["<|think|>"]) + 1)
        # no reasoning in the output: 0 (a tool call; an answer after a tool result)
        r = OAI.chat.completions.create(model=NAME, messages=[USER], tools=[WEATHER])
        self.assertEqual(r.usage.completion_tokens_details.reasoning_tokens, 0)
        # cut inside the reasoning block: every emitted token is reasoning
        r = OAI.chat.completions.create(model=NAME, messages=hi, max_tokens=2)
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens_details.reasoning_tokens, 2)

    def test_responses(self):
        r = OAI.responses.create(model=NAME, input="hi")
        self.assertEqual(r.usage.output_tokens_details.reasoning_tokens, REASONING_TOKENS)
        # thinking on: the prompt ends with <think>, the model writes 3 reasoning tokens
        r = OAI.responses.create(model=NAME, input="hi", reasoning={"effort": "low"})
        self.assertEqual(r.usage.output_tokens_details.reasoning_tokens, REASONING_TOKENS - 1)
        with OAI.responses.stream(model=NAME, input="hi", reasoning={"effort": "low"}) as s:
            list(s)
            final = s.get_final_response()
        self.assertEqual(final.usage.output_tokens_details.reasoning_tokens, REASONING_TOKENS - 1)
        self.assertEqual(final.output_text, sbm.THINK_ANSWER_TEXT)


# forced calls: the scripted model continues the server's opener "<tool_call>\n" into get_weather(city=Paris)
# under the call's grammar ({"name": const, "arguments": schema}), which ends at the JSON's closing
# brace: there EOS is the only token allowed (taken without sampling), in place of the script's
# </tool_call>; the parser closes the call at the end of the output.
# The JSON grammar allows a bounded whitespace run after the document, which the script's next choice
# ("</tool_call>" refused; the other logits tie) may take before EOS: only whitespace follows.
FORCED_TOKENS = ['{"name": "get_weather", ', '"arguments": ', '{"city": ', '"Paris"', "}}"]
NAMED = {"type": "function", "function": {"name": "get_weather"}}


class TestForcedToolChoice(unittest.TestCase):
    def check_call(self, msg):
        self.assertIsNone(msg.content)
        self.assertEqual(len(msg.tool_calls), 1)
        tc = msg.tool_calls[0]
        self.assertEqual((tc.function.name, json.loads(tc.function.arguments)), ("get_weather", {"city": "Paris"}))
        self.assertTrue(tc.id.startswith("call_"))

    def test_chat_required_and_named(self):
        # the same user turn without tools gets reasoning + text: only the forced opener makes a call
        r = OAI.chat.completions.create(model=NAME, messages=[USER], tools=[WEATHER], tool_choice="required")
        self.assertEqual(r.choices[0].finish_reason, "tool_calls")
        self.check_call(r.choices[0].message)
        self.assertGreaterEqual(r.usage.completion_tokens, len(FORCED_TOKENS) + 1)  # + EOS
        r = OAI.chat.completions.create(model=NAME, messages=[USER], tools=[WEATHER], tool_choice=NAMED)
        self.assertEqual(r.choices[0].finish_reason, "tool_calls")
        self.check_call(r.choices[0].message)
        self.assertGreaterEqual(r.usage.completion_tokens, len(FORCED_TOKENS) + 1)  # + EOS

    def test_chat_forced_stream(self):
        for choice in ("required", NAMED):
            chunks = list(OAI.chat.completions.create(model=NAME, messages=[USER], tools=[WEATHER], stream=True,
                                                      tool_choice=choice))
            deltas = [c.choices[0].delta for c in chunks if c.choices]
            calls = [tc for d in deltas for tc in (d.tool_calls or [])]
            self.assertEqual(calls[0].function.name, "get_weather", choice)
            self.assertEqual(json.loads("".join(tc.function.arguments or "" for tc in calls)), {"city": "Paris"})
            self.assertEqual("".join(d.content or "" for d in deltas), "")  # the opener is not echoed
            self.assertEqual([c.choices[0].finish_reason for c in chunks if c.choices][-1], "tool_calls")

    def test_messages_any_and_tool(self):
        for choice in ({"type": "any"}, {"type": "tool", "name": "get_weather"}):
            m = ANT.messages.create(model=NAME, max_tokens=64, messages=[USER], tools=[ANT_TOOL], tool_choice=choice)
            self.assertEqual(m.stop_reason, "tool_use", choice)
            self.assertEqual([b.type for b in m.content], ["tool_use"])
            self.assertEqual((m.content[0].name, m.content[0].input), ("get_weather", {"city": "Paris"}))
            with ANT.messages.stream(model=NAME, max_tokens=64, messages=[USER], tools=[ANT_TOOL],
                                     tool_choice=choice) as s:
                events = list(s)
                final = s.get_final_message()
            self.assertEqual(final.stop_reason, "tool_use")
            self.assertEqual([(b.type, b.name, b.input) for b in final.content],
                             [("tool_use", "get_weather", {"city": "Paris"})])
            self.assertEqual(json.loads("".join(e.partial_json for e in events if e.type == "input_json")),
                             {"city": "Paris"})

    def test_forced_inside_open_think(self):
        # thinking on + tools: the prompt ends inside <think>; unforced, the model reasons and answers
        think = {"type": "enabled", "budget_tokens": 1024}
        m = ANT.messages.create(model=NAME, max_tokens=1500, messages=[USER], tools=[ANT_TOOL], thinking=think)
        self.assertEqual([b.type for b in m.content], ["thinking", "text"])
        # forced: "</think>\n\n" closes the block before the opener, the call is parsed, no reasoning
        m = ANT.messages.create(model=NAME, max_tokens=1500, messages=[USER], tools=[ANT_TOOL], thinking=think,
                                tool_choice={"type": "any"})
        self.assertEqual(m.stop_reason, "tool_use")
        self.assertEqual([(b.type, b.name, b.input) for b in m.content],
                         [("tool_use", "get_weather", {"city": "Paris"})])
        r = OAI.responses.create(model=NAME, input="Weather?", tools=[RESP_TOOL], tool_choice="required",
                                 reasoning={"effort": "low"})
        self.assertEqual([o.type for o in r.output], ["function_call"])
        self.assertEqual(r.usage.output_tokens_details.reasoning_tokens, 0)

    def test_responses_required_and_named(self):
        for choice in ("required", {"type": "function", "name": "get_weather"}):
            r = OAI.responses.create(model=NAME, input="Weather?", tools=[RESP_TOOL], tool_choice=choice)
            self.assertEqual(r.status, "completed")
            self.assertEqual([(o.type, o.name, json.loads(o.arguments)) for o in r.output],
                             [("function_call", "get_weather", {"city": "Paris"})])

    def test_unknown_named_tool(self):
        with self.assertRaises(openai.BadRequestError) as cm:
            OAI.chat.completions.create(model=NAME, messages=[USER], tools=[WEATHER],
                                        tool_choice={"type": "function", "function": {"name": "get_time"}})
        self.assertIn("get_time", str(cm.exception))
        with self.assertRaises(anthropic.BadRequestError) as cm:
            ANT.messages.create(model=NAME, max_tokens=64, messages=[USER], tools=[ANT_TOOL],
                                tool_choice={"type": "tool", "name": "get_time"})
        self.assertIn("get_time", str(cm.exception))


class TestStrictTools(unittest.TestCase):
    """strict: true under tool_choice auto: the model chooses to call (the script writes <tool_call>),
    and from there the call is held to the schema, which here refuses the script's "Paris"."""
    STRICT_ARGS = {"type": "object", "additionalProperties": False, "required": ["city"],
                   "properties": {"city": {"enum": ["Lyon", "Rome"]}}}

    def test_chat_strict_auto(self):
        tool = {"type": "function", "function": {"name": "get_weather", "parameters": self.STRICT_ARGS,
                                                 "strict": True}}
        r = OAI.chat.completions.create(model=NAME, messages=[USER], tools=[tool])
        self.assertEqual(r.choices[0].finish_reason, "tool_calls")
        tc = r.choices[0].message.tool_calls[0]
        self.assertEqual(tc.function.name, "get_weather")
        self.assertIn(json.loads(tc.function.arguments)["city"], ("Lyon", "Rome"))
        tool["function"]["strict"] = False  # not strict: the script's own arguments
        r = OAI.chat.completions.create(model=NAME, messages=[USER], tools=[tool])
        self.assertEqual(json.loads(r.choices[0].message.tool_calls[0].function.arguments), {"city": "Paris"})

    def test_responses_strict_auto(self):
        tool = dict(RESP_TOOL, parameters=self.STRICT_ARGS, strict=True)
        r = OAI.responses.create(model=NAME, input="What is the weather in Paris?", tools=[tool])
        fc = [o for o in r.output if o.type == "function_call"][0]
        self.assertIn(json.loads(fc.arguments)["city"], ("Lyon", "Rome"))


class TestChatMulti(unittest.TestCase):
    """Chat with n > 1 or logprobs: OpenAI's shapes (logprobs kept), one output parser per choice."""

    def test_n2_tool_calls(self):
        r = OAI.chat.completions.create(model=NAME, messages=[USER], tools=[WEATHER], n=2)
        self.assertEqual(len(r.choices), 2)
        ids = set()
        for i, ch in enumerate(r.choices):
            self.assertEqual((ch.index, ch.finish_reason), (i, "tool_calls"))
            self.assertIsNone(ch.message.content)
            tc = ch.message.tool_calls[0]
            self.assertEqual((tc.function.name, json.loads(tc.function.arguments)), ("get_weather", {"city": "Paris"}))
            ids.add(tc.id)
        self.assertEqual(len(ids), 2)  # each choice mints its own call ids
        self.assertEqual(r.usage.completion_tokens, 2 * (len(sbm.SCRIPTS["<|call|>"]) + 1))
        self.assertEqual(r.usage.completion_tokens_details.reasoning_tokens, 0)

    def test_logprobs_reasoning(self):
        r = OAI.chat.completions.create(model=NAME, messages=[{"role": "user", "content": "hi"}], logprobs=True,
                                        top_logprobs=2)
        ch = r.choices[0]
        self.assertEqual(ch.message.content, sbm.THINK_ANSWER_TEXT)
        self.assertEqual(ch.message.model_extra["reasoning_content"], sbm.REASONING_TEXT)
        self.assertEqual(ch.finish_reason, "stop")
        # logprobs cover every emitted token, reasoning markers included
        self.assertEqual("".join(t.token for t in ch.logprobs.content), "".join(sbm.SCRIPTS["<|think|>"]))
        self.assertLessEqual(max(len(t.top_logprobs) for t in ch.logprobs.content), 2)
        self.assertEqual(r.usage.completion_tokens_details.reasoning_tokens, REASONING_TOKENS)

    def test_stream_n2_logprobs_forced(self):
        chunks = list(OAI.chat.completions.create(model=NAME, messages=[USER], tools=[WEATHER], n=2, logprobs=True,
                                                  tool_choice=NAMED, stream=True,
                                                  stream_options={"include_usage": True}))
        for i in range(2):
            mine = [c.choices[0] for c in chunks if c.choices and c.choices[0].index == i]
            self.assertEqual(mine[0].delta.role, "assistant")
            calls = [tc for c in mine for tc in (c.delta.tool_calls or [])]
            self.assertEqual(calls[0].function.name, "get_weather")
            self.assertEqual(json.loads("".join(tc.function.arguments or "" for tc in calls)), {"city": "Paris"})
            self.assertEqual("".join(c.delta.content or "" for c in mine), "")
            self.assertEqual(mine[-1].finish_reason, "tool_calls")
            toks = [t.token for c in mine if c.logprobs for t in c.logprobs.content]
            self.assertEqual(toks[:len(FORCED_TOKENS)], FORCED_TOKENS)
            self.assertFalse("".join(toks[len(FORCED_TOKENS):]).strip())  # then whitespace at most
        self.assertGreaterEqual(chunks[-1].usage.completion_tokens, 2 * (len(FORCED_TOKENS) + 1))
        self.assertEqual(chunks[-1].usage.completion_tokens_details.reasoning_tokens, 0)

    def test_stream_n2_reasoning(self):
        chunks = list(OAI.chat.completions.create(model=NAME, messages=[{"role": "user", "content": "hi"}], n=2,
                                                  stream=True, stream_options={"include_usage": True}))
        for i in range(2):
            deltas = [c.choices[0].delta for c in chunks if c.choices and c.choices[0].index == i]
            self.assertEqual("".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas),
                             sbm.REASONING_TEXT)
            self.assertEqual("".join(d.content or "" for d in deltas), sbm.THINK_ANSWER_TEXT)
        self.assertEqual(chunks[-1].usage.completion_tokens_details.reasoning_tokens, 2 * REASONING_TOKENS)


class TestParserFlag(unittest.TestCase):
    def test_override_plain(self):
        # --tool-call-parser plain: the same model output is plain content, no tool calls
        srv = Server("--tool-call-parser", "plain", model=os.path.join(TMP.name, NAME + ".gguf"), ctx=2048)
        try:
            self.assertIn("output parser: plain\n", srv.log_text())
            c = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0)
            r = c.chat.completions.create(model=NAME, messages=[USER], tools=[WEATHER])
            self.assertIsNone(r.choices[0].message.tool_calls)
            self.assertEqual(r.choices[0].finish_reason, "stop")
            self.assertEqual(r.choices[0].message.content, "".join(sbm.SCRIPTS["<|call|>"]))
            # a forced call cannot be enforced without a tool-call syntax: 400 naming the flag
            for choice in ("required", NAMED):
                with self.assertRaises(openai.BadRequestError) as cm:
                    c.chat.completions.create(model=NAME, messages=[USER], tools=[WEATHER], tool_choice=choice)
                self.assertIn("--tool-call-parser", str(cm.exception))
                self.assertIn("unknown", str(cm.exception))
            a = anthropic.Anthropic(base_url=srv.url, api_key="x", max_retries=0)
            with self.assertRaises(anthropic.BadRequestError) as cm:
                a.messages.create(model=NAME, max_tokens=64, messages=[USER], tools=[ANT_TOOL],
                                  tool_choice={"type": "any"})
            self.assertIn("--tool-call-parser", str(cm.exception))
        finally:
            self.assertEqual(srv.stop(), 0)

    def test_forced_llama3(self):
        # the Llama 3 JSON format: no opener, the grammar is the whole {"name": "get_weather",
        # "parameters": {...}} object; the script knows no Llama 3 syntax, so the grammar writes the
        # call: the name is a constant, and the city an enum of one value here
        srv = Server("--tool-call-parser", "llama3", model=os.path.join(TMP.name, NAME + ".gguf"), ctx=2048)
        only_paris = {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"enum": ["Paris"]}}, "required": ["city"],
            "additionalProperties": False}}}
        try:
            c = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0)
            r = c.chat.completions.create(model=NAME, messages=[USER], tools=[only_paris], tool_choice=NAMED,
                                          max_tokens=400)
            self.assertEqual(r.choices[0].finish_reason, "tool_calls")
            tc = r.choices[0].message.tool_calls[0]
            self.assertEqual((tc.function.name, json.loads(tc.function.arguments)), ("get_weather", {"city": "Paris"}))
        finally:
            self.assertEqual(srv.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
