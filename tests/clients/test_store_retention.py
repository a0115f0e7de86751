"""test_store_retention.py - issue 8 acceptance 5: retention by traffic class and LRU quota.
- Classes come from the request field cinfer.traffic_class, the header X-Cinfer-Traffic-Class
  and the API key (--api-key KEY:class, --api-key-class KEY=class); the field wins over the
  header, the header over the key; unknown classes are a 400. The objects carry the class.
- With the injectable clock (CINFER_STORE_CLOCK_OFFSET), a server 3 days later misses agent and
  default objects and hits chat ones; 7 days later chat objects are gone as well.
- The quota evicts the least recently used objects first: three prompts written at -3h, -2h
  and -1h, the oldest one read again (a touch), then `cinfer store gc --quota` evicts the
  -2h prompt, not the oldest-written one.
stories260K. Run by tests/integration/store_retention.sh."""
import json
import os
import shutil
import tempfile
import unittest

from cinfer_server import Server
import store_util as su

N = 200
FULL = (N - 1) // su.BLOCK * su.BLOCK
KEYS = ["--api-key", "kplain", "--api-key", "kagent:agent", "--api-key-class", "kchat=chat"]
HDR = "X-Cinfer-Traffic-Class"
AGENT, CHAT, DEFAULT = 2, 1, 0


class TestStoreRetention(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cinfer-store-retention-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_classes_and_expiry(self):
        cases = [  # (prompt, api key, headers, extra body, expected class)
            (su.prompt_ids(1, N), "kplain", None, {"cinfer": {"traffic_class": "agent"}}, AGENT),
            (su.prompt_ids(2, N), "kplain", {HDR: "chat"}, None, CHAT),
            (su.prompt_ids(3, N), "kplain", None, None, DEFAULT),
            (su.prompt_ids(4, N), "kagent", None, None, AGENT),
            (su.prompt_ids(5, N), "kchat", None, None, CHAT),
            (su.prompt_ids(6, N), "kagent", {HDR: "chat"}, None, CHAT),           # header over key
            (su.prompt_ids(7, N), "kchat", {HDR: "default"}, {"cinfer": {"traffic_class": 2}}, AGENT),  # field first
        ]
        a = Server("--kv-store", self.dir, *KEYS)
        try:
            outs = []
            for ids, key, hdr, extra, _ in cases:
                outs.append(su.complete(a, ids, headers=hdr, extra=extra, api_key=key)["text"])
            n = len(cases) * su.blocks(N, 8)
            self.assertGreaterEqual(su.wait_written(a, n), n)
            auth = {"Authorization": "Bearer kplain"}
            st, _, body = a.http("POST", "/v1/completions", {"prompt": "x", "max_tokens": 1,
                                                             "cinfer": {"traffic_class": "weekly"}}, auth)
            self.assertEqual(st, 400, body)
            self.assertEqual(json.loads(body)["error"]["param"], "cinfer.traffic_class")
            st, _, body = a.http("POST", "/v1/completions", {"prompt": "x", "max_tokens": 1}, dict(auth, **{HDR: "x"}))
            self.assertEqual(st, 400, body)
            st, _, _ = a.http("POST", "/v1/completions", {"prompt": "x", "max_tokens": 1},
                              {"Authorization": "Bearer nope"})
            self.assertEqual(st, 401)
            st, _, body = a.http("POST", "/v1/chat/completions",
                                 {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1,
                                  "cinfer": {"traffic_class": "agent"}}, auth)
            self.assertEqual(st, 200, body)
        finally:
            self.assertEqual(a.stop(), 0)
        by_key = {}
        for o in su.objects(self.dir):
            by_key[o["path"]] = o
        for ids, _, _, _, cls in cases:
            paths = su.chain(self.dir, ids)
            self.assertGreaterEqual(len(paths), FULL // su.BLOCK)
            self.assertEqual({by_key[p]["cls"] for p in paths}, {cls})
            o = by_key[paths[0]]
            self.assertEqual(o["expires"] - o["created"], {AGENT: 3, CHAT: 7, DEFAULT: 1}[cls] * 86400)
        rc, out = su.cli("store", "stats", self.dir)
        print("\n" + out)

        def serve_later(offset):
            srv = Server("--kv-store", self.dir, *KEYS, env={"CINFER_STORE_CLOCK_OFFSET": offset})
            try:
                got = [su.complete(srv, ids, headers=hdr, extra=extra, api_key=key)
                       for ids, key, hdr, extra, _ in cases]
                return got, srv.metrics()
            finally:
                self.assertEqual(srv.stop(), 0)

        got, m = serve_later("73h")  # 3 days + 1 hour later
        self.assertEqual([g["text"] for g in got], outs)
        self.assertEqual([g["cached"] for g in got], [FULL if c == CHAT else 0 for *_, c in cases])
        self.assertGreater(m["cinfer_kv_store_expired_total"], 0)
        got, m = serve_later("169h")  # 7 days + 1 hour: chat expired too (the rewrites at +73h as well)
        self.assertEqual([g["cached"] for g in got], [0] * len(cases))
        self.assertEqual([g["text"] for g in got], outs)

    def test_quota_evicts_least_recently_used(self):
        ps = [su.prompt_ids(40 + i, N) for i in range(3)]
        for p, off in zip(ps, ["-3h", "-2h", "-1h"]):
            srv = Server("--kv-store", self.dir, env={"CINFER_STORE_CLOCK_OFFSET": off})
            try:
                su.complete(srv, p)
                self.assertEqual(su.wait_written(srv, su.blocks(N, 8)), su.blocks(N, 8))
            finally:
                self.assertEqual(srv.stop(), 0)
        srv = Server("--kv-store", self.dir)  # reads the oldest-written prompt again: a touch
        try:
            self.assertEqual(su.complete(srv, ps[0])["cached"], FULL)
        finally:
            self.assertEqual(srv.stop(), 0)
        objs = su.objects(self.dir)
        size = os.path.getsize(objs[0]["path"])
        n_p1 = len(su.chain(self.dir, ps[1]))
        quota = (len(objs) - n_p1) * size + size // 2
        rc, out = su.cli("store", "gc", self.dir, "--quota", "%.12f" % (quota / 2**30))
        print("\n" + out.strip())
        self.assertEqual(rc, 0, out)
        self.assertIn("deleted 0 expired, %d least recently used" % n_p1, out)
        self.assertEqual(su.chain(self.dir, ps[1]), [])
        self.assertGreaterEqual(len(su.chain(self.dir, ps[0])), FULL // su.BLOCK)
        self.assertGreaterEqual(len(su.chain(self.dir, ps[2])), FULL // su.BLOCK)


if __name__ == "__main__":
    unittest.main(verbosity=2)
