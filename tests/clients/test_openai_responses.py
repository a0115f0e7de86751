"""test_openai_responses.py - `cinfer serve`'s OpenAI Responses API (POST /v1/responses,
GET/DELETE /v1/responses/{id}) driven by the official openai Python SDK on the real
stories260K model: create, streaming (raw events and the SDK's stream helper),
previous_response_id continuation, store=false, the response store's count cap and TTL,
text.format (text echoed, JSON formats refused), and errors in OpenAI's shape (SDK exceptions and raw HTTP). Function tools
and reasoning: test_tool_calls.py. Run by tests/integration/serve_responses.sh."""
import json
import time
import unittest

import openai

from cinfer_server import MODEL_NAME, Server

KEY = "sk-resp-1"
SRV = None
CLIENT = None


def setUpModule():
    global SRV, CLIENT
    SRV = Server("--api-key", KEY)
    CLIENT = openai.OpenAI(base_url=SRV.url + "/v1", api_key=KEY, max_retries=0, timeout=60)


def tearDownModule():
    rc = SRV.stop()
    assert rc == 0, "server exit code %r\n%s" % (rc, SRV.log_text()[-3000:])


class TestResponses(unittest.TestCase):
    def test_create(self):
        r = CLIENT.responses.create(model=MODEL_NAME, input="Once upon a time", max_output_tokens=12,
                                    instructions="Tell a story.", temperature=0)
        self.assertTrue(r.id.startswith("resp_"))
        self.assertEqual(r.object, "response")
        self.assertEqual(r.status, "incomplete")
        self.assertEqual(r.incomplete_details.reason, "max_output_tokens")
        self.assertEqual(r.instructions, "Tell a story.")
        self.assertTrue(r.output_text)
        self.assertEqual(r.output[0].type, "message")
        self.assertEqual(r.usage.output_tokens, 12)
        self.assertGreater(r.usage.input_tokens, 5)
        again = CLIENT.responses.create(model=MODEL_NAME, input="Once upon a time", max_output_tokens=12,
                                        instructions="Tell a story.", temperature=0)
        self.assertEqual(again.output_text, r.output_text)

    def test_stream(self):
        events = list(CLIENT.responses.create(model=MODEL_NAME, input="Once upon a time", max_output_tokens=10,
                                              temperature=0, stream=True))
        types = [e.type for e in events]
        self.assertEqual(types[:2], ["response.created", "response.in_progress"])
        self.assertEqual(types[-1], "response.incomplete")
        self.assertEqual([e.sequence_number for e in events], list(range(len(events))))
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        final = events[-1].response
        self.assertEqual(final.output_text, text)
        ref = CLIENT.responses.create(model=MODEL_NAME, input="Once upon a time", max_output_tokens=10,
                                      temperature=0)
        self.assertEqual(ref.output_text, text)
        # the stream was stored too
        self.assertEqual(CLIENT.responses.retrieve(final.id).output_text, text)

    def test_stream_helper(self):
        # (get_final_response() needs response.completed: see test_tool_calls.py; at
        # max_output_tokens the stream ends with response.incomplete, as OpenAI's does)
        with CLIENT.responses.stream(model=MODEL_NAME, input="Once upon a time", max_output_tokens=8) as s:
            events = list(s)
        deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
        self.assertEqual(events[-1].type, "response.incomplete")
        self.assertEqual("".join(deltas), events[-1].response.output_text)
        self.assertEqual(events[-1].response.usage.output_tokens, 8)

    def test_previous_response_id(self):
        r1 = CLIENT.responses.create(model=MODEL_NAME, input="Once upon a time", max_output_tokens=8)
        r2 = CLIENT.responses.create(model=MODEL_NAME, input="What happened next?", max_output_tokens=8,
                                     previous_response_id=r1.id)
        self.assertEqual(r2.previous_response_id, r1.id)
        # the continuation's prompt holds the first turn and its answer
        self.assertGreater(r2.usage.input_tokens, r1.usage.input_tokens + r1.usage.output_tokens)
        r3 = CLIENT.responses.create(model=MODEL_NAME, input="And then?", max_output_tokens=4,
                                     previous_response_id=r2.id, stream=True)
        last = list(r3)[-1].response
        self.assertGreater(last.usage.input_tokens, r2.usage.input_tokens + r2.usage.output_tokens)

    def test_retrieve_delete_store_false(self):
        r = CLIENT.responses.create(model=MODEL_NAME, input="Once", max_output_tokens=4)
        got = CLIENT.responses.retrieve(r.id)
        self.assertEqual(got.id, r.id)
        self.assertEqual(got.output_text, r.output_text)
        CLIENT.responses.delete(r.id)
        with self.assertRaises(openai.NotFoundError):
            CLIENT.responses.retrieve(r.id)
        with self.assertRaises(openai.NotFoundError):
            CLIENT.responses.create(model=MODEL_NAME, input="x", max_output_tokens=2, previous_response_id=r.id)
        n = CLIENT.responses.create(model=MODEL_NAME, input="Once", max_output_tokens=4, store=False)
        self.assertFalse(n.store)
        with self.assertRaises(openai.NotFoundError):
            CLIENT.responses.retrieve(n.id)

    def test_text_format(self):
        r = CLIENT.responses.create(model=MODEL_NAME, input="Once", max_output_tokens=4,
                                    text={"format": {"type": "text"}})
        self.assertEqual(r.text.format.type, "text")
        # JSON formats are enforced (tests/clients/test_structured.py); echoed; an unenforceable schema is 400
        r = CLIENT.responses.create(model=MODEL_NAME, input="Once", max_output_tokens=64,
                                    text={"format": {"type": "json_schema", "name": "x", "schema": {"enum": [1, 2]}}})
        self.assertEqual(r.text.format.type, "json_schema")
        self.assertIn(json.loads(r.output_text), (1, 2))
        with self.assertRaises(openai.BadRequestError) as cm:
            CLIENT.responses.create(model=MODEL_NAME, input="Once", max_output_tokens=4, text={"format": {
                "type": "json_schema", "name": "x", "schema": {"type": "array", "uniqueItems": True}}})
        self.assertEqual(cm.exception.body.get("param"), "text.format.schema")

    def test_errors(self):
        with self.assertRaises(openai.BadRequestError):
            CLIENT.responses.create(model=MODEL_NAME, input="x", temperature=3)
        with self.assertRaises(openai.NotFoundError):
            CLIENT.responses.create(model="gpt-nope", input="x")
        with self.assertRaises(openai.AuthenticationError):
            openai.OpenAI(base_url=SRV.url + "/v1", api_key="bad", max_retries=0).responses.create(
                model=MODEL_NAME, input="x")
        auth = {"Authorization": "Bearer " + KEY}
        for body in (b"{oops", b"3", {"input": 5}, {"input": [{"type": "bogus"}]}):
            st, _, b = SRV.http("POST", "/v1/responses", body, headers=auth)
            self.assertEqual(st, 400, b)
            e = json.loads(b)["error"]
            self.assertEqual(e["type"], "invalid_request_error")
            self.assertIn("message", e)
        st, _, b = SRV.http("PUT", "/v1/responses/resp_x", b"{}", headers=auth)
        self.assertEqual(st, 405)


class TestResponseStoreLimits(unittest.TestCase):
    def test_count_cap_and_ttl(self):
        srv = Server("--response-store-max", "2", "--response-store-ttl", "1")
        try:
            c = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0)
            ids = [c.responses.create(model=MODEL_NAME, input="Once", max_output_tokens=2).id for _ in range(3)]
            with self.assertRaises(openai.NotFoundError):  # least recently used, evicted
                c.responses.retrieve(ids[0])
            c.responses.retrieve(ids[2])
            time.sleep(1.3)
            with self.assertRaises(openai.NotFoundError):  # expired
                c.responses.retrieve(ids[2])
        finally:
            self.assertEqual(srv.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
