"""test_serve_errors.py - every documented error of `cinfer serve` returns its status and
OpenAI's error object {"error":{"message","type","param","code"}}, through raw HTTP and
through the openai SDK's exception classes; the server keeps serving after each one.
Run by tests/integration/serve_errors.sh."""
import json
import socket
import threading
import unittest

import openai

from cinfer_server import MODEL_NAME, Server

KEY = "sk-test-123"
SRV = None


def setUpModule():
    global SRV
    SRV = Server("--api-key", KEY, "--max-body-bytes", "4096", "--max-seqs", "2", "--max-queue", "2")


def tearDownModule():
    rc = SRV.stop()
    assert rc == 0, "server exit code %r\n%s" % (rc, SRV.log_text()[-3000:])


AUTH = {"Authorization": "Bearer " + KEY}
CHAT = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


def post(path, body, headers=AUTH):
    return SRV.http("POST", path, body, headers=dict(headers))


class TestErrors(unittest.TestCase):
    def assertError(self, resp, status, param=None, code=None, contains=None):
        st, headers, body = resp
        self.assertEqual(st, status, body)
        self.assertTrue(headers.get("Content-Type", "").startswith("application/json"))
        e = json.loads(body)["error"]
        self.assertEqual(set(e), {"message", "type", "param", "code"})
        self.assertIsInstance(e["message"], str)
        self.assertTrue(e["message"])
        if param is not None:
            self.assertEqual(e["param"], param)
        if code is not None:
            self.assertEqual(e["code"], code)
        if contains:
            for c in contains:
                self.assertIn(c, e["message"])
        return e

    def tearDown(self):
        # the server keeps serving after every error
        st, _, body = post("/v1/chat/completions", CHAT)
        self.assertEqual(st, 200, body)

    def test_malformed_json(self):
        e = self.assertError(post("/v1/chat/completions", b'{"model": "x", "messages": ['), 400)
        self.assertEqual(e["type"], "invalid_request_error")
        self.assertError(post("/v1/completions", b"[1,2]"), 400)
        self.assertError(post("/v1/chat/completions", b""), 400)

    def test_invalid_fields(self):
        cases = [({"temperature": 5}, "temperature"), ({"top_p": 0}, "top_p"), ({"n": 0}, "n"),
                 ({"max_tokens": 0}, "max_tokens"), ({"max_tokens": "9"}, "max_tokens"),
                 ({"stop": [1]}, "stop"), ({"logit_bias": {"99999": 1}}, "logit_bias"),
                 ({"logit_bias": {"5": 500}}, "logit_bias"), ({"presence_penalty": 3}, "presence_penalty"),
                 ({"top_logprobs": 3}, "top_logprobs"), ({"stream_options": {"include_usage": True}}, "stream_options"),
                 ({"messages": []}, "messages"), ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0]"),
                 ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
                  "messages[0]"),
                 ({"cache_salt": ""}, "cache_salt"), ({"seed": 1.5}, "seed"),
                 # issue 14 §4.6: wrong types are refused, never ignored
                 ({"tools": 5}, "tools"), ({"tool_choice": 5}, "tool_choice"),
                 ({"response_format": 5}, "response_format"), ({"model": ""}, "model"),
                 ({"logit_bias": {" 1": 1}}, "logit_bias"), ({"logit_bias": {"01": 1}}, "logit_bias"),
                 ({"logit_bias": {"-0": 1}}, "logit_bias"),
                 # structured outputs: bad shapes, two constraints, a regex that does not compile
                 ({"response_format": {"type": "json_object"}, "guided_regex": "a+"}, "guided_regex"),
                 ({"guided_json": 5}, "guided_json"), ({"guided_regex": "(a"}, "guided_regex"),
                 ({"guided_choice": []}, "guided_choice"), ({"guided_grammar": ""}, "guided_grammar"),
                 ({"structured_outputs": {"whitespace_pattern": " "}}, "structured_outputs.whitespace_pattern"),
                 ({"guided_regex": "a+", "ignore_eos": True}, "ignore_eos"),
                 # vLLM extras are typed
                 ({"min_tokens": -1}, "min_tokens"), ({"ignore_eos": "yes"}, "ignore_eos"),
                 ({"stop_token_ids": [99999]}, "stop_token_ids"), ({"skip_special_tokens": 1}, "skip_special_tokens"),
                 ({"include_stop_str_in_output": "no"}, "include_stop_str_in_output")]
        for extra, param in cases:
            body = dict(CHAT)
            body.update(extra)
            with self.subTest(extra=extra):
                self.assertError(post("/v1/chat/completions", body), 400, param=param)
        self.assertError(post("/v1/completions", {"model": MODEL_NAME, "prompt": ["a", "b"]}), 400, param="prompt")
        self.assertError(post("/v1/completions", {"model": MODEL_NAME, "prompt": [1, 99999]}), 400, param="prompt")
        self.assertError(post("/v1/completions", {"model": MODEL_NAME, "prompt": "x", "echo": True}), 400, param="echo")

    def test_url_ids_with_nul(self):
        # an encoded NUL must not cut the id short ("stories260K%00x" is not "stories260K")
        st, _, _ = SRV.http("GET", "/v1/models/" + MODEL_NAME, headers=AUTH)
        self.assertEqual(st, 200)
        st, _, body = SRV.http("GET", "/v1/models/" + MODEL_NAME + "%00x", headers=AUTH)
        self.assertEqual(st, 404, body)
        st, _, body = SRV.http("GET", "/v1/responses/resp_x%00y", headers=AUTH)
        self.assertEqual(st, 404, body)
        st, _, body = SRV.http("DELETE", "/v1/responses/resp_x%00y", headers=AUTH)
        self.assertEqual(st, 404, body)

    def test_api_key(self):
        self.assertError(post("/v1/chat/completions", CHAT, headers={}), 401, code="invalid_api_key")
        self.assertError(post("/v1/chat/completions", CHAT, headers={"Authorization": "Bearer nope"}), 401)
        self.assertEqual(SRV.http("GET", "/v1/models")[0], 401)
        self.assertEqual(SRV.http("GET", "/v1/models", headers=AUTH)[0], 200)
        self.assertEqual(SRV.http("GET", "/health")[0], 200)  # probes need no key
        bad = openai.OpenAI(base_url=SRV.url + "/v1", api_key="wrong", max_retries=0)
        with self.assertRaises(openai.AuthenticationError):
            bad.chat.completions.create(**CHAT)

    def test_unknown_model(self):
        body = dict(CHAT, model="gpt-17")
        self.assertError(post("/v1/chat/completions", body), 404, param="model", code="model_not_found")
        client = openai.OpenAI(base_url=SRV.url + "/v1", api_key=KEY, max_retries=0)
        with self.assertRaises(openai.NotFoundError):
            client.completions.create(model="gpt-17", prompt="x", max_tokens=2)

    def test_context_exceeded(self):
        body = dict(CHAT, max_tokens=600)
        e = self.assertError(post("/v1/chat/completions", body), 400, code="context_length_exceeded",
                             contains=["maximum context length is 512 tokens", "in the completion", "600"])
        self.assertIn("in the messages", e["message"])
        long = {"model": MODEL_NAME, "prompt": "once upon a time " * 200, "max_tokens": 1}
        self.assertError(post("/v1/completions", long), 400, code="context_length_exceeded")
        client = openai.OpenAI(base_url=SRV.url + "/v1", api_key=KEY, max_retries=0)
        with self.assertRaises(openai.BadRequestError):
            client.chat.completions.create(**body)

    def test_body_too_large(self):
        body = dict(CHAT, messages=[{"role": "user", "content": "x" * 5000}])
        self.assertError(post("/v1/chat/completions", body), 413)
        # far above the limit evhttp refuses before reading the body (its own page, same status)
        s = socket.create_connection(("127.0.0.1", SRV.port))
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
                  b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{" % (3 << 20))
        s.settimeout(10)
        head = s.recv(200)
        s.close()
        self.assertTrue(head.startswith(b"HTTP/1.1 413"), head)

    def test_not_found_and_method(self):
        self.assertError(SRV.http("GET", "/v2/whatever"), 404)
        self.assertError(SRV.http("GET", "/v1/chat/completions", headers=AUTH), 405)

    def test_queue_full(self):
        # --max-seqs 2 --max-queue 2: at most 4 choices in flight; 24 concurrent long requests
        results = []
        lock = threading.Lock()

        def one():
            r = post("/v1/completions", {"model": MODEL_NAME, "prompt": "Once", "max_tokens": 400, "ignore_eos": True})
            with lock:
                results.append(r)

        ts = [threading.Thread(target=one) for _ in range(24)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        statuses = sorted(r[0] for r in results)
        self.assertEqual(set(statuses), {200, 429}, statuses)
        busy = [r for r in results if r[0] == 429]
        self.assertEqual(busy[0][1].get("Retry-After"), "1")
        self.assertError(busy[0], 429, code="rate_limit_exceeded")
        # a request that can never fit (n above the in-flight limit) is a 400, not a retryable 429
        self.assertError(post("/v1/chat/completions", dict(CHAT, n=5)), 400, param="n")

    def test_garbage_connection(self):
        s = socket.create_connection(("127.0.0.1", SRV.port))
        s.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        s.settimeout(5)
        try:
            s.recv(1000)
        except OSError:
            pass
        s.close()

    def test_metrics_count_statuses(self):
        post("/v1/chat/completions", b"{")
        m = SRV.metrics()
        self.assertGreaterEqual(m.get('cinfer_requests_total{status="400"}', 0), 1)
        self.assertGreaterEqual(m.get('cinfer_requests_total{status="200"}', 0), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
