"""test_serve_swa.py - `cinfer serve` on tiny-gemma2 (sliding-window layers, window 32): prefix hits
through the window-state tier and bounded replay, as the three APIs report them.
- tier off (--swa-state-memory 0), --swa-replay on: a repeated prompt is resumed by bounded replay: usage splits the
  prompt into cached + replayed + computed (Chat/Completions prompt_tokens_details.replayed_tokens,
  Responses input_tokens_details.replayed_tokens, Messages cinfer_replayed_input_tokens) and the
  replay counters move; cinfer.swa_replay false is exact (nothing cached or replayed); a
  non-boolean swa_replay is a 400;
- tier on (default): the repeated prompt resumes exactly from a snapshot (cached, nothing replayed).
Run by tests/integration/serve_swa.sh."""
import json
import os
import re
import unittest

import fixtures
from cinfer_server import SHARED, Server

MODEL = os.path.join(SHARED, "models", "tiny", "tiny-gemma2.gguf")
fixtures.require(MODEL, "model")
PROMPT = " ".join("the quick brown fox number %d jumps over the lazy dog" % i for i in range(12))


def metric(text, name):
    m = re.search(r'^%s\{[^}]*\} (\d+)' % name, text, re.M)
    return int(m.group(1)) if m else None


class TestServeSwa(unittest.TestCase):
    def complete(self, srv, extra=None):
        body = {"prompt": PROMPT, "max_tokens": 3, "temperature": 0}
        body.update(extra or {})
        st, _, b = srv.http("POST", "/v1/completions", body)
        self.assertEqual(st, 200, b)
        return json.loads(b)["usage"]

    def test_replay_without_tier(self):
        srv = Server("--swa-state-memory", "0", "--swa-replay", "on", model=MODEL, ctx=512)
        try:
            first = self.complete(srv)
            self.assertEqual(first["prompt_tokens_details"]["cached_tokens"], 0)
            again = self.complete(srv)
            d = again["prompt_tokens_details"]
            self.assertGreaterEqual(d.get("replayed_tokens", 0), 32, again)
            self.assertGreater(d["cached_tokens"], 0, again)
            self.assertLess(d["cached_tokens"] + d["replayed_tokens"], again["prompt_tokens"])
            exact = self.complete(srv, {"cinfer": {"swa_replay": False}})
            self.assertEqual(exact["prompt_tokens_details"]["cached_tokens"], 0, exact)
            self.assertNotIn("replayed_tokens", exact["prompt_tokens_details"])
            st, _, b = srv.http("POST", "/v1/completions",
                                {"prompt": PROMPT, "max_tokens": 1, "cinfer": {"swa_replay": "no"}})
            self.assertEqual(st, 400, b)
            self.assertIn("swa_replay", b.decode())
            msgs = [{"role": "user", "content": PROMPT}]
            for path, body, key in (
                    ("/v1/chat/completions", {"messages": msgs}, None),
                    ("/v1/messages", {"messages": msgs}, "cinfer_replayed_input_tokens"),
                    ("/v1/responses", {"input": PROMPT}, None)):
                body = dict(body, max_tokens=2, temperature=0) if path != "/v1/responses" else \
                    dict(body, max_output_tokens=2, temperature=0)
                usages = []
                for _ in range(2):
                    st, _, b = srv.http("POST", path, body)
                    self.assertEqual(st, 200, (path, b))
                    usages.append(json.loads(b)["usage"])
                u = usages[1]
                if path == "/v1/chat/completions":
                    got = u["prompt_tokens_details"].get("replayed_tokens", 0)
                elif path == "/v1/responses":
                    got = u["input_tokens_details"].get("replayed_tokens", 0)
                else:
                    got = u.get(key, 0)
                    self.assertGreaterEqual(u["input_tokens"], got)
                self.assertGreaterEqual(got, 32, (path, usages))
            text = srv.http("GET", "/metrics")[2].decode()
        finally:
            self.assertEqual(srv.stop(), 0)
        self.assertGreaterEqual(metric(text, "cinfer_swa_replays_total"), 4)
        self.assertGreaterEqual(metric(text, "cinfer_swa_replayed_tokens_total"), 4 * 32)
        self.assertEqual(metric(text, "cinfer_swa_state_hits_total"), 0)

    def test_exact_resume_with_tier(self):
        srv = Server(model=MODEL, ctx=512)
        try:
            self.complete(srv)
            again = self.complete(srv)
            text = srv.http("GET", "/metrics")[2].decode()
        finally:
            self.assertEqual(srv.stop(), 0)
        self.assertGreater(again["prompt_tokens_details"]["cached_tokens"], 32, again)
        self.assertNotIn("replayed_tokens", again["prompt_tokens_details"])
        self.assertGreaterEqual(metric(text, "cinfer_swa_state_hits_total"), 1)
        self.assertGreater(metric(text, "cinfer_swa_state_bytes"), 0)
        self.assertEqual(metric(text, "cinfer_swa_replays_total"), 0)


if __name__ == "__main__":
    unittest.main()
