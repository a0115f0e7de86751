"""test_router_resume.py - mid-stream resume through `cinfer router` (docs/router.md "Faults"):
two real `cinfer serve` workers on loopback serve a random-weight model slow enough (about 10 ms a
token here) that a 150-token stream is still running when the test SIGKILLs the worker serving it,
after the client (the official openai / anthropic SDK) got its first chunks. The router resumes the
stream on the other worker with cinfer.resume; the client's assembled greedy text, finish and usage
must equal an uninterrupted direct run, with the API's framing continued (one message_start and no
repeated content block index for Messages, consecutive sequence numbers for Responses, one role
chunk for Chat). Also: a resume request with bad ids is a 400 (the worker validates untrusted
input). Run by tests/integration/router.sh.
"""
import json
import os
import signal
import subprocess
import tempfile
import unittest

import anthropic
import openai

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
            seqs, text, final, items = [], "", None, 0
            for ev in oai(url).responses.create(model=NAME, input="hello", max_output_tokens=N, temperature=0,
                                                stream=True):
                seqs.append(ev.sequence_number)
                items += ev.type == "response.output_item.added"
                if ev.type == "response.output_text.delta":
                    text += ev.delta
                    kill()
                if ev.type in ("response.completed", "response.incomplete"):
                    final = ev.response
            self.assertEqual(seqs, list(range(len(seqs))))
            stored = oai(url).responses.retrieve(final.id)  # the resuming worker stored the whole output
            self.assertEqual(stored.output_text, final.output_text)
            return text, final.output_text, items, final.usage.output_tokens, final.status
        a, b = self.run_both(run)
        self.assertEqual(a, b)
        self.assertEqual(b[0], b[1])

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


if __name__ == "__main__":
    unittest.main()
