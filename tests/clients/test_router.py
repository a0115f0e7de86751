"""test_router.py - `cinfer router` in front of real `cinfer serve` workers on loopback, with the
official openai and anthropic SDKs (tests/integration/router.sh runs it).

- Identity: Chat Completions, Anthropic Messages and Responses, streamed and not, tool calls
  included (the scripted bigram model of tests/clients/scripted_bigram_model.py), give the same
  output through the router as from a worker directly; usage, status codes, error bodies and
  passthrough endpoints (/v1/models, /tokenize, /detokenize, count_tokens) are preserved.
- Policies: each policy's choices are observable (X-Cinfer-Worker, /workers, /metrics):
  round robin alternates, cache affinity keeps a prefix (and tenant) on one worker, prefill
  compute follows the cached prefix, least requests and decode load avoid a busy worker.
- Faults: a SIGKILLed worker is retried around with no client error; a stream whose worker is
  SIGKILLed after it sent tokens is resumed on the other worker (cinfer.resume) with the same
  greedy text as an uninterrupted run, for all four stream kinds; a full worker (429)
  means waiting, not an error; SIGTERM drains an open stream; a SIGKILLed router restarts on
  the same port and serves with the workers untouched.
- Late workers: workers that start listening only after the router's first probes were refused
  (the router started first, as in a cluster start) become healthy within a few probe intervals,
  over several router starts, with no probe abandoned (issue 19's router bug).
"""
import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anthropic
import openai

import scripted_bigram_model as sbm
from cinfer_router import Router
from cinfer_server import BIN, MODEL, Server

TMP = None
SCRIPTED = None
SLOW = None  # a random-weight model big enough that a request takes seconds (busy-worker tests)
W = []  # two scripted-model workers
STORY = []  # two stories260K workers
NAME = "scripted"
USER = {"role": "user", "content": "What is the weather in Paris?"}
HELLO = {"role": "user", "content": "hello"}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather",
                                            "parameters": {"type": "object",
                                                           "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}
ANT_TOOL = {"name": "get_weather", "description": "Current weather",
            "input_schema": WEATHER["function"]["parameters"]}
RESP_TOOL = {"type": "function", "name": "get_weather", "description": "Current weather",
             "parameters": WEATHER["function"]["parameters"]}


def setUpModule():
    global TMP, SCRIPTED
    TMP = tempfile.TemporaryDirectory()
    SCRIPTED = sbm.write(os.path.join(TMP.name, NAME + ".gguf"))
    W.extend([Server(model=SCRIPTED, ctx=2048), Server(model=SCRIPTED, ctx=2048)])
    global SLOW
    SLOW = os.path.join(TMP.name, "slow.gguf")
    subprocess.run([BIN, "mkmodel", "--arch", "llama", "--dim", "1024", "--layers", "8", "--heads", "16",
                    "--kv-heads", "16", "--ffn", "2816", "--vocab-from", MODEL, "--dtype", "q8_0", "--seed", "1",
                    SLOW], check=True, stdout=subprocess.DEVNULL)
    STORY.extend([Server(ctx=512), Server(ctx=512)])


def tearDownModule():
    for s in W + STORY:
        if s.proc.poll() is None:
            rc = s.stop()
            assert rc == 0, "worker exit code %r\n%s" % (rc, s.log_text()[-3000:])
    TMP.cleanup()


def oai(url):
    return openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=60)


def ant(url):
    return anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, timeout=60)


def strip_ids(obj):
    """A response without the fields that differ between any two calls (ids, timestamps)."""
    if isinstance(obj, dict):
        return {k: strip_ids(v) for k, v in obj.items()
                if k not in ("id", "created", "created_at", "call_id", "tool_call_id", "system_fingerprint", "request_id")}
    if isinstance(obj, list):
        return [strip_ids(v) for v in obj]
    if isinstance(obj, str) and (obj.startswith("call_") or obj.startswith("toolu_") or obj.startswith("fc_")):
        return "<id>"
    return obj


