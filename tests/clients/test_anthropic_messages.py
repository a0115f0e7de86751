"""test_anthropic_messages.py - `cinfer serve`'s Anthropic Messages API (POST /v1/messages,
/v1/messages/count_tokens) driven by the official anthropic Python SDK (pinned in
requirements.txt) on the real stories260K model: create, streaming with the SDK's event
helpers, count_tokens, x-api-key and Bearer auth, request-id, and every error in Anthropic's
shape {"type":"error","error":{"type","message"}} (SDK exceptions and raw HTTP), including
overloaded_error 529 when the queue is full. Tool use and thinking: test_tool_calls.py.
Run by tests/integration/serve_anthropic.sh."""
import json
import threading
import unittest

import anthropic

from cinfer_server import MODEL_NAME, Server

KEY = "sk-ant-test-1"
SRV = None
CLIENT = None


def setUpModule():
    global SRV, CLIENT
    SRV = Server("--api-key", KEY, "--max-seqs", "2", "--max-queue", "2")
    CLIENT = anthropic.Anthropic(base_url=SRV.url, api_key=KEY, max_retries=0, timeout=60)


def tearDownModule():
    rc = SRV.stop()
    assert rc == 0, "server exit code %r\n%s" % (rc, SRV.log_text()[-3000:])


MSGS = [{"role": "user", "content": "Once upon a time"}]
HDR = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}


