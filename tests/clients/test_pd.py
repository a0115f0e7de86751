"""test_pd.py - disaggregated prefill/decode on loopback (docs/pd.md, issue 19): a prefill worker P,
a decode worker D (both --role, one shared store directory) and a monolithic server M, stories260K.
Greedy outputs through P + D equal M's for Chat, Messages and Responses, streamed and not, with the
handed-off tokens reported as cached by D; a prefix-cache hit on P; step 2 sent before step 1 ends;
a missing handoff is served anyway; the handoff goes through shared memory ("link": "shm"); every byte
sent lands in D's receive-buffer pool (placed or copied, /metrics) and is given back by the engine
after the import (pool use 0 again); a pool that holds one handoff but not two makes the second wait
(back-pressure, no error) until step 2 of the first gives its buffer back, and refuses one larger
than itself (computed instead); a decode
worker SIGKILLed mid-stream gives the client an error (no hang) and P, whose shared-memory endpoint
cannot report the dead peer, notices D's process is gone and answers through the store well before
its handoff timeout; through the router with the two steps overlapped, outputs equal M's, and with P
SIGKILLed D serves alone without waiting out its handoff timeout. Run by
tests/integration/pd_loopback.sh."""
import shutil
import signal
import tempfile
import time
import unittest

import httpx

from cinfer_router import Router
from cinfer_server import Server
import pd_client as pc

BLOCK = 16


