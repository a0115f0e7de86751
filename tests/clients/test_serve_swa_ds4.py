"""test_serve_swa_ds4.py - `cinfer serve` on an mkmodel deepseek4 (window 16, CSA + HCA layers,
128-token blocks): with no window-state tier and no --swa-replay flag, a repeated prompt is
resumed by bounded replay, the default for a model trained for it (kv_spec.bounded_replay): usage
reports cached + replayed tokens (replayed = the 128-token ring window) and the replay counters
move; cinfer.swa_replay false is exact (nothing cached or replayed); --swa-replay off restores
exact resumption for every request. Run by tests/integration/serve_swa_ds4.sh."""
import json
import os
import re
import subprocess
import tempfile
import unittest

from cinfer_server import BIN, MODEL, Server

PROMPT = " ".join("word%d" % (i % 50) for i in range(110))


def metric(text, name):
    m = re.search(r'^%s\{[^}]*\} (\d+)' % name, text, re.M)
    return int(m.group(1)) if m else None


class TestServeSwaDs4(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = os.path.join(cls.tmp.name, "ds4.gguf")
        subprocess.run([BIN, "mkmodel", "--arch", "deepseek4", "--dim", "64", "--layers", "3", "--heads", "4",
                        "--ffn", "64", "--head-dim", "64", "--qk-rope", "16", "--q-lora", "32", "--o-groups", "2",
                        "--o-lora", "32", "--ratios", "0,4,128", "--window", "16", "--index-heads", "8",
                        "--index-dim", "64", "--index-topk", "6", "--experts", "8", "--experts-used", "2",
                        "--expert-ffn", "32", "--ctx", "1024", "--vocab-from", MODEL, "--dtype", "f32", "--seed",
                        "3", cls.model], check=True, capture_output=True)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def complete(self, srv, extra=None):
        body = {"prompt": PROMPT, "max_tokens": 3, "temperature": 0}
        body.update(extra or {})
        st, _, b = srv.http("POST", "/v1/completions", body)
        self.assertEqual(st, 200, b)
        return json.loads(b)["usage"]

    def test_bounded_replay_is_the_default(self):
        srv = Server("--swa-state-memory", "0", model=self.model, ctx=1024)
        try:
            first = self.complete(srv)
            self.assertEqual(first["prompt_tokens_details"]["cached_tokens"], 0)
            again = self.complete(srv)
            d = again["prompt_tokens_details"]
            self.assertEqual(d.get("replayed_tokens", 0), 128, again)
            self.assertGreater(d["cached_tokens"], 0, again)
            self.assertEqual((d["cached_tokens"] + d["replayed_tokens"]) % 128, 0, again)
            exact = self.complete(srv, {"cinfer": {"swa_replay": False}})
            self.assertEqual(exact["prompt_tokens_details"]["cached_tokens"], 0, exact)
            self.assertNotIn("replayed_tokens", exact["prompt_tokens_details"])
            text = srv.http("GET", "/metrics")[2].decode()
        finally:
            self.assertEqual(srv.stop(), 0)
        self.assertEqual(metric(text, "cinfer_swa_replays_total"), 1)
        self.assertEqual(metric(text, "cinfer_swa_replayed_tokens_total"), 128)

    def test_replay_off(self):
        srv = Server("--swa-state-memory", "0", "--swa-replay", "off", model=self.model, ctx=1024)
        try:
            self.complete(srv)
            again = self.complete(srv)
        finally:
            self.assertEqual(srv.stop(), 0)
        self.assertEqual(again["prompt_tokens_details"]["cached_tokens"], 0, again)
        self.assertNotIn("replayed_tokens", again["prompt_tokens_details"])


if __name__ == "__main__":
    unittest.main()
