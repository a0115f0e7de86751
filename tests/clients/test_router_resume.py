"""test_router_resume.py - mid-stream resume through `cinfer router` (docs/router.md "Faults"):
two real `cinfer serve` workers on loopback serve a random-weight model slow enough (about 10 ms a
token here) that a 150-token stream is still running when the test SIGKILLs the worker serving it,
after the client (the official openai / anthropic SDK) got its first chunks. The router resumes the
stream on the other worker with cinfer.resume; the client's assembled greedy text, finish and usage
must equal an uninterrupted direct run, with the API's framing continued (one message_start and no
repeated content block index for Messages, consecutive sequence numbers for Responses, one role
chunk for Chat). Also: a resume request with bad ids is a 400 (the worker validates untrusted
input); PD mode (TestResumePD): a killed decode worker's stream resumes on the other decode
worker from the shared store; and (TestSeams, no timing) the worker side cut after every resume mark of a stream with a
tool call, with reasoning, and with a stop string gives back exactly the uninterrupted stream.
Run by tests/integration/router_resume.sh.
"""
import json
import os
import signal
import subprocess
import tempfile
import unittest

import http.client

import anthropic
import openai

import scripted_bigram_model as sbm
from cinfer_router import Router
from cinfer_server import BIN, MODEL, Server

TMP = None
SLOW = None
NAME = "slow"
N = 150  # tokens per stream
KILL_AFTER = 4  # chunks the client reads before the kill
HELLO = [{"role": "user", "content": "hello"}]


def setUpModule():
    global TMP, SLOW
    TMP = tempfile.TemporaryDirectory()
    SLOW = os.path.join(TMP.name, NAME + ".gguf")
    subprocess.run([BIN, "mkmodel", "--arch", "llama", "--dim", "1024", "--layers", "8", "--heads", "16",
                    "--kv-heads", "16", "--ffn", "2816", "--vocab-from", MODEL, "--dtype", "q8_0", "--seed", "1",
                    SLOW], check=True, stdout=subprocess.DEVNULL)


def tearDownModule():
    TMP.cleanup()


def oai(url):
    return openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=60)


def ant(url):
    return anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, timeout=60)