class TestPD(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="cinfer-pd-")
        cls.P = Server("--role", "prefill", "--kv-store", cls.dir, "--handoff-timeout", "30")
        cls.D = Server("--role", "decode", "--kv-store", cls.dir, "--handoff-timeout", "10")
        cls.M = Server()

    @classmethod
    def tearDownClass(cls):
        for s in (cls.P, cls.D, cls.M):
            rc = s.stop()
            assert rc == 0, "exit %r\n%s" % (rc, s.log_text()[-3000:])
        shutil.rmtree(cls.dir, ignore_errors=True)

    def received(self):
        m = self.D.metrics()
        return {k: m['cinfer_handoff_received_bytes_total{path="%s"}' % k] for k in ("placed", "copied")}, m

    def check(self, api, body, stream, concurrent=False):
        ref, _ = pc.generate(self.M.url, api, body, stream)
        before, _ = self.received()
        ans, text, cached = pc.disaggregated(self.P.url, self.D.url, api, body, stream, concurrent)
        self.assertEqual(text, ref)
        after, m = self.received()
        # every record byte P sent landed in a receive buffer of D's pool (placed by UCX or copied
        # out of an eager message), and the engine gave the buffer back once it had imported it
        moved = sum(after.values()) - sum(before.values())
        self.assertEqual(moved, ans["bytes"])
        self.assertEqual(m['cinfer_handoff_pool_bytes{state="used"}'], 0)
        self.assertGreaterEqual(m['cinfer_handoff_pool_bytes{state="high_water"}'], ans["bytes"])
        self.assertEqual(ans["transport"], "ucx")
        self.assertEqual(ans["link"], "shm")  # one host: shared memory (no UCX peer-failure detection)
        full = (ans["prompt_tokens"] - 1) // BLOCK * BLOCK
        self.assertGreater(full, 0)
        self.assertEqual(cached, full)  # the handed-off blocks, as cached tokens
        self.assertEqual(ans["bytes"] % (full // BLOCK), 0)
        return ans

    def test_chat(self):
        for stream in (False, True):
            self.check("chat", pc.CHAT, stream)

    def test_messages(self):
        for stream in (False, True):
            self.check("messages", pc.MESSAGES, stream)

    def test_responses(self):
        for stream in (False, True):
            self.check("responses", pc.RESPONSES, stream)

    def test_step2_first(self):
        body = dict(pc.CHAT, messages=[{"role": "user", "content": "Sam had a red ball " * 20}])
        self.check("chat", body, True, concurrent=True)

    def test_prefix_hit_on_prefill(self):
        body = dict(pc.CHAT, messages=[{"role": "user", "content": "Lily went to the park " * 20}])
        first = self.check("chat", body, False)
        self.assertEqual(first["cached_tokens"], 0)
        before = self.D.metrics()["cinfer_handoff_imported_blocks_total"]
        again = self.check("chat", body, False)  # P hits its own cache; D gets the blocks again
        self.assertEqual(again["cached_tokens"], (again["prompt_tokens"] - 1) // BLOCK * BLOCK)
        self.assertGreaterEqual(self.D.metrics()["cinfer_handoff_imported_blocks_total"], before)

    def test_missing_handoff_is_served(self):
        body = dict(pc.CHAT, messages=[{"role": "user", "content": "Nobody prefilled this " * 10}])
        ref, _ = pc.generate(self.M.url, "chat", body, False)
        t0 = time.time()
        text, _ = pc.generate(self.D.url, "chat", body, False, hid=pc.new_id())
        self.assertEqual(text, ref)
        self.assertLess(time.time() - t0, 30)

    def test_bad_headers(self):
        st, ans = pc.step1(self.P.url, "ftp://x", "chat", pc.CHAT, pc.new_id())
        self.assertEqual(st, 400)
        self.assertIn("X-Cinfer-Handoff-To", ans["error"]["message"])
        st, ans = pc.step1(self.P.url, self.D.url, "chat", pc.CHAT, "nothex")
        self.assertEqual(st, 400)
        st, _ = pc.step1(self.D.url, self.D.url, "chat", pc.CHAT, pc.new_id())  # D does not prefill
        self.assertEqual(st, 400)
        self.assertEqual(self.P.http("GET", "/handoff/info")[0], 404)  # P takes no handoffs


    def test_pool_back_pressure(self):
        """A decode worker whose receive-buffer pool holds one handoff but not two: the second
        handoff waits for the first one's buffer (back-pressure), which the engine gives back once
        step 2 of the first imported it; then it completes over UCX. Both outputs equal M's; nothing
        fails. A handoff larger than the whole pool is refused: computed, output still equal."""
        import threading
        a = dict(pc.CHAT, messages=[{"role": "user", "content": "Tom saw a big dog in the yard " * 14}])
        b = dict(pc.CHAT, messages=[{"role": "user", "content": "Mia had a small cat at home " * 14}])
        ans_a = self.check("chat", a, False)  # to learn the handoff sizes (same model on every worker)
        ans_b = self.check("chat", b, False)
        pool = max(ans_a["bytes"], ans_b["bytes"]) * 3 // 2
        self.assertLess(pool, ans_a["bytes"] + ans_b["bytes"])
        D2 = Server("--role", "decode", "--kv-store", self.dir, "--handoff-timeout", "60",
                    "--handoff-pool-bytes", str(pool))
        try:
            hid_a, hid_b = pc.new_id(), pc.new_id()
            st, got_a = pc.step1(self.P.url, D2.url, "chat", a, hid_a)
            self.assertEqual((st, got_a["transport"]), (200, "ucx"))  # held on D2, not claimed yet
            out = {}
            t = threading.Thread(target=lambda: out.update(r=pc.step1(self.P.url, D2.url, "chat", b, hid_b)))
            t.start()
            waits = 0
            for _ in range(600):  # until D2 reports that b's records wait for a buffer
                waits = D2.metrics()["cinfer_handoff_pool_waits_total"]
                if waits >= 1 or not t.is_alive():
                    break
                time.sleep(0.05)
            self.assertEqual(waits, 1)
            self.assertTrue(t.is_alive())  # P's push of b is held back, not failed
            ref_a, _ = pc.generate(self.M.url, "chat", a, False)
            text, cached = pc.generate(D2.url, "chat", a, False, hid=hid_a)  # claims a: its buffer comes back
            self.assertEqual((text, cached), (ref_a, (got_a["prompt_tokens"] - 1) // BLOCK * BLOCK))
            t.join(60)
            st, got_b = out["r"]
            self.assertEqual((st, got_b["transport"]), (200, "ucx"))
            ref_b, _ = pc.generate(self.M.url, "chat", b, False)
            text, cached = pc.generate(D2.url, "chat", b, False, hid=hid_b)
            self.assertEqual((text, cached), (ref_b, (got_b["prompt_tokens"] - 1) // BLOCK * BLOCK))
            m = D2.metrics()
            self.assertEqual(m['cinfer_handoff_pool_bytes{state="used"}'], 0)
            self.assertGreaterEqual(m["cinfer_handoff_receive_stalls_total"], 1)
            # larger than the whole pool: refused by D2, computed there; same text
            big = dict(pc.CHAT, messages=[{"role": "user", "content": "The sun was warm and the sky was blue " * 20}])
            ref, _ = pc.generate(self.M.url, "chat", big, False)
            imported = D2.metrics()["cinfer_handoff_imported_blocks_total"]
            ans, text, _ = pc.disaggregated(self.P.url, D2.url, "chat", big, False)
            self.assertGreater(ans["bytes"], pool)
            self.assertEqual(text, ref)  # (D2 may still find P's blocks in the shared store)
            self.assertEqual(D2.metrics()["cinfer_handoff_imported_blocks_total"], imported)
        finally:
            rc = D2.stop()
            self.assertEqual(rc, 0, D2.log_text()[-3000:])


class TestPDDecodeKilled(unittest.TestCase):
    def test_sigkill(self):
        d = tempfile.mkdtemp(prefix="cinfer-pd-kill-")
        P = Server("--role", "prefill", "--kv-store", d, "--handoff-timeout", "30")
        D = Server("--role", "decode", "--kv-store", d)
        try:
            body = dict(pc.CHAT, max_tokens=300)
            hid = pc.new_id()
            st, ans = pc.step1(P.url, D.url, "chat", body, hid)
            self.assertEqual((st, ans["transport"], ans["link"]), (200, "ucx", "shm"))
            import openai
            c = openai.OpenAI(base_url=D.url + "/v1", api_key="none", max_retries=0, timeout=20)
            t0, seen = time.time(), 0
            with self.assertRaises((openai.APIError, httpx.HTTPError)):
                for _ in c.chat.completions.create(extra_headers={"X-Cinfer-Handoff-Id": hid}, stream=True,
                                                   extra_body={"ignore_eos": True}, **body):
                    seen += 1
                    if seen == 3:
                        D.proc.send_signal(signal.SIGKILL)
            self.assertGreaterEqual(seen, 3)  # killed mid-stream, and the client got an error, not a hang
            self.assertLess(time.time() - t0, 20)
            D.proc.wait(10)
            # P, handing off to the dead worker over shared memory (which reports no dead peer), sees
            # D's process gone and answers through the store long before its 30 s deadline
            t0 = time.time()
            st, ans = pc.step1(P.url, D.url, "chat", pc.CHAT, pc.new_id())
            self.assertEqual((st, ans["transport"]), (200, "store"))
            self.assertLess(time.time() - t0, 15)
        finally:
            if D.proc.poll() is None:
                D.stop()
            self.assertEqual(P.stop(), 0)
            shutil.rmtree(d, ignore_errors=True)


class TestPDRouterOverlapped(unittest.TestCase):
    def test_prefill_killed(self):
        """Router + real P and D, steps overlapped (the default): identical to the monolithic server;
        with P SIGKILLed the decode worker serves alone, long before its 30 s handoff timeout (the
        router's abort notice or its health check, not D's deadline, ends the wait)."""
        d = tempfile.mkdtemp(prefix="cinfer-pd-router-")
        P = Server("--role", "prefill", "--kv-store", d, "--handoff-timeout", "30")
        D = Server("--role", "decode", "--kv-store", d, "--handoff-timeout", "30")
        M = Server()
        R = Router([P.url + "@prefill", D.url + "@decode"])
        try:
            for stream in (False, True):
                body = dict(pc.CHAT, messages=[{"role": "user", "content": "Tom found a shell " * 12}])
                ref, _ = pc.generate(M.url, "chat", body, stream)
                text, cached = pc.generate(R.url, "chat", body, stream)
                self.assertEqual(text, ref)
                self.assertGreater(cached, 0)  # prefilled on P, handed to D while D waited
            P.proc.send_signal(signal.SIGKILL)
            P.proc.wait(10)
            for stream in (False, True):
                body = dict(pc.CHAT, messages=[{"role": "user", "content": "Ann saw a kite %s " % stream * 12}])
                ref, _ = pc.generate(M.url, "chat", body, stream)
                t0 = time.time()
                text, _ = pc.generate(R.url, "chat", body, stream)
                self.assertEqual(text, ref)
                self.assertLess(time.time() - t0, 15)
        finally:
            self.assertEqual(R.stop(), 0)
            for s in (D, M):
                self.assertEqual(s.stop(), 0)
            if P.proc.poll() is None:
                P.stop()
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
