"""test_structured.py - structured outputs through all three chat APIs of `cinfer serve` with the
official SDKs (docs/serve.md "Structured outputs"): Chat response_format json_schema, Responses
text.format, Anthropic output_config.format and forced tools (tool_choice tool / any), strict tools
with tool_choice required / named (Chat, Responses), vLLM's guided_* and structured_outputs through
extra_body.

The model is tiny-llama (random weights, a real 32k SentencePiece vocabulary) with the Hermes tool-call
parser: its free output is noise, so every valid JSON document it writes is the grammar's doing.
Schemas bound every string, number and array so that sampled documents end; each output is validated
with Python's `jsonschema`. Checked:
  - a few hundred documents sampled at temperature 1 across the APIs: 100% valid, all finished by
    the grammar (stop / tool_calls / tool_use, never length);
  - greedy streamed == non-streamed;
  - greedy results of constrained and free requests sent concurrently == sent one by one (batch
    invariance);
  - max_tokens cut-offs report length; unsupported schema keywords / bad regexes give a 400 naming
    the field and the keyword, in each API's error shape.
Run by tests/integration/serve_structured.sh."""
import concurrent.futures
import json
import os
import unittest

import anthropic
import jsonschema
import openai

import fixtures
from cinfer_server import SHARED, Server

MODEL = os.path.join(SHARED, "models", "tiny", "tiny-llama.gguf")
fixtures.require(MODEL, "model")
NAME = "tiny-llama"
SRV = OAI = ANT = None

PERSON = {"type": "object", "additionalProperties": False,
          "required": ["name", "age", "role", "tags", "active"],
          "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 6},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120},
                         "role": {"enum": ["admin", "user", "guest"]},
                         "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 3},
                         "active": {"type": "boolean"}}}
WEATHER_ARGS = {"type": "object", "additionalProperties": False, "required": ["city", "unit"],
                "properties": {"city": {"type": "string", "maxLength": 8}, "unit": {"enum": ["c", "f"]}}}
TIME_ARGS = {"type": "object", "additionalProperties": False, "required": ["zone"],
             "properties": {"zone": {"type": "string", "pattern": "^[A-Z]{3}$"}}}
CHAT_TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_ARGS, "strict": True}},
              {"type": "function", "function": {"name": "get_time", "parameters": TIME_ARGS, "strict": True}}]
RESP_TOOLS = [{"type": "function", "name": t["function"]["name"], "parameters": t["function"]["parameters"],
               "strict": True} for t in CHAT_TOOLS]
ANT_TOOLS = [{"name": t["function"]["name"], "input_schema": t["function"]["parameters"]} for t in CHAT_TOOLS]
ARGS = {"get_weather": WEATHER_ARGS, "get_time": TIME_ARGS}
USER = [{"role": "user", "content": "Describe a person as JSON."}]
FMT = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
N_SAMPLES = {"total": 0}


def setUpModule():
    global SRV, OAI, ANT
    SRV = Server("--tool-call-parser", "hermes", "--max-seqs", "16", model=MODEL, ctx=1024)
    OAI = openai.OpenAI(base_url=SRV.url + "/v1", api_key="x", max_retries=0, timeout=120)
    ANT = anthropic.Anthropic(base_url=SRV.url, api_key="x", max_retries=0, timeout=120)


def tearDownModule():
    rc = SRV.stop()
    assert rc == 0, "server exit code %r\n%s" % (rc, SRV.log_text()[-3000:])


def pmap(fn, items):
    """fn over items from 8 client threads (the engine batches them), results in order."""
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        return list(ex.map(fn, items))


def valid(test, schema, text):
    """Parses and validates one output; counts it."""
    N_SAMPLES["total"] += 1
    try:
        doc = json.loads(text)
    except ValueError as e:
        test.fail("not JSON (%s): %r" % (e, text))
    jsonschema.validate(doc, schema)
    return doc