class TestResume(unittest.TestCase):
    def setUp(self):
        self.w = [Server(model=SLOW, ctx=512), Server(model=SLOW, ctx=512)]
        self.router = Router([w.url for w in self.w], "--policy", "rr")
        self.killed = None

    def tearDown(self):
        self.assertEqual(self.router.stop(), 0, self.router.log_text()[-3000:])
        for w in self.w:
            if w.proc.poll() is None:
                self.assertEqual(w.stop(), 0)

    def kill_serving(self):
        """SIGKILLs the worker the router has the stream on."""
        busy = [w["url"] for w in self.router.workers() if w["inflight"] > 0]
        self.assertEqual(len(busy), 1)
        self.killed = next(w for w in self.w if w.url == busy[0])
        self.killed.stop(signal.SIGKILL)

    def check_resumed(self):
        m = self.router.metrics()
        self.assertEqual(m["cinfer_router_resumes_total"], 1, self.router.log_text()[-3000:])
        self.assertIsNotNone(self.killed)

    def run_both(self, fn):
        """fn(base_url, kill) -> result: directly on a worker (never killed), then through the
        router with the serving worker killed after KILL_AFTER chunks."""
        direct = fn(self.w[0].url, lambda: None)
        count = [0]

        def kill():
            count[0] += 1
            if count[0] == KILL_AFTER:
                self.kill_serving()
        routed = fn(self.router.url, kill)
        self.check_resumed()
        return direct, routed

    def test_chat_stream(self):
        def run(url, kill):
            text, roles, finish, usage, ids = "", 0, None, None, set()
            for c in oai(url).chat.completions.create(model=NAME, messages=HELLO, max_tokens=N, temperature=0,
                                                      stream=True, stream_options={"include_usage": True}):
                usage = c.usage or usage
                ids.add(c.id)
                for ch in c.choices:
                    roles += 1 if ch.delta.role else 0
                    text += ch.delta.content or ""
                    finish = ch.finish_reason or finish
                    if ch.delta.content:
                        kill()
            return text, roles, finish, usage.model_dump(), len(ids)
        a, b = self.run_both(run)
        self.assertEqual(a, b)
        self.assertEqual(b[3]["completion_tokens"], N)

    def test_completions_stream(self):
        def run(url, kill):
            text, finish, usage = "", None, None
            for c in oai(url).completions.create(model=NAME, prompt="Once upon a time", max_tokens=N, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}):
                usage = c.usage or usage
                for ch in c.choices:
                    text += ch.text
                    finish = ch.finish_reason or finish
                    kill()
            return text, finish, usage.model_dump()
        a, b = self.run_both(run)
        self.assertEqual(a, b)

    def test_messages_stream(self):
        def run(url, kill):
            starts, blocks, text = 0, [], ""
            with ant(url).messages.stream(model=NAME, max_tokens=N, temperature=0, messages=HELLO) as s:
                for ev in s:
                    starts += ev.type == "message_start"
                    if ev.type == "content_block_start":
                        blocks.append(ev.index)
                    if ev.type == "content_block_delta" and ev.delta.type == "text_delta":
                        text += ev.delta.text
                        kill()
                final = s.get_final_message()
            return starts, blocks, text, final.content[0].text, final.stop_reason, final.usage.output_tokens
        a, b = self.run_both(run)
        self.assertEqual(a, b)
        self.assertEqual(b[0], 1)
        self.assertEqual(b[2], b[3])

    def test_responses_stream(self):
        def run(url, kill):
            seqs, text, final, items, created = [], "", None, 0, 0
            for ev in oai(url).responses.create(model=NAME, input="hello", max_output_tokens=N, temperature=0,
                                                stream=True):
                seqs.append(ev.sequence_number)
                created += ev.type == "response.created"
                items += ev.type == "response.output_item.added"
                if ev.type == "response.output_text.delta":
                    text += ev.delta
                    kill()
                if ev.type in ("response.completed", "response.incomplete"):
                    final = ev.response
            self.assertEqual(seqs, list(range(len(seqs))))
            stored = oai(url).responses.retrieve(final.id)  # the resuming worker stored the whole output
            self.assertEqual(stored.output_text, final.output_text)
            return text, final.output_text, items, created, final.usage.output_tokens, final.status
        a, b = self.run_both(run)
        self.assertEqual(a, b)
        self.assertEqual(b[0], b[1])
        self.assertEqual(b[3], 1)

    def test_resumed_twice(self):
        """The resuming worker marks its stream too: kill it as well, a third worker finishes."""
        third = Server(model=SLOW, ctx=512)
        self.w.append(third)
        r = Router([w.url for w in self.w], "--policy", "rr")
        try:
            def run(url, kill_at):
                text, n = "", 0
                for c in oai(url).chat.completions.create(model=NAME, messages=HELLO, max_tokens=N, temperature=0,
                                                          stream=True):
                    for ch in c.choices:
                        text += ch.delta.content or ""
                        n += 1 if ch.delta.content else 0
                        if n in kill_at:
                            busy = [w["url"] for w in r.workers() if w["inflight"] > 0]
                            self.assertEqual(len(busy), 1)
                            next(w for w in self.w if w.url == busy[0]).stop(signal.SIGKILL)
                return text
            direct = run(third.url, ())
            self.assertEqual(run(r.url, (KILL_AFTER, 3 * KILL_AFTER)), direct)
            self.assertEqual(r.metrics()["cinfer_router_resumes_total"], 2, r.log_text()[-3000:])
        finally:
            self.assertEqual(r.stop(), 0)

    def test_non_stream_killed_mid_generation_is_retried_whole(self):
        """A non-streamed request whose worker dies while it runs (a 150-token answer takes ~1.5 s)
        is sent again whole to the other worker: the client sees one normal answer."""
        import threading
        body = dict(model=NAME, messages=HELLO, max_tokens=N, temperature=0)
        direct = oai(self.w[0].url).chat.completions.create(**body)
        killer = threading.Thread(target=lambda: (self.router.wait_workers(
            lambda ws: any(w["inflight"] > 0 for w in ws)), self.kill_serving()))
        killer.start()
        routed = oai(self.router.url).chat.completions.create(**body)
        killer.join()
        self.assertEqual(routed.choices[0].message.content, direct.choices[0].message.content)
        self.assertEqual(routed.usage.completion_tokens, direct.usage.completion_tokens)
        self.assertGreaterEqual(self.router.metrics()["cinfer_router_retries_total"], 1)

    def test_bad_resume_ids_are_400(self):
        body = {"model": NAME, "messages": HELLO, "max_tokens": 8, "stream": True}
        for resume, param in (({"tokens": [1, 99999], "text_bytes": 0}, "cinfer.resume.tokens"),
                              ({"tokens": [-1], "text_bytes": 0}, "cinfer.resume.tokens"),
                              ({"tokens": ["a"], "text_bytes": 0}, "cinfer.resume.tokens"),
                              ({"tokens": [5], "text_bytes": 1 << 20}, "cinfer.resume.text_bytes"),
                              ({"tokens": [5]}, "cinfer.resume.text_bytes"),
                              ({"tokens": [5], "text_bytes": 0, "id": "x\"y"}, "cinfer.resume.id"),
                              ("nope", "cinfer.resume")):
            for target in (self.w[0], self.router):
                st, _, raw = target.http("POST", "/v1/chat/completions", dict(body, cinfer={"resume": resume}))
                self.assertEqual(st, 400, raw)
                self.assertEqual(json.loads(raw)["error"]["param"], param)
        st, _, raw = self.w[0].http("POST", "/v1/chat/completions",
                                 dict(body, stream=False, cinfer={"resume": {"tokens": [5], "text_bytes": 0}}))
        self.assertEqual(st, 400, raw)