class TestMessages(unittest.TestCase):
    def test_create(self):
        raw = CLIENT.messages.with_raw_response.create(model=MODEL_NAME, max_tokens=16, messages=MSGS,
                                                       system="You tell stories.", temperature=0)
        m = raw.parse()
        self.assertTrue(raw.headers.get("request-id", "").startswith("msg_"))
        self.assertEqual(m.type, "message")
        self.assertEqual(m.role, "assistant")
        self.assertEqual(m.model, MODEL_NAME)
        self.assertTrue(m.id.startswith("msg_"))
        self.assertEqual(m.content[0].type, "text")
        self.assertTrue(m.content[0].text)
        self.assertEqual(m.stop_reason, "max_tokens")
        self.assertEqual(m.usage.output_tokens, 16)
        self.assertGreater(m.usage.input_tokens + m.usage.cache_read_input_tokens, 5)
        # greedy is deterministic
        again = CLIENT.messages.create(model=MODEL_NAME, max_tokens=16, messages=MSGS, system="You tell stories.",
                                       temperature=0)
        self.assertEqual(again.content[0].text, m.content[0].text)

    def test_multi_turn_and_blocks(self):
        m = CLIENT.messages.create(
            model=MODEL_NAME, max_tokens=8, temperature=0, top_k=5,
            system=[{"type": "text", "text": "Stories."}],
            messages=[{"role": "user", "content": [{"type": "text", "text": "Once"}]},
                      {"role": "assistant", "content": "there was"},
                      {"role": "user", "content": "a cat"}])
        self.assertEqual(m.usage.output_tokens, 8)

    def test_stop_sequence(self):
        # a stop string that really occurs in the greedy output: stop_reason stop_sequence + the string
        base = CLIENT.messages.create(model=MODEL_NAME, max_tokens=30, messages=MSGS, temperature=0)
        text = base.content[0].text
        words = text.split()
        self.assertGreater(len(words), 3, text)
        word = words[2]
        cut = text[:text.index(word)]
        stops = ["zq-never-occurs", word]
        m = CLIENT.messages.create(model=MODEL_NAME, max_tokens=30, messages=MSGS, temperature=0,
                                   stop_sequences=stops)
        self.assertEqual(m.stop_reason, "stop_sequence")
        self.assertEqual(m.stop_sequence, word)
        self.assertEqual(m.content[0].text if m.content else "", cut)
        self.assertLess(m.usage.output_tokens, 30)
        # streaming: message_delta carries stop_reason and stop_sequence; the SDK's final message too
        with CLIENT.messages.stream(model=MODEL_NAME, max_tokens=30, messages=MSGS, temperature=0,
                                    stop_sequences=stops) as stream:
            events = list(stream)
            final = stream.get_final_message()
        delta = [e for e in events if e.type == "message_delta"][0]
        self.assertEqual((delta.delta.stop_reason, delta.delta.stop_sequence), ("stop_sequence", word))
        self.assertEqual((final.stop_reason, final.stop_sequence), ("stop_sequence", word))
        self.assertEqual(final.content[0].text if final.content else "", cut)
        # ending by max_tokens or EOS: stop_sequence stays null
        self.assertIsNone(base.stop_sequence)
        m = CLIENT.messages.create(model=MODEL_NAME, max_tokens=5, messages=MSGS, temperature=0,
                                   stop_sequences=["zq-never-occurs"])
        self.assertEqual((m.stop_reason, m.stop_sequence), ("max_tokens", None))

    def test_stream_helpers(self):
        with CLIENT.messages.stream(model=MODEL_NAME, max_tokens=24, messages=MSGS, temperature=0) as stream:
            pieces = list(stream.text_stream)
            final = stream.get_final_message()
        self.assertGreater(len(pieces), 1)
        self.assertEqual("".join(pieces), final.content[0].text)
        self.assertEqual(final.stop_reason, "max_tokens")
        self.assertEqual(final.usage.output_tokens, 24)
        ref = CLIENT.messages.create(model=MODEL_NAME, max_tokens=24, messages=MSGS, temperature=0)
        self.assertEqual(ref.content[0].text, final.content[0].text)

    def test_stream_usage_matches(self):
        """The stream's final usage (message_delta, accumulated by the SDK) splits the input into
        uncached and cache-read tokens exactly as the non-streaming answer does (regression: the
        stream used to report the whole prompt as uncached)."""
        msgs = [{"role": "user", "content": "Once upon a time there was a little dog. " * 12}]
        CLIENT.messages.create(model=MODEL_NAME, max_tokens=2, messages=msgs, temperature=0)  # fills the cache
        ref = CLIENT.messages.create(model=MODEL_NAME, max_tokens=4, messages=msgs, temperature=0)
        self.assertGreater(ref.usage.cache_read_input_tokens, 0)
        with CLIENT.messages.stream(model=MODEL_NAME, max_tokens=4, messages=msgs, temperature=0) as stream:
            final = stream.get_final_message()
        self.assertEqual(final.usage.cache_read_input_tokens, ref.usage.cache_read_input_tokens)
        self.assertEqual(final.usage.input_tokens, ref.usage.input_tokens)
        self.assertEqual(final.usage.output_tokens, 4)

    def test_stream_events(self):
        events = [e.type for e in CLIENT.messages.create(model=MODEL_NAME, max_tokens=5, messages=MSGS, stream=True)]
        self.assertEqual(events[0], "message_start")
        self.assertEqual(events[1], "content_block_start")
        self.assertIn("content_block_delta", events)
        self.assertEqual(events[-3:], ["content_block_stop", "message_delta", "message_stop"])

    def test_count_tokens(self):
        c = CLIENT.messages.count_tokens(model=MODEL_NAME, messages=MSGS, system="You tell stories.")
        m = CLIENT.messages.create(model=MODEL_NAME, max_tokens=1, messages=MSGS, system="You tell stories.")
        self.assertEqual(c.input_tokens,
                         m.usage.input_tokens + m.usage.cache_read_input_tokens + m.usage.cache_creation_input_tokens)

    def test_bearer_auth(self):
        c = anthropic.Anthropic(base_url=SRV.url, auth_token=KEY, api_key=None, max_retries=0)
        m = c.messages.create(model=MODEL_NAME, max_tokens=2, messages=MSGS)
        self.assertEqual(m.usage.output_tokens, 2)


    def test_stream_disconnect_frees(self):
        # a client that leaves mid-stream: its engine request is released, its KV blocks freed
        import socket
        import time
        s = socket.create_connection(("127.0.0.1", SRV.port))
        data = json.dumps({"max_tokens": 400, "stream": True, "messages": MSGS}).encode()
        s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: " + KEY.encode() +
                  b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
        s.settimeout(10)
        got = b""
        while b"content_block_delta" not in got:
            got += s.recv(4096)
        s.close()
        deadline = time.time() + 10
        while time.time() < deadline:
            m = SRV.metrics()
            if m["cinfer_kv_blocks_used"] == 0 and m["cinfer_requests_inflight"] == 0:
                break
            time.sleep(0.02)
        self.assertEqual(SRV.metrics()["cinfer_kv_blocks_used"], 0)
        self.assertEqual(CLIENT.messages.create(model=MODEL_NAME, max_tokens=2, messages=MSGS).usage.output_tokens, 2)


