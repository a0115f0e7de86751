"""Tests of the cinfer_recipe Python extension (python/cinfer_recipe.c): request and
response conversion (dict and str in/out) against the golden corpus in tests/data/recipe,
error shapes, the streaming OutputParser (whole vs one character at a time), the
StreamEncoder's SSE output, and parser detection. Run by tests/integration/recipe_python.sh."""
import json
import os
import unittest

import cinfer_recipe as r

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "recipe")
APIS = ["chat", "messages", "responses"]


def load(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return json.load(f)


class Conversion(unittest.TestCase):
    def test_golden_requests(self):
        for f in sorted(os.listdir(DATA)):
            if not f.startswith("req_") or ".expect." in f:
                continue
            case, want = load(f), load(f.replace(".json", ".expect.json"))
            for api in APIS:
                got = r.convert_request(case["input"], case["api"], api)
                self.assertEqual(got, want[api], f"{f} -> {api}")
                text = r.convert_request(json.dumps(case["input"]), case["api"], api)
                self.assertIsInstance(text, str)
                self.assertEqual(json.loads(text), want[api])

    def test_golden_responses(self):
        for f in sorted(os.listdir(DATA)):
            if not f.startswith("resp_") or ".expect." in f:
                continue
            case, want = load(f), load(f.replace(".json", ".expect.json"))
            for api in APIS:
                self.assertEqual(r.convert_response(case["input"], case["api"], api), want[api], f"{f} -> {api}")

    def test_canonical(self):
        c = r.parse_request(load("req_chat_full.json")["input"], "chat")
        self.assertEqual(c["cache_salt"], "tenant-7")
        self.assertEqual(c["traffic_class"], "batch")
        self.assertEqual(c["max_tokens"], 512)
        self.assertEqual([m["role"] for m in c["messages"]][:3], ["system", "developer", "user"])

    def test_response_echo(self):
        req = {"model": "m", "input": "hi", "instructions": "be nice", "temperature": 0.5}
        resp = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
        out = r.convert_response(resp, "chat", "responses", request=req, request_api="responses")
        self.assertEqual(out["status"], "incomplete")
        self.assertEqual(out["incomplete_details"], {"reason": "max_output_tokens"})
        self.assertEqual(out["instructions"], "be nice")
        self.assertEqual(out["temperature"], 0.5)
        self.assertEqual(out["output"][0]["content"][0]["text"], "hello")

    def test_errors(self):
        with self.assertRaises(r.RecipeError) as cm:
            r.convert_request({"model": "m"}, "messages", "chat")
        self.assertEqual(cm.exception.status, 400)
        self.assertEqual(cm.exception.body["type"], "error")
        self.assertEqual(cm.exception.body["error"]["type"], "invalid_request_error")
        with self.assertRaises(r.RecipeError) as cm:
            r.convert_request({"messages": []}, "chat", "messages")
        self.assertEqual(cm.exception.body["error"]["param"], "messages")
        with self.assertRaises(ValueError):
            r.convert_request("{not json", "chat", "messages")
        with self.assertRaises(ValueError):
            r.convert_request({}, "soap", "chat")
        status, body = r.error_body("messages", "overloaded", "busy", request_id="req_1")
        self.assertEqual(status, 529)
        self.assertEqual(body, {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}, "request_id": "req_1"})
        status, body = r.error_body("chat", "context_length", "prompt is too long: 9000 tokens > 4096 maximum")
        self.assertEqual(status, 400)
        self.assertEqual(body["error"]["code"], "context_length_exceeded")


FB, SP = "\uff5c", "\u2581"
R1_OUT = ("Need weather.</think>\n\n<" + FB + "tool" + SP + "calls" + SP + "begin" + FB + "><" + FB + "tool" + SP + "call" + SP
          + "begin" + FB + ">function<" + FB + "tool" + SP + "sep" + FB + ">get_weather\n```json\n{\"city\": \"P\u00e4ris\"}\n```<"
          + FB + "tool" + SP + "call" + SP + "end" + FB + "><" + FB + "tool" + SP + "calls" + SP + "end" + FB + ">")


def aggregate(events):
    out = {"reasoning": "", "text": "", "calls": []}
    for e in events:
        if e["type"] in ("reasoning", "text"):
            out[e["type"]] += e["text"]
        elif e["type"] == "tool_begin":
            out["calls"].append({"id": e["id"], "name": e["name"], "args": ""})
        elif e["type"] == "tool_args":
            out["calls"][e["index"]]["args"] += e["text"]
    return out


class Parser(unittest.TestCase):
    def run_parser(self, kind, text, step, **kw):
        p = r.OutputParser(kind, seed=7, **kw)
        ev = []
        for i in range(0, len(text), step):
            ev += p.feed(text[i:i + step])
        ev += p.finish()
        return aggregate(ev), p.tool_calls

    def test_r1_whole_vs_chars(self):
        whole, n = self.run_parser("deepseek_r1", R1_OUT, len(R1_OUT), in_reasoning=True)
        chars, _ = self.run_parser("deepseek_r1", R1_OUT, 1, in_reasoning=True)
        self.assertEqual(whole, chars)
        self.assertEqual(n, 1)
        self.assertEqual(whole["reasoning"], "Need weather.")
        self.assertEqual(whole["text"], "")
        self.assertEqual(whole["calls"][0]["name"], "get_weather")
        self.assertEqual(json.loads(whole["calls"][0]["args"]), {"city": "P\u00e4ris"})

    def test_bytes_split_utf8(self):
        p = r.OutputParser("plain")
        data = "h\u00e9llo \U0001f999".encode()
        ev = []
        for b in data:
            ev += p.feed(bytes([b]))
        ev += p.finish()
        self.assertEqual(aggregate(ev)["text"], "h\u00e9llo \U0001f999")

    def test_hermes_and_no_tools(self):
        out = '<think>x</think>Sure.\n<tool_call>\n{"name": "f", "arguments": {"a": [1, {"b": "}"}]}}\n</tool_call>'
        agg, n = self.run_parser("hermes", out, 2)
        self.assertEqual((agg["reasoning"], agg["text"], n), ("x", "Sure.", 1))
        self.assertEqual(json.loads(agg["calls"][0]["args"]), {"a": [1, {"b": "}"}]})
        agg, n = self.run_parser("hermes", out, 2, tools=False)
        self.assertEqual(n, 0)
        self.assertTrue(agg["text"].startswith("Sure.\n<tool_call>"))

    def test_detect(self):
        self.assertEqual(r.detect_parser(arch="qwen2"), "hermes")
        self.assertEqual(r.detect_parser("{{ '<tool_call>' }}"), "hermes")
        self.assertEqual(r.detect_parser(), "plain")
        with self.assertRaises(ValueError):
            r.OutputParser("nope")