class TestResumePD(unittest.TestCase):
    """PD mode: router + a prefill worker + two decode workers sharing one KV store directory. The
    decode worker serving a stream is SIGKILLed after 4 chunks; the other decode worker resumes it,
    loading the prompt's blocks from the store (the prefill worker wrote them): same greedy text and
    usage as a monolithic run, and the resume's prompt was mostly cached."""

    def test_decode_worker_killed(self):
        store = tempfile.mkdtemp(prefix="cinfer-resume-pd-")
        mono = Server(model=SLOW, ctx=512)
        p = Server("--role", "prefill", "--kv-store", store, model=SLOW, ctx=512)
        ds = [Server("--role", "decode", "--kv-store", store, model=SLOW, ctx=512) for _ in range(2)]
        r = Router([p.url + "@prefill"] + [d.url + "@decode" for d in ds])
        try:
            msgs = [{"role": "user", "content": " ".join("word%d" % i for i in range(60))}]

            def run(url, kill):
                text, n, usage = "", 0, None
                for c in oai(url).chat.completions.create(model=NAME, messages=msgs, max_tokens=N, temperature=0,
                                                          stream=True, stream_options={"include_usage": True}):
                    usage = c.usage or usage
                    for ch in c.choices:
                        text += ch.delta.content or ""
                        n += 1 if ch.delta.content else 0
                        if kill and n == KILL_AFTER:
                            busy = [w["url"] for w in r.workers() if w["inflight"] > 0]
                            self.assertEqual(len(busy), 1)
                            next(d for d in ds if d.url == busy[0]).stop(signal.SIGKILL)
                return text, usage.model_dump()
            direct = run(mono.url, False)
            routed = run(r.url, True)
            self.assertEqual(routed[0], direct[0])
            self.assertEqual(routed[1]["completion_tokens"], direct[1]["completion_tokens"])
            self.assertEqual(routed[1]["prompt_tokens"], direct[1]["prompt_tokens"])
            self.assertGreater(routed[1]["prompt_tokens_details"]["cached_tokens"], 0)  # from the store
            self.assertEqual(r.metrics()["cinfer_router_resumes_total"], 1, r.log_text()[-3000:])
        finally:
            self.assertEqual(r.stop(), 0)
            for s in [mono, p] + ds:
                if s.proc.poll() is None:
                    self.assertEqual(s.stop(), 0)
            import shutil
            shutil.rmtree(store, ignore_errors=True)


