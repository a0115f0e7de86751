"""test_store_restart.py - issue 8 acceptance 1: a 2,000-token prompt computed by server A
(killed with SIGKILL once its write-back is done) is answered by server B on the same store
with cached_tokens >= 1,984, the identical greedy output, and a TTFT far below the cold one
(asserted loosely: <= 1/2; the ratio is printed). The model is a small random llama with a
4096 context made by `cinfer mkmodel` at test time, so the 2,000-token prefill is long enough
to measure. Run by tests/integration/store_restart.sh."""
import os
import re
import shutil
import signal
import tempfile
import time
import unittest

from cinfer_server import KV_DTYPE, Server
import store_util as su


def server_ttft(srv, rid_count):
    """TTFT of the rid_count-th completion logged by the server (its own clock, seconds). The
    server logs a request just after its response ends, so this waits for the line."""
    deadline = time.time() + 10
    while True:
        ttfts = re.findall(r"POST /v1/completions status=200 .*? ttft=([0-9.]+)s", srv.log_text())
        if len(ttfts) >= rid_count:
            return float(ttfts[rid_count - 1])
        if time.time() > deadline:
            raise AssertionError("request %d not logged: %s" % (rid_count, srv.log_text()[-2000:]))
        time.sleep(0.02)


class TestStoreRestart(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="cinfer-store-restart-")
        cls.model = su.mkmodel(os.path.join(cls.tmp, "m4k.gguf"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_restart_reuses_prefix(self):
        store = os.path.join(self.tmp, "store")
        ids = su.prompt_ids(2026, 2000)
        a = Server("--kv-store", store, model=self.model, ctx=4096)
        try:
            su.complete(a, su.prompt_ids(7, 20), model="m4k")  # warm-up: another prefix (not timed)
            cold = su.complete(a, ids, max_tokens=16, model="m4k")
            self.assertEqual(cold["cached"], 0)
            self.assertEqual(cold["prompt_tokens"], 2000)
            n = su.blocks(20, 8) + su.blocks(2000, 16)  # warm-up + the prompt's 125 blocks
            self.assertGreaterEqual(su.wait_written(a, n), n)
            cold_server = server_ttft(a, 2)
        finally:
            self.assertEqual(a.stop(sig=signal.SIGKILL), -signal.SIGKILL)  # no clean shutdown
        b = Server("--kv-store", store, model=self.model, ctx=4096)
        try:
            su.complete(b, su.prompt_ids(8, 20), model="m4k")  # warm-up, another prefix
            warm = su.complete(b, ids, max_tokens=16, model="m4k")
            warm_server = server_ttft(b, 2)
            m = b.metrics()
        finally:
            self.assertEqual(b.stop(), 0)
        print("\nrestart: cold TTFT %.3fs (server %.3fs), from store %.3fs (server %.3fs): ratio %.3f (server %.3f)"
              % (cold["ttft"], cold_server, warm["ttft"], warm_server, warm["ttft"] / cold["ttft"],
                 warm_server / cold_server))
        diag = {k: v for k, v in m.items() if k.startswith("cinfer_kv_store") and "bucket" not in k}
        self.assertGreaterEqual(warm["cached"], 1984, "%s\n%s" % (diag, b.log_text()[-3000:]))
        self.assertEqual(warm["text"], cold["text"])
        self.assertGreaterEqual(m["cinfer_kv_store_hit_blocks_total"], 124)
        self.assertGreaterEqual(m['cinfer_cached_tokens_by_tier_total{tier="store"}'], 1984)
        self.assertGreater(m["cinfer_kv_store_load_latency_seconds_count"], 0)
        self.assertEqual(m["cinfer_kv_store_quarantined_total"], 0)
        self.assertLessEqual(warm_server, cold_server / 2, "a store hit should be far faster than recompute")
        self.assertLessEqual(warm["ttft"], cold["ttft"] / 2)

    def test_other_kv_dtype_misses(self):
        """A store written by a server with one --kv-dtype is never hit by a server with another (the type is part
        of the store's fingerprint: the objects are not even looked at), and is hit again by the first type."""
        store = os.path.join(self.tmp, "store-dtype")
        ids = su.prompt_ids(4242, 300)
        mine = KV_DTYPE or "f32"
        other = "bf16" if mine == "f16" else "f16"
        a = Server("--kv-store", store, "--kv-dtype", mine, model=self.model, ctx=4096)
        try:
            first = su.complete(a, ids, max_tokens=4, model="m4k")
            n = su.blocks(300, 4)
            self.assertGreaterEqual(su.wait_written(a, n), n)
        finally:
            self.assertEqual(a.stop(), 0)
        b = Server("--kv-store", store, "--kv-dtype", other, model=self.model, ctx=4096)
        try:
            miss = su.complete(b, ids, max_tokens=4, model="m4k")
            mb = b.metrics()
        finally:
            self.assertEqual(b.stop(), 0)
        self.assertEqual(miss["cached"], 0, "a %s server used blocks a %s server wrote" % (other, mine))
        self.assertEqual(mb["cinfer_kv_store_hit_blocks_total"], 0)
        c = Server("--kv-store", store, "--kv-dtype", mine, model=self.model, ctx=4096)
        try:
            hit = su.complete(c, ids, max_tokens=4, model="m4k")
        finally:
            self.assertEqual(c.stop(), 0)
        self.assertGreaterEqual(hit["cached"], 288)
        self.assertEqual(hit["text"], first["text"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
