"""test_pd_netns.py - run by tests/integration/pd_netns.sh: a prefill worker (PD_P) and a decode
worker (PD_D) in separate network namespaces sharing one store directory, UCX over TCP between
them; a monolithic server (started here, loopback) is the reference. Greedy outputs through the
handoff equal the monolithic ones for Chat, Messages and Responses, streamed and not, including
a prefix-cache hit; with the UCX path cut (PD_CUT: a blackhole route in P's namespace) P answers
"transport": "store" and D serves the same text from the shared store; mended (PD_MEND), UCX
again; the router (PD_R, PD mode over this P and D) gives the monolithic outputs for all three
APIs, streamed and not, with the decode worker reporting the handed-off tokens as cached."""
import json
import os
import subprocess
import time
import unittest
import urllib.request

from cinfer_server import Server
import pd_client as pc

P, D, R = os.environ.get("PD_P"), os.environ.get("PD_D"), os.environ.get("PD_R")
BLOCK = 16
M = None


def setUpModule():
    global M
    if not P or not D:
        raise unittest.SkipTest("run by tests/integration/pd_netns.sh (PD_P / PD_D unset)")
    M = Server()


def tearDownModule():
    if M:
        assert M.stop() == 0


def metric(url, name):
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


class TestPDNetns(unittest.TestCase):
    def check(self, api, body, stream, transport="ucx", tier=None):
        ref, _ = pc.generate(M.url, api, body, stream)
        ans, text, cached = pc.disaggregated(P, D, api, body, stream)
        self.assertEqual(text, ref)
        self.assertEqual(ans["transport"], transport)
        self.assertEqual(cached, (ans["prompt_tokens"] - 1) // BLOCK * BLOCK)
        return ans

    def test_1_all_apis(self):
        with urllib.request.urlopen(D + "/handoff/info", timeout=10) as r:
            self.assertTrue(json.loads(r.read())["listen"].startswith("10.77.0.13:"))
        for api, body in (("chat", pc.CHAT), ("messages", pc.MESSAGES), ("responses", pc.RESPONSES)):
            for stream in (False, True):
                with self.subTest(api=api, stream=stream):
                    self.check(api, body, stream)

    def test_2_prefix_hit(self):
        body = dict(pc.CHAT, messages=[{"role": "user", "content": "Tom found a shiny stone " * 18}])
        self.assertEqual(self.check("chat", body, False)["cached_tokens"], 0)
        again = self.check("chat", body, True)
        self.assertEqual(again["cached_tokens"], (again["prompt_tokens"] - 1) // BLOCK * BLOCK)

    def test_3_ucx_cut_store_fallback(self):
        store_before = metric(D, "cinfer_cached_tokens_store_total")
        subprocess.run(os.environ["PD_CUT"], shell=True, check=True)
        try:
            chat = dict(pc.CHAT, messages=[{"role": "user", "content": "The cut wire hummed " * 16}])
            msgs = dict(pc.MESSAGES, messages=[{"role": "user", "content": "No road to the hill " * 16}])
            for api, body in (("chat", chat), ("messages", msgs)):  # new prompts: nothing cached on D
                t0 = time.time()
                self.check(api, body, True, transport="store")
                self.assertLess(time.time() - t0, 30)
        finally:
            subprocess.run(os.environ["PD_MEND"], shell=True, check=True)
        self.assertGreater(metric(D, "cinfer_cached_tokens_store_total"), store_before)
        body = dict(pc.CHAT, messages=[{"role": "user", "content": "After the fix the bird flew " * 14}])
        self.check("chat", body, False)  # the path works again: "ucx"

    def test_4_router_1p_1d(self):
        if not R:
            self.skipTest("no router (PD_R unset)")
        imported = metric(D, "cinfer_handoff_imported_blocks_total")
        for api, body in (("chat", pc.CHAT), ("messages", pc.MESSAGES), ("responses", pc.RESPONSES)):
            body = json.loads(json.dumps(body).replace("story", "tale"))  # new prompts
            for stream in (False, True):
                with self.subTest(api=api, stream=stream):
                    ref, _ = pc.generate(M.url, api, body, stream)
                    text, cached = pc.generate(R, api, body, stream)
                    self.assertEqual(text, ref)
                    self.assertGreater(cached, 0)  # prefilled on P, handed to D
        self.assertGreater(metric(D, "cinfer_handoff_imported_blocks_total"), imported)


if __name__ == "__main__":
    unittest.main(verbosity=2)