def sse(server, path, body):
    """Raw SSE events (comments included) of a stream asked with X-Cinfer-Stream-Ids."""
    conn = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]), timeout=60)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json", "X-Cinfer-Stream-Ids": "1"})
    resp = conn.getresponse()
    raw = resp.read().decode()
    conn.close()
    assert resp.status == 200, raw
    return [e + "\n\n" for e in raw.split("\n\n") if e]


def assemble_chat(events):
    """What a Chat client builds from data events: roles, text, reasoning, calls, finish, usage."""
    roles, text, reasoning, calls, finish, usage = 0, "", "", {}, None, None
    for e in events:
        if not e.startswith("data: {"):
            continue
        c = json.loads(e[6:])
        usage = c.get("usage") or usage
        for ch in c["choices"]:
            d = ch.get("delta", {})
            roles += "role" in d
            text += d.get("content") or ""
            reasoning += d.get("reasoning_content") or ""
            for tc in d.get("tool_calls") or []:
                name, args = calls.get(tc["index"], ("", ""))
                f = tc.get("function", {})
                calls[tc["index"]] = (name + (f.get("name") or ""), args + (f.get("arguments") or ""))
            finish = ch.get("finish_reason") or finish
    if usage:  # a resume's prompt hits the prefix cache: cached tokens differ, nothing else may
        usage = {k: v for k, v in usage.items() if k != "prompt_tokens_details"}
    return roles, text, reasoning, calls, finish, usage


def data_events(events):
    return [json.loads(e.split("data: ", 1)[1]) for e in events if "data: {" in e]


def assemble_messages(events):
    """Messages: one message_start, blocks (index, type, tool id/name) with their text / JSON, stop, usage."""
    starts, blocks, stop, out_tokens = 0, {}, None, None
    for d in data_events(events):
        t = d["type"]
        starts += t == "message_start"
        if t == "content_block_start":
            assert d["index"] not in blocks, "block index %d repeated" % d["index"]
            cb = d["content_block"]
            blocks[d["index"]] = [cb["type"], cb.get("id"), cb.get("name"), ""]
        if t == "content_block_delta":
            dl = d["delta"]
            blocks[d["index"]][3] += dl.get("text") or dl.get("partial_json") or dl.get("thinking") or ""
        if t == "message_delta":
            stop, out_tokens = d["delta"].get("stop_reason"), d["usage"].get("output_tokens")
    return starts, blocks, stop, out_tokens


def assemble_responses(events):
    """Responses: the items added (with ids and call ids), deltas, and the final object's output and usage."""
    items, deltas, final = [], "", None
    for d in data_events(events):
        if d["type"] == "response.output_item.added":
            it = d["item"]
            items.append((d["output_index"], it["type"], it.get("id"), it.get("call_id"), it.get("name")))
        if d["type"] in ("response.output_text.delta", "response.function_call_arguments.delta"):
            deltas += d["delta"]
        if d["type"] in ("response.completed", "response.incomplete"):
            final = d["response"]
    usage = {k: v for k, v in final["usage"].items() if k != "input_tokens_details"}
    return items, deltas, final["output"], usage