class TestIdentity(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.router = Router([W[0].url, W[1].url], "--policy", "rr")
        cls.direct = W[0].url

    @classmethod
    def tearDownClass(cls):
        assert cls.router.stop() == 0, cls.router.log_text()

    def both(self, fn):
        """fn(base_url) for the direct worker and the router: (direct, routed)."""
        return fn(self.direct), fn(self.router.url)

    def test_chat(self):
        for kw in ({"messages": [HELLO]}, {"messages": [USER], "tools": [WEATHER]}):
            a, b = self.both(lambda u: oai(u).chat.completions.create(model=NAME, **kw).model_dump())
            self.assertEqual(strip_ids(a), strip_ids(b))
            self.assertEqual(b["usage"]["prompt_tokens"], a["usage"]["prompt_tokens"])

    def test_chat_stream(self):
        """Chunk boundaries depend on timing (tokens that arrive together share a chunk), so the
        streams are compared as what a client assembles from them."""
        for kw in ({"messages": [HELLO]}, {"messages": [USER], "tools": [WEATHER]}):
            def run(u):
                text, reasoning, calls, finish, usage = "", "", {}, None, None
                for c in oai(u).chat.completions.create(model=NAME, stream=True,
                                                        stream_options={"include_usage": True}, **kw):
                    usage = c.usage or usage
                    for ch in c.choices:
                        text += ch.delta.content or ""
                        reasoning += getattr(ch.delta, "reasoning_content", None) or ""
                        for tc in ch.delta.tool_calls or []:
                            name, args = calls.get(tc.index, ("", ""))
                            calls[tc.index] = (name + (tc.function.name or ""), args + (tc.function.arguments or ""))
                        finish = ch.finish_reason or finish
                return text, reasoning, calls, finish, usage.model_dump()
            a, b = self.both(run)
            self.assertEqual(a, b)
            self.assertTrue(b[4]["completion_tokens"] > 0)

    def test_messages(self):
        for kw in ({"messages": [HELLO]}, {"messages": [USER], "tools": [ANT_TOOL]}):
            a, b = self.both(lambda u: ant(u).messages.create(model=NAME, max_tokens=64, **kw).model_dump())
            self.assertEqual(strip_ids(a), strip_ids(b))

    def test_messages_stream(self):
        for kw in ({"messages": [HELLO]}, {"messages": [USER], "tools": [ANT_TOOL]}):
            def run(u):
                with ant(u).messages.stream(model=NAME, max_tokens=64, **kw) as s:
                    for _ in s:
                        pass
                    return strip_ids(s.get_final_message().model_dump())
            a, b = self.both(run)
            self.assertEqual(a, b)

    def test_responses(self):
        for kw in ({"input": "hello"}, {"input": [USER], "tools": [RESP_TOOL]}):
            a, b = self.both(lambda u: oai(u).responses.create(model=NAME, **kw).model_dump())
            self.assertEqual(strip_ids(a)["output"], strip_ids(b)["output"])
            self.assertEqual(a["usage"], b["usage"])

    def test_responses_stream(self):
        def run(u):
            return [strip_ids(e.model_dump()) for e in oai(u).responses.create(
                model=NAME, input=[USER], tools=[RESP_TOOL], stream=True)]
        a, b = self.both(run)
        self.assertEqual(sorted(set(e["type"] for e in a)), sorted(set(e["type"] for e in b)))
        self.assertEqual(a[-1]["response"]["output"], b[-1]["response"]["output"])

    def test_passthrough_and_errors(self):
        for method, path, body in (("GET", "/v1/models", None),
                                   ("POST", "/tokenize", {"prompt": "hello world"}),
                                   ("POST", "/detokenize", {"tokens": [1, 2, 3]}),
                                   ("POST", "/v1/messages/count_tokens", {"model": NAME, "messages": [HELLO]}),
                                   ("POST", "/v1/chat/completions", {"model": NAME, "messages": "nope"}),
                                   ("POST", "/v1/messages", {"model": NAME}),
                                   ("POST", "/v1/chat/completions", b"{not json")):
            d = W[0].http(method, path, body)
            r = self.router.http(method, path, body)
            self.assertEqual(d[0], r[0], path)
            if path == "/v1/models":
                self.assertEqual(strip_ids(json.loads(d[2])), strip_ids(json.loads(r[2])))
            else:
                self.assertEqual(strip_ids(json.loads(d[2])), strip_ids(json.loads(r[2])), path)
            self.assertEqual(d[1].get("Content-Type"), r[1].get("Content-Type"))
        status, _, body = self.router.http("GET", "/nowhere")
        self.assertEqual(status, 404)


def completion(url, prompt, max_tokens=8, key="x", stream=False):
    """A raw completions request: (status, X-Cinfer-Worker, body)."""
    import urllib.request
    req = urllib.request.Request(url + "/v1/completions", method="POST",
                                 data=json.dumps({"prompt": prompt, "max_tokens": max_tokens,
                                                  "temperature": 0, "stream": stream}).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.status, r.headers.get("X-Cinfer-Worker"), r.read()


LONG = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. " * 6


class TestPolicies(unittest.TestCase):
    def router(self, policy):
        return Router([STORY[0].url, STORY[1].url], "--policy", policy)

    def test_round_robin(self):
        r = self.router("round_robin")
        got = [completion(r.url, "Once")[1] for _ in range(4)]
        self.assertEqual(got, [STORY[0].url, STORY[1].url] * 2)
        ws = r.workers()
        self.assertEqual([w["decisions"]["round_robin"] for w in ws], [2, 2])
        m = r.metrics()
        self.assertEqual(m['cinfer_router_decisions_total{worker="%s",policy="round_robin"}' % STORY[0].url], 2)
        self.assertEqual(r.stop(), 0)

    def test_previous_response_follows_its_worker(self):
        """Responses previous_response_id across workers (round robin would alternate): the follow-up
        goes to the worker that holds the stored response; after a router restart (empty table) the
        worker that does not hold it answers 404 previous_response_not_found and the router tries
        the other one; an id no worker holds is the client's 404."""
        r = self.router("round_robin")
        c = openai.OpenAI(base_url=r.url + "/v1", api_key="none", max_retries=0)
        first = c.responses.create(model="stories260K", input="Once upon a time", max_output_tokens=8,
                                   temperature=0)
        for stream in (False, True):
            for _ in range(2):  # round robin would send one of the two elsewhere
                kw = dict(model="stories260K", input="Then", previous_response_id=first.id,
                          max_output_tokens=8, temperature=0)
                if stream:
                    events = list(c.responses.create(stream=True, **kw))
                    self.assertIn(events[-1].type, ("response.completed", "response.incomplete"))
                else:
                    self.assertIn(c.responses.create(**kw).status, ("completed", "incomplete"))
        self.assertEqual(r.stop(), 0)
        r = self.router("round_robin")  # a new router knows nothing: the 404 retry finds the holder
        c = openai.OpenAI(base_url=r.url + "/v1", api_key="none", max_retries=0)
        for _ in range(2):
            again = c.responses.create(model="stories260K", input="Then", previous_response_id=first.id,
                                       max_output_tokens=8, temperature=0)
            self.assertIn(again.status, ("completed", "incomplete"))  # incomplete: max_output_tokens
        with self.assertRaises(openai.NotFoundError) as cm:
            c.responses.create(model="stories260K", input="x", previous_response_id="resp_nobodyhasthis",
                               max_output_tokens=4)
        self.assertIn("previous_response_not_found", str(cm.exception))
        self.assertEqual(r.stop(), 0)

    def test_cache_affinity(self):
        r = self.router("cache_affinity")
        # one prefix -> one worker, every time; many prefixes -> both workers
        first = {completion(r.url, LONG + str(i))[1] for i in range(3)}
        self.assertEqual(len(first), 1)
        spread = {completion(r.url, "%d " % i + LONG)[1] for i in range(12)}
        self.assertEqual(spread, {STORY[0].url, STORY[1].url})
        # tenants: the key is part of the hash, so the same prompt spreads over keys
        by_key = {completion(r.url, LONG, key="tenant-%d" % i)[1] for i in range(12)}
        self.assertEqual(by_key, {STORY[0].url, STORY[1].url})
        self.assertEqual(r.stop(), 0)

    def test_prefill_compute_follows_cache(self):
        r = self.router("prefill_compute")
        prompt = LONG + " The end."
        _, w1, _ = completion(r.url, prompt)
        # the other worker gets a different long prompt first (it is then the less loaded one by index)
        for i in range(3):
            _, w, body = completion(r.url, prompt + " Again %d." % i)
            self.assertEqual(w, w1)
            self.assertGreater(json.loads(body)["usage"]["prompt_tokens_details"]["cached_tokens"], 0)
        self.assertEqual(r.stop(), 0)

    def busy_then_pick(self, policy):
        """Worker 0 runs a long request sent to it directly (the router learns it from GET /load),
        then one sent through the router (its own accounting): new requests go to worker 1."""
        slow = [Server(model=SLOW, ctx=512), Server(model=SLOW, ctx=512)]
        r = Router([slow[0].url, slow[1].url], "--policy", policy, "--health-interval", "0.05")
        done = []
        t = threading.Thread(target=lambda: done.append(completion(slow[0].url, "Once", 200)))
        t.start()
        r.wait_workers(lambda ws: ws[0]["running"] >= 1)
        _, w, _ = completion(r.url, "Once", 1)
        self.assertEqual(w, slow[1].url)
        self.assertEqual(r.workers()[1]["decisions"][policy], 1)
        t.join()
        self.assertEqual(r.stop(), 0)
        for s in slow:
            self.assertEqual(s.stop(), 0)

    def test_least_requests(self):
        self.busy_then_pick("least_requests")

    def test_decode_load(self):
        self.busy_then_pick("decode_load")


class TestFaults(unittest.TestCase):
    def test_killed_worker_is_retried_around(self):
        a, b = Server(ctx=512), Server(ctx=512)
        r = Router([a.url, b.url], "--policy", "rr", "--health-interval", "30")
        expect = completion(b.url, "Once upon", 16)[2]
        a.stop(signal.SIGKILL)
        for _ in range(4):  # the router does not know yet: the first pick of a fails, then retries on b
            status, w, body = completion(r.url, "Once upon", 16)
            self.assertEqual(status, 200)
            self.assertEqual(w, b.url)
            self.assertEqual(json.loads(body)["choices"], json.loads(expect)["choices"])
        m = r.metrics()
        self.assertGreaterEqual(m["cinfer_router_retries_total"], 1)
        self.assertGreaterEqual(m["cinfer_router_upstream_errors_total"], 1)
        self.assertEqual(m['cinfer_router_worker_healthy{worker="%s"}' % a.url], 0)
        self.assertEqual(r.stop(), 0)
        b.stop()

    def test_full_worker_means_waiting(self):
        w = Server("--max-seqs", "1", "--max-queue", "0", ctx=512)
        r = Router([w.url], "--queue-timeout", "60")
        results = []

        def one(i):
            results.append(completion(r.url, "Once upon a time %d" % i, 48)[0])
        ts = [threading.Thread(target=one, args=(i,)) for i in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(results, [200, 200, 200])
        m = r.metrics()
        self.assertGreaterEqual(m['cinfer_router_worker_full_total{worker="%s"}' % w.url], 1)
        self.assertEqual(m['cinfer_router_requests_total{status="2xx"}'], 3)
        # a bounded wait: with no time to wait, the worker's own 429 reaches the client
        r2 = Router([w.url], "--queue-timeout", "0", "--max-attempts", "1")
        statuses = []
        ts = [threading.Thread(target=lambda: statuses.append(r2.http("POST", "/v1/completions", {
            "prompt": "Once", "max_tokens": 64})[0])) for _ in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertIn(200, statuses)
        self.assertTrue(set(statuses) <= {200, 429}, statuses)
        self.assertEqual(r.stop(), 0)
        self.assertEqual(r2.stop(), 0)
        w.stop()

    def test_sigterm_drains_a_stream(self):
        r = Router([STORY[0].url])
        c = oai(r.url)
        stream = c.completions.create(model="stories260K", prompt="Once", max_tokens=120, stream=True,
                                      temperature=0)
        first = next(iter(stream))
        r.proc.send_signal(signal.SIGTERM)
        text = first.choices[0].text + "".join(ch.choices[0].text for ch in stream if ch.choices)
        direct = oai(STORY[0].url).completions.create(model="stories260K", prompt="Once", max_tokens=120,
                                                     temperature=0)
        self.assertEqual(text, direct.choices[0].text)
        self.assertEqual(r.stop(), 0)

    def test_killed_mid_stream_without_another_worker_ends_the_stream(self):
        """With no other worker to resume on, the client's stream ends with an error event, never
        hangs (the resume waits --queue-timeout for a worker)."""
        import http.client
        a = Server(model=SLOW, ctx=512)
        r = Router([a.url], "--queue-timeout", "0.5")
        conn = http.client.HTTPConnection("127.0.0.1", r.port, timeout=60)
        conn.request("POST", "/v1/completions", json.dumps({"prompt": "Once", "max_tokens": 300, "stream": True}),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        self.assertEqual(resp.getheader("X-Cinfer-Worker"), a.url)
        self.assertIsNone(resp.getheader("X-Cinfer-Resumable"))
        self.assertTrue(resp.readline().startswith(b"data: "))
        a.stop(signal.SIGKILL)
        rest = resp.read()  # returns at the end of the chunked body: no hang
        self.assertIn(b"event: error", rest)
        self.assertNotIn(b"[DONE]", rest)
        self.assertNotIn(b": cinfer", rest)  # the workers' resume marks never reach the client
        m = r.metrics()
        self.assertEqual(m["cinfer_router_upstream_errors_total"], 1)
        self.assertEqual(r.stop(), 0)

    def test_pd_two_steps(self):
        """PD mode's router side with plain workers standing in for the roles (--pd-sequential):
        step 1 goes to the prefill worker with the handoff headers, step 2 to the decode worker after
        it, whose answer the client gets; a dead prefill worker means the decode worker serves alone."""
        p, d = Server(ctx=512), Server(ctx=512)
        r = Router([p.url + "@prefill", d.url + "@decode"], "--pd-sequential")
        direct = completion(d.url, "Once upon a time", 16)[2]
        status, w, body = completion(r.url, "Once upon a time", 16)
        self.assertEqual((status, w), (200, d.url))
        self.assertEqual(json.loads(body)["choices"], json.loads(direct)["choices"])
        self.assertEqual(r.metrics()['cinfer_router_handoffs_total{result="ok"}'], 1)
        ws = r.workers()
        self.assertEqual((ws[0]["requests"], ws[1]["requests"]), (1, 1))
        self.assertEqual(ws[0]["decisions"]["prefill_compute"], 1)
        self.assertEqual(ws[1]["decisions"]["decode_load"], 1)
        # a client error in step 1 is the client's answer; step 2 is not sent
        bad = {"prompt": "x", "max_tokens": -1}
        status, headers, body = r.http("POST", "/v1/completions", bad)
        dstatus, _, dbody = d.http("POST", "/v1/completions", bad)
        self.assertEqual((status, headers["X-Cinfer-Worker"]), (dstatus, p.url))
        self.assertEqual(status, 400)
        self.assertEqual(strip_ids(json.loads(body)), strip_ids(json.loads(dbody)))
        self.assertEqual(r.workers()[1]["requests"], 1)
        p.stop(signal.SIGKILL)
        status, w, body = completion(r.url, "Once upon a time", 16)
        self.assertEqual((status, w), (200, d.url))
        self.assertEqual(json.loads(body)["choices"], json.loads(direct)["choices"])
        self.assertEqual(r.metrics()['cinfer_router_handoffs_total{result="failed"}'], 1)
        self.assertEqual(r.stop(), 0)
        self.assertEqual(d.stop(), 0)

    def test_pd_two_steps_overlapped(self):
        """The default PD mode: both steps go out at once (the decode worker waits for the handoff).
        The client gets the decode worker's answer; the prefill worker got the request too; a client
        error is answered by the decode worker itself (same body); a dead prefill worker means the
        decode worker serves alone, without waiting for a handoff that cannot come."""
        p, d = Server(ctx=512), Server(ctx=512)
        r = Router([p.url + "@prefill", d.url + "@decode"])
        direct = completion(d.url, "Once upon a time", 16)[2]
        status, w, body = completion(r.url, "Once upon a time", 16)
        self.assertEqual((status, w), (200, d.url))
        self.assertEqual(json.loads(body)["choices"], json.loads(direct)["choices"])
        ws = r.workers()
        self.assertEqual((ws[0]["requests"], ws[1]["requests"]), (1, 1))
        self.assertEqual(ws[0]["decisions"]["prefill_compute"], 1)
        self.assertEqual(ws[1]["decisions"]["decode_load"], 1)
        bad = {"prompt": "x", "max_tokens": -1}
        status, headers, body = r.http("POST", "/v1/completions", bad)
        dstatus, _, dbody = d.http("POST", "/v1/completions", bad)
        self.assertEqual((status, headers["X-Cinfer-Worker"]), (dstatus, d.url))
        self.assertEqual(status, 400)
        self.assertEqual(strip_ids(json.loads(body)), strip_ids(json.loads(dbody)))
        p.stop(signal.SIGKILL)
        status, w, body = completion(r.url, "Once upon a time", 16)
        self.assertEqual((status, w), (200, d.url))
        self.assertEqual(json.loads(body)["choices"], json.loads(direct)["choices"])
        for _ in range(100):  # step 1's failure is counted when its connection is refused
            if r.metrics()['cinfer_router_handoffs_total{result="failed"}'] >= 1:
                break
            time.sleep(0.05)
        self.assertGreaterEqual(r.metrics()['cinfer_router_handoffs_total{result="failed"}'], 1)
        self.assertEqual(r.stop(), 0)
        self.assertEqual(d.stop(), 0)

    def test_router_restart(self):
        r = Router([STORY[0].url, STORY[1].url])
        port = r.port
        before = completion(r.url, "Once upon a time", 12)[2]
        r.stop(signal.SIGKILL)
        r2 = Router([STORY[0].url, STORY[1].url], port=port)
        after = completion(r2.url, "Once upon a time", 12)[2]
        self.assertEqual(json.loads(before)["choices"], json.loads(after)["choices"])
        self.assertTrue(all(w["healthy"] for w in r2.workers()))
        self.assertEqual(r2.stop(), 0)


class _LoadHandler(BaseHTTPRequestHandler):
    """A worker's GET /load as `cinfer serve` answers it (what the router's probe reads)."""
    def do_GET(self):
        body = json.dumps({"running": 0, "waiting": 0, "inflight": 0, "max_inflight": 8, "max_seqs": 4,
                           "kv_tokens": 0, "kv_capacity_tokens": 4096, "kv_block_tokens": 16,
                           "draining": False}).encode()
        self.send_response(200 if self.path == "/load" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TestLateWorkers(unittest.TestCase):
    def test_workers_listening_after_refused_probes_become_healthy(self):
        for run in range(4):
            ports = [_free_port() for _ in range(3)]
            urls = ["http://127.0.0.1:%d" % p for p in ports]
            r = Router(urls, "--health-interval", "0.05", wait_healthy=False)
            servers = []
            try:
                # probes are refused until the workers listen: each refused probe is followed by another
                r.wait_workers(lambda ws: all(w["consecutive_fails"] >= 5 for w in ws))
                self.assertTrue(all(not w["healthy"] and w["seconds_since_ok"] < 0 for w in r.workers()))
                for p in ports:
                    srv = ThreadingHTTPServer(("127.0.0.1", p), _LoadHandler)
                    threading.Thread(target=srv.serve_forever, daemon=True).start()
                    servers.append(srv)
                    time.sleep(0.1 * run)
                r.wait_workers(lambda ws: all(w["healthy"] and w["seconds_since_ok"] >= 0 for w in ws), timeout=30)
                ws = r.workers()
                self.assertEqual([w["probes_abandoned"] for w in ws], [0, 0, 0])
                self.assertEqual([w["kv_capacity_tokens"] for w in ws], [4096] * 3)
            finally:
                rc = r.stop()
                for srv in servers:
                    srv.shutdown()
                    srv.server_close()
            self.assertEqual(rc, 0, r.log_text()[-3000:])


if __name__ == "__main__":
    unittest.main()