class TestMessagesErrors(unittest.TestCase):
    def raw(self, body, headers=HDR, path="/v1/messages"):
        st, h, b = SRV.http("POST", path, body, headers=dict(headers))
        o = json.loads(b)
        self.assertEqual(o["type"], "error", o)
        self.assertIn("message", o["error"])
        self.assertTrue(h.get("request-id"), h)
        return st, o["error"]["type"]

    def test_sdk_errors(self):
        bad = anthropic.Anthropic(base_url=SRV.url, api_key="wrong", max_retries=0)
        with self.assertRaises(anthropic.AuthenticationError):
            bad.messages.create(model=MODEL_NAME, max_tokens=2, messages=MSGS)
        with self.assertRaises(anthropic.NotFoundError) as cm:
            CLIENT.messages.create(model="claude-nope", max_tokens=2, messages=MSGS)
        self.assertEqual(cm.exception.body["error"]["type"], "not_found_error")
        with self.assertRaises(anthropic.BadRequestError) as cm:
            CLIENT.messages.create(model=MODEL_NAME, max_tokens=2, messages=MSGS, temperature=1.5)
        self.assertEqual(cm.exception.body["error"]["type"], "invalid_request_error")
        with self.assertRaises(anthropic.BadRequestError) as cm:  # a schema keyword that cannot be enforced
            CLIENT.messages.create(model=MODEL_NAME, max_tokens=2, messages=MSGS,
                                   extra_body={"output_config": {"format": {"type": "json_schema", "schema": {
                                       "type": "array", "uniqueItems": True}}}})
        self.assertIn("output_config.format", cm.exception.body["error"]["message"])
        self.assertIn("uniqueItems", cm.exception.body["error"]["message"])
        with self.assertRaises(anthropic.BadRequestError) as cm:  # prompt + max_tokens beyond the context
            CLIENT.messages.create(model=MODEL_NAME, max_tokens=1000, messages=MSGS)
        # says which limit: not "prompt is too long" for a short prompt (regression, issue 14)
        self.assertRegex(cm.exception.body["error"]["message"],
                         r"^input length and `max_tokens` exceed context limit: max_tokens 1000 \+ prompt \d+ "
                         r"tokens exceeds the context of 512 tokens; ")
        with self.assertRaises(anthropic.BadRequestError) as cm:  # the prompt alone fills the context
            CLIENT.messages.create(model=MODEL_NAME, max_tokens=4, messages=[{"role": "user", "content": "word " * 600}])
        self.assertRegex(cm.exception.body["error"]["message"], r"^prompt is too long: \d+ tokens > 512 maximum$")

    def test_raw_malformed(self):
        self.assertEqual(self.raw(b"{not json"), (400, "invalid_request_error"))
        self.assertEqual(self.raw(b"[1]"), (400, "invalid_request_error"))
        self.assertEqual(self.raw({"model": MODEL_NAME, "messages": MSGS}), (400, "invalid_request_error"))
        self.assertEqual(self.raw({"max_tokens": 4, "messages": [{"role": "bogus", "content": "x"}]}),
                         (400, "invalid_request_error"))
        self.assertEqual(self.raw({"max_tokens": 4, "messages": "x"}), (400, "invalid_request_error"))
        # cinfer.traffic_class goes through recipe's canonical request to the engine request
        self.assertEqual(self.raw({"max_tokens": 4, "messages": MSGS, "cinfer": {"traffic_class": "bogus"}}),
                         (400, "invalid_request_error"))
        st, h, b = SRV.http("POST", "/v1/messages", {"max_tokens": 2, "messages": MSGS,
                                                     "cinfer": {"traffic_class": "agent"}}, headers=dict(HDR))
        self.assertEqual(st, 200, b)
        self.assertEqual(self.raw({"model": MODEL_NAME}, path="/v1/messages/count_tokens"), (400, "invalid_request_error"))
        self.assertEqual(self.raw({"max_tokens": 4, "messages": MSGS}, headers={}), (401, "authentication_error"))
        st, h, b = SRV.http("GET", "/v1/messages", headers=HDR)
        self.assertEqual(st, 405)
        self.assertEqual(json.loads(b)["type"], "error")

    def test_overloaded_529(self):
        # --max-seqs 2 --max-queue 2: long completions fill the 4 places; Messages requests beyond get 529
        results = []
        lock = threading.Lock()

        def hold():
            SRV.http("POST", "/v1/completions", {"prompt": "Once", "max_tokens": 400, "ignore_eos": True},
                     headers={"Authorization": "Bearer " + KEY})

        def msg():
            r = SRV.http("POST", "/v1/messages", {"max_tokens": 4, "messages": MSGS}, headers=HDR)
            with lock:
                results.append(r)

        holders = [threading.Thread(target=hold) for _ in range(8)]
        for t in holders:
            t.start()
        ms = [threading.Thread(target=msg) for _ in range(8)]
        for t in ms:
            t.start()
        for t in holders + ms:
            t.join(60)
        statuses = [r[0] for r in results]
        self.assertLessEqual(set(statuses), {200, 529}, statuses)
        self.assertIn(529, statuses)
        busy = [r for r in results if r[0] == 529][0]
        self.assertEqual(json.loads(busy[2])["error"]["type"], "overloaded_error")


if __name__ == "__main__":
    unittest.main(verbosity=2)
