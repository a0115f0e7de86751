"""test_pd_window.py - window state in the prefill/decode handoff (docs/pd.md "Window state", issue 19) on
loopback: a prefill worker P, a decode worker D and a monolithic server M on tiny-gemma2 (sliding-window
layers, blocks of 16) and on an mkmodel deepseek4 (window latents + compressor inputs on the ring, blocks
of 128). Greedy outputs through P + D equal M's for Chat, Messages and Responses, streamed and not; P's
answer reports the window snapshot it sent ("window_bytes" > 0); D reports the handed-off blocks as cached,
installs the snapshot (cinfer_handoff_window_imported_bytes_total grows by exactly window_bytes), resumes
exactly (no bounded replay, no window-state refusal), and every byte sent (records + snapshot) landed in its
receive-buffer pool, given back afterwards. Fallback: a decode worker with no window-state tier
(--swa-state-memory 0) refuses the window (BEGIN announces a size it cannot take) and computes the prompt:
output still equal, nothing cached. Run by tests/integration/pd_loopback.sh."""
import os
import subprocess
import tempfile
import unittest

from cinfer_server import BIN, MODEL as STORIES, SHARED, Server
import fixtures
import pd_client as pc

GEMMA = os.path.join(SHARED, "models", "tiny", "tiny-gemma2.gguf")
fixtures.require(GEMMA, "model")


def bodies(model, text):
    """The three APIs' requests for one long user text (greedy, 12 tokens)."""
    return {"chat": {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": 12,
                     "temperature": 0},
            "messages": {"model": model, "max_tokens": 12, "temperature": 0,
                         "messages": [{"role": "user", "content": text}]},
            "responses": {"model": model, "input": text, "max_output_tokens": 12, "temperature": 0}}


class WindowChecks:
    """The checks on one model's P, D and M (servers with .url and .metrics(); a subclass sets NAME,
    BLOCK, TEXT, LINK and starts them)."""
    ctx = 1024

    def metric(self, srv, name):
        return srv.metrics().get(name, 0)

    def received(self):
        m = self.D.metrics()
        return sum(m['cinfer_handoff_received_bytes_total{path="%s"}' % k] for k in ("placed", "copied"))

    def check(self, api, stream):
        body = bodies(self.NAME, self.TEXT)[api]
        ref, _ = pc.generate(self.M.url, api, body, stream)
        names = ("cinfer_handoff_window_imported_bytes_total", "cinfer_handoff_window_rejected_total",
                 "cinfer_swa_replays_total")
        before = {n: self.metric(self.D, n) for n in names}
        moved0 = self.received()
        ans, text, cached = pc.disaggregated(self.P.url, self.D.url, api, body, stream)
        self.assertEqual(text, ref)
        self.assertEqual((ans["transport"], ans["link"]), ("ucx", self.LINK), ans)
        self.assertGreater(ans["window_bytes"], 0, ans)
        full = (ans["prompt_tokens"] - 1) // self.BLOCK * self.BLOCK
        self.assertGreater(full, 0)
        self.assertEqual(cached, full)  # the handed-off blocks, resumed exactly
        m = self.D.metrics()
        self.assertEqual(m[names[0]] - before[names[0]], ans["window_bytes"])
        self.assertEqual(m[names[1]], before[names[1]])
        self.assertEqual(m[names[2]], before[names[2]])  # no bounded replay
        self.assertEqual(self.received() - moved0, ans["bytes"] + ans["window_bytes"])
        self.assertEqual(m['cinfer_handoff_pool_bytes{state="used"}'], 0)
        return ans

    def test_chat(self):
        for stream in (False, True):
            self.check("chat", stream)

    def test_messages(self):
        for stream in (False, True):
            self.check("messages", stream)

    def test_responses(self):
        for stream in (False, True):
            ans = self.check("responses", stream)
        self.assertGreater(self.metric(self.P, "cinfer_handoff_window_exported_bytes_total"), ans["window_bytes"])


class WindowHandoff(WindowChecks):
    """P, D and M on loopback (shared memory between P and D), and a D without window state."""
    LINK = "shm"

    @classmethod
    def setUpClass(cls):
        args = dict(model=cls.model_path(), ctx=cls.ctx)
        cls.P = Server("--role", "prefill", "--handoff-timeout", "30", **args)
        cls.D = Server("--role", "decode", "--handoff-timeout", "30", **args)
        cls.M = Server(**args)

    @classmethod
    def tearDownClass(cls):
        for s in (cls.P, cls.D, cls.M):
            rc = s.stop()
            assert rc == 0, "exit %r\n%s" % (rc, s.log_text()[-3000:])

    def test_receiver_without_window_state(self):
        body = bodies(self.NAME, "another text " + self.TEXT)["chat"]
        ref, _ = pc.generate(self.M.url, "chat", body, False)
        D0 = Server("--role", "decode", "--handoff-timeout", "30", "--swa-state-memory", "0",
                    model=self.model_path(), ctx=self.ctx)
        try:
            ans, text, cached = pc.disaggregated(self.P.url, D0.url, "chat", body, False)
            self.assertEqual(text, ref)
            self.assertEqual(cached, 0)  # computed: its records without window state cannot resume
            self.assertEqual(self.metric(D0, "cinfer_handoff_imported_blocks_total"), 0)
        finally:
            self.assertEqual(D0.stop(), 0)


class TestGemma2(WindowHandoff, unittest.TestCase):
    NAME, BLOCK = "tiny-gemma2", 16
    TEXT = " ".join("the quick brown fox number %d jumps over the lazy dog" % i for i in range(10))

    @classmethod
    def model_path(cls):
        return GEMMA


class TestDeepseek4(WindowHandoff, unittest.TestCase):
    NAME, BLOCK = "ds4", 128
    TEXT = " ".join("word%d" % (i % 50) for i in range(200))

    @classmethod
    def model_path(cls):
        if not getattr(cls, "_path", None):
            cls._tmp = tempfile.TemporaryDirectory()
            cls._path = os.path.join(cls._tmp.name, "ds4.gguf")
            subprocess.run([BIN, "mkmodel", "--arch", "deepseek4", "--dim", "64", "--layers", "3", "--heads", "4",
                            "--ffn", "64", "--head-dim", "64", "--qk-rope", "16", "--q-lora", "32", "--o-groups",
                            "2", "--o-lora", "32", "--ratios", "0,4,128", "--window", "16", "--index-heads", "8",
                            "--index-dim", "64", "--index-topk", "6", "--experts", "8", "--experts-used", "2",
                            "--expert-ffn", "32", "--ctx", "1024", "--vocab-from", STORIES, "--dtype", "f32",
                            "--seed", "3", cls._path], check=True, capture_output=True)
        return cls._path


if __name__ == "__main__":
    unittest.main()