class TestSampled(unittest.TestCase):
    """Temperature 1, many seeds: every document valid, every output ended by the grammar."""

    def test_chat_response_format(self):
        for r in pmap(lambda seed: OAI.chat.completions.create(model=NAME, messages=USER, response_format=FMT, n=8,
                                                               temperature=1, seed=seed, max_tokens=400), range(12)):
            for ch in r.choices:
                self.assertEqual(ch.finish_reason, "stop", ch.message.content)
                valid(self, PERSON, ch.message.content)

    def test_chat_guided_extra_body(self):
        cases = [({"guided_json": PERSON}, PERSON),
                 ({"structured_outputs": {"json": WEATHER_ARGS}}, WEATHER_ARGS),
                 ({"guided_json": json.dumps(TIME_ARGS)}, TIME_ARGS)]
        for extra, schema in cases:
            r = OAI.chat.completions.create(model=NAME, messages=USER, n=8, temperature=1, seed=7, max_tokens=400,
                                            extra_body=extra)
            for ch in r.choices:
                self.assertEqual(ch.finish_reason, "stop")
                valid(self, schema, ch.message.content)
        r = OAI.chat.completions.create(model=NAME, messages=USER, n=8, temperature=1, max_tokens=64,
                                        extra_body={"guided_choice": ["red", "green", "blue"]})
        self.assertTrue(all(ch.message.content in ("red", "green", "blue") for ch in r.choices))
        r = OAI.chat.completions.create(model=NAME, messages=USER, n=8, temperature=1, max_tokens=64,
                                        extra_body={"structured_outputs": {"regex": "[0-9]{3}-[a-z]{2,4}"}})
        for ch in r.choices:
            self.assertRegex(ch.message.content, r"^[0-9]{3}-[a-z]{2,4}$")
        r = OAI.chat.completions.create(model=NAME, messages=USER, n=4, temperature=1, max_tokens=64,
                                        extra_body={"guided_grammar": 'root ::= "go " dir\ndir ::= "north" | "south"'})
        for ch in r.choices:
            self.assertIn(ch.message.content, ("go north", "go south"))
        r = OAI.completions.create(model=NAME, prompt="Answer:", n=4, temperature=1, max_tokens=400,
                                   extra_body={"guided_json": WEATHER_ARGS})
        for ch in r.choices:
            valid(self, WEATHER_ARGS, ch.text)

    def test_responses_text_format(self):
        fmt = {"format": {"type": "json_schema", "name": "person", "schema": PERSON, "strict": True}}
        for r in pmap(lambda seed: OAI.responses.create(model=NAME, input="Describe a person.", text=fmt,
                                                        temperature=1, max_output_tokens=400,
                                                        extra_body={"seed": seed}), range(24)):
            self.assertEqual(r.status, "completed")
            valid(self, PERSON, r.output_text)

    def test_chat_strict_tools_forced(self):
        for r in pmap(lambda seed: OAI.chat.completions.create(  # required: either tool, its arguments valid
                model=NAME, messages=USER, tools=CHAT_TOOLS, tool_choice="required", n=8, temperature=1, seed=seed,
                max_tokens=400), range(6)):
            for ch in r.choices:
                self.assertEqual(ch.finish_reason, "tool_calls")
                tc = ch.message.tool_calls[0]
                self.assertIn(tc.function.name, ARGS)
                valid(self, ARGS[tc.function.name], tc.function.arguments)
        named = {"type": "function", "function": {"name": "get_time"}}
        for r in pmap(lambda seed: OAI.chat.completions.create(model=NAME, messages=USER, tools=CHAT_TOOLS,
                                                               tool_choice=named, n=8, temperature=1, seed=seed,
                                                               max_tokens=400), range(3)):
            for ch in r.choices:
                tc = ch.message.tool_calls[0]
                self.assertEqual(tc.function.name, "get_time")
                valid(self, TIME_ARGS, tc.function.arguments)

    def test_responses_tools_forced(self):
        for r in pmap(lambda seed: OAI.responses.create(model=NAME, input="What time is it?", tools=RESP_TOOLS,
                                                        tool_choice="required", temperature=1,
                                                        max_output_tokens=400, extra_body={"seed": seed}),
                      range(12)):
            calls = [o for o in r.output if o.type == "function_call"]
            self.assertEqual(len(calls), 1, r.output)
            valid(self, ARGS[calls[0].name], calls[0].arguments)

    def test_messages_forced_tool_and_format(self):
        def forced(seed):
            choice = {"type": "tool", "name": "get_weather"} if seed % 2 else {"type": "any"}
            return ANT.messages.create(model=NAME, max_tokens=400, messages=USER, tools=ANT_TOOLS,
                                       tool_choice=choice, temperature=1, extra_body={"seed": seed})

        for seed, m in enumerate(pmap(forced, range(12))):
            self.assertEqual(m.stop_reason, "tool_use")
            tu = [b for b in m.content if b.type == "tool_use"][0]
            if seed % 2:
                self.assertEqual(tu.name, "get_weather")
            N_SAMPLES["total"] += 1
            jsonschema.validate(tu.input, ARGS[tu.name])
        for m in pmap(lambda seed: ANT.messages.create(  # JSON output through output_config.format
                model=NAME, max_tokens=400, messages=USER, temperature=1,
                extra_body={"seed": seed, "output_config": {"format": {"type": "json_schema", "schema": PERSON}}}),
                range(8)):
            self.assertEqual(m.stop_reason, "end_turn")
            valid(self, PERSON, m.content[0].text)

    @classmethod
    def tearDownClass(cls):
        print("structured outputs validated: %d" % N_SAMPLES["total"])


