"""test_store_cross.py - issue 8 acceptance 2: two servers run at the same time on one store
directory; B hits the prefix A wrote and A hits the one B wrote (cached_tokens from the store
tier, identical greedy outputs to the writer's). stories260K, 400-token prompts.
Run by tests/integration/store_cross.sh."""
import shutil
import tempfile
import unittest

from cinfer_server import Server
import store_util as su

N = 400
FULL = (N - 1) // su.BLOCK * su.BLOCK  # 384 tokens in full blocks before the last prompt token


class TestStoreCross(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cinfer-store-cross-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_two_live_servers_share(self):
        a = Server("--kv-store", self.dir)
        b = Server("--kv-store", self.dir)
        try:
            pa, pb = su.prompt_ids(101, N), su.prompt_ids(202, N)
            ra = su.complete(a, pa, max_tokens=12)
            rb = su.complete(b, pb, max_tokens=12)
            self.assertEqual((ra["cached"], rb["cached"]), (0, 0))
            self.assertGreaterEqual(su.wait_written(a, su.blocks(N, 12)), su.blocks(N, 12))
            self.assertGreaterEqual(su.wait_written(b, su.blocks(N, 12)), su.blocks(N, 12))
            b_on_a = su.complete(b, pa, max_tokens=12)  # B loads what A wrote
            a_on_b = su.complete(a, pb, max_tokens=12)  # and A what B wrote
            self.assertEqual(b_on_a["cached"], FULL)
            self.assertEqual(a_on_b["cached"], FULL)
            self.assertEqual(b_on_a["text"], ra["text"])
            self.assertEqual(a_on_b["text"], rb["text"])
            for srv in (a, b):
                m = srv.metrics()
                self.assertEqual(m['cinfer_cached_tokens_by_tier_total{tier="store"}'], FULL)
                self.assertEqual(m['cinfer_cached_tokens_by_tier_total{tier="memory"}'], 0)
                self.assertEqual(m["cinfer_kv_store_quarantined_total"], 0)
            # the same prompt again on B is now a memory hit, not a store load
            again = su.complete(b, pa, max_tokens=12)
            self.assertEqual(again["cached"], FULL)
            self.assertEqual(b.metrics()['cinfer_cached_tokens_by_tier_total{tier="memory"}'], FULL)
        finally:
            self.assertEqual(a.stop(), 0)
            self.assertEqual(b.stop(), 0)
        rc, out = su.cli("store", "stats", self.dir)
        print("\n" + out)
        self.assertEqual(rc, 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