class TestSeams(unittest.TestCase):
    """The worker side at every possible cut: the client got the events before the k-th resume mark,
    a resume request with the ids and text bytes of marks 0..k-1 gives the rest; together they must
    be the uninterrupted stream (tool-call and reasoning parsing, stop strings, usage). No timing:
    each cut is replayed exactly."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.scripted = Server(model=sbm.write(os.path.join(cls.tmp.name, "scripted.gguf")), ctx=2048)
        cls.story = Server(ctx=512)

    @classmethod
    def tearDownClass(cls):
        assert cls.scripted.stop() == 0
        assert cls.story.stop() == 0
        cls.tmp.cleanup()

    def every_cut(self, server, body, assemble, path="/v1/chat/completions"):
        # a mark follows each delivery of tokens, and tokens the engine made while the server was busy
        # arrive together: on a loaded machine a short answer may come in few deliveries, so fetch
        # again (up to 5 times) for a stream with several cuts; at least one cut is required
        for _ in range(5):
            full = sse(server, path, body)
            marks = [i for i, e in enumerate(full) if e.startswith(": cinfer ")]
            if len(marks) > 3:
                break
        want = assemble(full)
        self.assertGreater(len(marks), 1)
        ids, n_cuts = [], 0
        for k, at in enumerate(marks[:-1]):
            m = json.loads(full[at][len(": cinfer "):])
            ids = ids[:m["n"]] + m["t"]
            resume = {"tokens": ids, "text_bytes": m["b"], "id": m["id"], "created": m["created"]}
            rest = sse(server, path, dict(body, cinfer={"resume": resume}))
            got = assemble(full[:at] + rest)
            self.assertEqual(got, want, "cut after mark %d" % k)
            if path == "/v1/chat/completions":
                self.assertTrue(all(json.loads(e[6:])["id"] == m["id"] for e in rest if e.startswith("data: {")))
            n_cuts += 1
        return want, n_cuts

    def test_tool_call_and_reasoning_seams(self):
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
        body = {"model": "scripted", "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
                "tools": tools, "stream": True, "stream_options": {"include_usage": True}, "max_tokens": 200}
        want, cuts = self.every_cut(self.scripted, body, assemble_chat)
        self.assertTrue(want[3], want)  # a tool call was streamed
        self.assertEqual(want[4], "tool_calls")
        body = {"model": "scripted", "messages": [{"role": "user", "content": "hello"}], "stream": True,
                "stream_options": {"include_usage": True}, "max_tokens": 200}
        want, _ = self.every_cut(self.scripted, body, assemble_chat)
        self.assertTrue(want[2], want)  # reasoning then an answer

    def test_messages_and_responses_tool_call_seams(self):
        tool = {"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                                                        "required": ["city"]}}
        q = [{"role": "user", "content": "What is the weather in Paris?"}]
        want, _ = self.every_cut(self.scripted, {"model": "scripted", "messages": q, "tools": [tool],
                                                 "max_tokens": 200, "stream": True}, assemble_messages, "/v1/messages")
        self.assertEqual(want[0], 1)
        self.assertEqual(want[2], "tool_use")
        rtool = {"type": "function", "name": "get_weather", "parameters": tool["input_schema"]}
        want, _ = self.every_cut(self.scripted, {"model": "scripted", "input": q, "tools": [rtool],
                                                 "max_output_tokens": 200, "stream": True}, assemble_responses,
                                 "/v1/responses")
        self.assertTrue(any(i[1] == "function_call" for i in want[0]), want)

    def test_stop_string_seams(self):
        body = {"model": "stories260K", "messages": [{"role": "user", "content": "Once upon a time"}],
                "stream": True, "stream_options": {"include_usage": True}, "max_tokens": 40, "temperature": 0}
        free = assemble_chat(sse(self.story, "/v1/chat/completions", body))
        words = free[1].split(" ")
        self.assertGreater(len(words), 8)
        stop = " " + words[7]  # a stop string well inside the text
        want, _ = self.every_cut(self.story, dict(body, stop=[stop]), assemble_chat)
        self.assertEqual(want[4], "stop")
        self.assertFalse(want[1].endswith(stop))


if __name__ == "__main__":
    unittest.main()