class TestGreedy(unittest.TestCase):
    def test_stream_equals_body(self):
        body = OAI.chat.completions.create(model=NAME, messages=USER, response_format=FMT, temperature=0,
                                           max_tokens=400)
        chunks = list(OAI.chat.completions.create(model=NAME, messages=USER, response_format=FMT, temperature=0,
                                                  max_tokens=400, stream=True))
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        self.assertEqual(streamed, body.choices[0].message.content)
        valid(self, PERSON, streamed)
        kw = dict(model=NAME, messages=USER, tools=CHAT_TOOLS, tool_choice="required", temperature=0, max_tokens=400)
        body = OAI.chat.completions.create(**kw).choices[0].message.tool_calls[0]
        chunks = list(OAI.chat.completions.create(stream=True, **kw))
        calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
        self.assertEqual(calls[0].function.name, body.function.name)
        self.assertEqual("".join(tc.function.arguments or "" for tc in calls), body.function.arguments)
        with ANT.messages.stream(model=NAME, max_tokens=400, messages=USER, tools=ANT_TOOLS,
                                 tool_choice={"type": "tool", "name": "get_time"}, temperature=0) as s:
            final = s.get_final_message()
        m = ANT.messages.create(model=NAME, max_tokens=400, messages=USER, tools=ANT_TOOLS,
                                tool_choice={"type": "tool", "name": "get_time"}, temperature=0)
        self.assertEqual(final.content[-1].input, m.content[-1].input)

    def test_batch_invariance(self):
        reqs = []
        for i in range(8):
            kw = dict(model=NAME, messages=[{"role": "user", "content": "request %d" % i}], temperature=0,
                      max_tokens=120)
            if i % 2:
                kw["response_format"] = FMT
            reqs.append(kw)
        solo = [OAI.chat.completions.create(**kw).choices[0].message.content for kw in reqs]
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            batched = list(ex.map(lambda kw: OAI.chat.completions.create(**kw).choices[0].message.content, reqs))
        self.assertEqual(solo, batched)
        for i in range(1, 8, 2):
            valid(self, PERSON, solo[i])

    def test_length_cutoff(self):
        r = OAI.chat.completions.create(model=NAME, messages=USER, response_format=FMT, temperature=0, max_tokens=3)
        self.assertEqual(r.choices[0].finish_reason, "length")
        m = ANT.messages.create(model=NAME, max_tokens=3, messages=USER, temperature=0,
                                extra_body={"output_config": {"format": {"type": "json_schema", "schema": PERSON}}})
        self.assertEqual(m.stop_reason, "max_tokens")


class TestErrors(unittest.TestCase):
    BAD = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}

    def test_unsupported_keyword(self):
        with self.assertRaises(openai.BadRequestError) as c:
            OAI.chat.completions.create(model=NAME, messages=USER, response_format={
                "type": "json_schema", "json_schema": {"name": "x", "schema": self.BAD}})
        err = c.exception.body
        self.assertEqual(err["param"], "response_format.json_schema.schema")
        self.assertIn("uniqueItems", err["message"])
        with self.assertRaises(openai.BadRequestError) as c:
            OAI.responses.create(model=NAME, input="x", text={"format": {"type": "json_schema", "name": "x",
                                                                         "schema": self.BAD}})
        self.assertIn("uniqueItems", c.exception.body["message"])
        with self.assertRaises(anthropic.BadRequestError) as c:
            ANT.messages.create(model=NAME, max_tokens=10, messages=USER,
                                tools=[{"name": "f", "input_schema": self.BAD}], tool_choice={"type": "any"})
        self.assertEqual(c.exception.body["type"], "error")
        self.assertIn("uniqueItems", c.exception.body["error"]["message"])
        with self.assertRaises(openai.BadRequestError) as c:
            OAI.chat.completions.create(model=NAME, messages=USER, extra_body={"guided_regex": "(ab"})
        self.assertEqual(c.exception.body["param"], "guided_regex")
        with self.assertRaises(openai.BadRequestError) as c:
            OAI.chat.completions.create(model=NAME, messages=USER, response_format={"type": "json_object"},
                                        extra_body={"guided_regex": "a+"})
        self.assertEqual(c.exception.body["param"], "guided_regex")


if __name__ == "__main__":
    unittest.main()
