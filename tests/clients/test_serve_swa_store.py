"""test_serve_swa_store.py - issue 16 with the persistent store, on tiny-gemma2 (sliding-window layers,
window 32, block 16): a session returns to a restarted server.
- restart + bounded replay: server A (--kv-store) answers a prompt and is killed (SIGKILL) once its
  write-back is done; server B on the same store (--swa-replay on) serves the returning session (the
  prompt plus a new turn) with the long-lived blocks from the store plus a replay of the window
  (usage: cached_tokens > 0, replayed_tokens >= 32, cached + replayed + computed = prompt) and
  answers; `cinfer.swa_replay: false` on B is exact (nothing cached, nothing replayed);
- restart + stored snapshot (--retention swa=10m): the window state at the blocks' end comes from
  the store: an exact resume (cached, nothing replayed, cinfer_swa_store_hits_total), with the
  greedy output identical to a server without any cache; after the snapshot objects are corrupted,
  the next restart refuses them (no hit) and replays instead.
Run by tests/integration/serve_swa_store.sh."""
import json
import os
import shutil
import signal
import tempfile
import time
import unittest

import fixtures
from cinfer_server import SHARED, Server

MODEL = os.path.join(SHARED, "models", "tiny", "tiny-gemma2.gguf")
fixtures.require(MODEL, "model")
PROMPT = " ".join("the quick brown fox number %d jumps over the lazy dog" % i for i in range(12))
TURN2 = PROMPT + " and then the fox ran home to sleep until the morning came"


def complete(srv, prompt, extra=None):
    body = {"prompt": prompt, "max_tokens": 6, "temperature": 0, "ignore_eos": True}
    body.update(extra or {})
    st, _, b = srv.http("POST", "/v1/completions", body)
    assert st == 200, b
    r = json.loads(b)
    return r["choices"][0]["text"], r["usage"]


def wait_for(srv, names, n, timeout=30):
    deadline = time.time() + timeout
    while True:
        m = srv.metrics()
        got = sum(m.get(k, 0) for k in names)
        if got >= n or time.time() > deadline:
            return got
        time.sleep(0.05)


def swa_objects(store):
    out = []
    for root, _, files in os.walk(os.path.join(store, "swa", "objects")):
        out += [os.path.join(root, f) for f in files if ".tmp." not in f]
    return out


class TestServeSwaStore(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="cinfer-swa-store-")
        self.store = os.path.join(self.tmp, "store")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def first_turn(self, *args, sig=signal.SIGKILL):
        a = Server("--kv-store", self.store, *args, model=MODEL, ctx=512)
        try:
            _, u = complete(a, PROMPT)
            n = (u["prompt_tokens"] + 6 - 1) // 16
            written = wait_for(a, ["cinfer_kv_store_objects_written_total", "cinfer_kv_store_writes_skipped_total"], n)
            self.assertGreaterEqual(written, n)
        finally:
            a.stop(sig=sig)
        return u

    def test_restart_bounded_replay(self):
        self.first_turn()
        b = Server("--kv-store", self.store, "--swa-replay", "on", model=MODEL, ctx=512)
        try:
            text, u = complete(b, TURN2)
            exact_text, exact = complete(b, TURN2 + " again", {"cinfer": {"swa_replay": False}})
            m = b.metrics()
        finally:
            self.assertEqual(b.stop(), 0)
        d = u["prompt_tokens_details"]
        self.assertGreater(d["cached_tokens"], 0, (u, m))
        self.assertGreaterEqual(d.get("replayed_tokens", 0), 32, u)
        self.assertLessEqual(d["replayed_tokens"], 32 + 15, u)  # W rounded down to a block boundary
        self.assertLess(d["cached_tokens"] + d["replayed_tokens"], u["prompt_tokens"])
        self.assertTrue(text)
        self.assertEqual(u["completion_tokens"], 6)
        self.assertGreater(m["cinfer_kv_store_hit_blocks_total"], 0)
        self.assertGreaterEqual(m["cinfer_swa_replays_total"], 1)
        self.assertGreaterEqual(m["cinfer_swa_replayed_tokens_total"], 32)
        self.assertEqual(exact["prompt_tokens_details"]["cached_tokens"], 0, exact)
        self.assertNotIn("replayed_tokens", exact["prompt_tokens_details"])
        self.assertTrue(exact_text)

    def test_restart_stored_snapshot(self):
        self.first_turn("--retention", "swa=10m", sig=signal.SIGTERM)  # a clean stop finishes queued writes
        self.assertTrue(swa_objects(self.store), "no window-state snapshot was stored")
        b = Server("--kv-store", self.store, "--retention", "swa=10m", "--swa-replay", "on", model=MODEL, ctx=512)
        try:
            text, u = complete(b, TURN2)
            m = b.metrics()
        finally:
            self.assertEqual(b.stop(), 0)
        self.assertGreater(u["prompt_tokens_details"]["cached_tokens"], 32, (u, m))
        self.assertNotIn("replayed_tokens", u["prompt_tokens_details"])
        self.assertGreaterEqual(m["cinfer_swa_store_hits_total"], 1)
        self.assertEqual(m["cinfer_swa_replays_total"], 0)
        ref = Server("--swa-state-memory", "0", model=MODEL, ctx=512)  # no cache at all
        try:
            ref_text, ref_u = complete(ref, TURN2)
        finally:
            self.assertEqual(ref.stop(), 0)
        self.assertEqual(ref_u["prompt_tokens_details"]["cached_tokens"], 0)
        self.assertEqual(text, ref_text, "an exact resume must match a run without cache")
        for path in swa_objects(self.store):  # flip bytes inside every snapshot's payload
            with open(path, "r+b") as f:
                f.seek(os.path.getsize(path) // 2)
                f.write(b"\xff\xff\xff\xff")
        c = Server("--kv-store", self.store, "--retention", "swa=10m", "--swa-replay", "on", model=MODEL, ctx=512)
        try:
            _, u = complete(c, TURN2 + " twice")
            m = c.metrics()
        finally:
            self.assertEqual(c.stop(), 0)
        self.assertEqual(m["cinfer_swa_store_hits_total"], 0)
        self.assertGreaterEqual(u["prompt_tokens_details"].get("replayed_tokens", 0), 32, u)


if __name__ == "__main__":
    unittest.main()