class Stream(unittest.TestCase):
    def sse(self, text):
        events = []
        for block in text.strip("\n").split("\n\n"):
            ev = {}
            for line in block.split("\n"):
                if line.startswith("event: "):
                    ev["event"] = line[7:]
                elif line.startswith("data: "):
                    ev["data"] = line[6:] if line[6:] == "[DONE]" else json.loads(line[6:])
            events.append(ev)
        return events

    def test_golden_streams(self):
        for f in sorted(os.listdir(DATA)):
            if not f.startswith("stream_") or ".expect." in f:
                continue
            case, want = load(f), load(f.replace(".json", ".expect.json"))
            info = case["info"]
            for api in APIS:
                enc = r.StreamEncoder(api, id=info["id"], model=info["model"], created=info["created"],
                                      prompt_tokens=info.get("prompt_tokens", 0), cache_read=info.get("cache_read", 0),
                                      include_usage=info.get("include_usage", False))
                text = "".join(enc.event(e) for e in case["events"])
                self.assertTrue(enc.done)
                got = [{k: v for k, v in e.items()} for e in self.sse(text)]
                exp = [{k: v for k, v in e.items() if k != "comment"} for e in want[api]]
                self.assertEqual(got, exp, f"{f} -> {api}")

    def test_parser_into_encoder(self):
        p = r.OutputParser("deepseek_r1", in_reasoning=True, seed=3)
        enc = r.StreamEncoder("messages", id="msg_1", model="m", prompt_tokens=10)
        text = ""
        for i in range(0, len(R1_OUT), 5):
            for e in p.feed(R1_OUT[i:i + 5]):
                text += enc.event(e)
        for e in p.finish():
            text += enc.event(e)
        text += enc.event({"type": "finish", "finish": "eos", "usage": {"prompt": 10, "output": 20}})
        names = [e["event"] for e in self.sse(text)]
        self.assertEqual(names[0], "message_start")
        self.assertEqual(names[-2:], ["message_delta", "message_stop"])
        deltas = [e["data"] for e in self.sse(text) if e["event"] == "message_delta"]
        self.assertEqual(deltas[0]["delta"]["stop_reason"], "tool_use")
        args = "".join(e["data"]["delta"]["partial_json"] for e in self.sse(text)
                       if e["event"] == "content_block_delta" and e["data"]["delta"]["type"] == "input_json_delta")
        self.assertEqual(json.loads(args), {"city": "P\u00e4ris"})
        with self.assertRaises(r.RecipeError):
            enc.event({"type": "text", "text": "late"})



class OpenAIExtras(unittest.TestCase):
    """Completions requests, the vLLM extras, and the OpenAI writer with choices and logprobs."""

    def test_completions_and_extras(self):
        c = r.parse_request({"prompt": [1, 2, 3], "logprobs": 2, "min_tokens": 1, "stop_token_ids": [7],
                             "logit_bias": {"5": -1}}, "completions")
        self.assertEqual((c["prompt_ids"], c["top_logprobs"], c["min_tokens"], c["stop_token_ids"]),
                         ([1, 2, 3], 2, 1, [7]))
        with self.assertRaises(r.RecipeError) as e:
            r.parse_request({"prompt": "x", "logit_bias": {"01": 1}}, "completions")
        self.assertEqual(e.exception.param, "logit_bias")
        body = r.convert_request({"messages": [{"role": "user", "content": "x"}], "guided_regex": "a+",
                                  "ignore_eos": True}, "chat", "messages")
        self.assertEqual((body["guided_regex"], body["ignore_eos"]), ("a+", True))

    def test_choices_and_logprobs(self):
        enc = r.StreamEncoder("completions", id="cmpl-1", model="m", created=1, include_usage=True, n_choices=2)
        out = enc.event({"type": "text", "text": "a", "choice": 1,
                         "logprobs": [{"token": b"\xe2\x80", "logprob": -1.0, "top": [{"token": "a", "logprob": -0.5}]}]})
        chunk = json.loads(out[len("data: "):])
        self.assertEqual(chunk["choices"][0]["index"], 1)
        self.assertEqual(chunk["choices"][0]["logprobs"]["tokens"], ["bytes:\\xe2\\x80"])
        enc.event({"type": "finish", "finish": "eos", "choice": 0})
        self.assertFalse(enc.done)
        tail = enc.event({"type": "finish", "finish": "cancelled", "choice": 1, "usage": {"prompt": 2, "output": 3}})
        self.assertIn('"finish_reason":"abort"', tail)
        self.assertTrue(tail.endswith("data: [DONE]\n\n") and enc.done)


if __name__ == "__main__":
    unittest.main()
