"""test_serve_netsec.py - `cinfer serve` against hostile or careless clients (issue 14 section 4,
docs/serve.md "Connections" and "Tenants"), on loopback with the real stories260K model:

- connection timeouts: a slowloris client (headers trickled a line at a time) is disconnected
  after --header-timeout while /health keeps answering; a partial body is dropped after
  --body-timeout; an idle keep-alive connection is closed after --idle-timeout; a keep-alive
  connection that keeps sending requests is not;
- --max-connections: a connection beyond the limit gets 503 too_many_connections with
  Connection: close, and /health works again once the others close;
- running out of file descriptors (the server under `ulimit -n 64`, flooded with connections):
  the server stays nearly idle (no accept busy loop), its log stays small (rate-limited
  warnings), and /health answers after the flood ends;
- tenants: a stored response is visible only to the API key that created it (GET, DELETE and
  previous_response_id from another key are 404), ids are 128-bit random hex; with two keys the
  prefix cache is per key unless --share-prefix-cache;
- log injection: a model name or a response id with a newline cannot forge a log line.
Run by tests/integration/serve_netsec.sh."""
import os
import re
import socket
import time
import unittest
import urllib.request

import openai

from cinfer_server import MODEL_NAME, Server


def health(srv, timeout=5):
    with urllib.request.urlopen(srv.url + "/health", timeout=timeout) as r:
        return r.status


def closed_by_peer(sock, timeout):
    """Seconds until the server closes `sock` (EOF or reset), None if it stays open for `timeout`."""
    t0 = time.time()
    sock.settimeout(0.2)
    while time.time() - t0 < timeout:
        try:
            if sock.recv(4096) == b"":
                return time.time() - t0
        except socket.timeout:
            continue
        except OSError:
            return time.time() - t0
    return None


class TestTimeouts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--header-timeout", "2", "--body-timeout", "2", "--idle-timeout", "2")

    @classmethod
    def tearDownClass(cls):
        assert cls.srv.stop() == 0, cls.srv.log_text()[-3000:]

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.srv.port))
        self.addCleanup(s.close)
        return s

    def test_slowloris_header(self):
        s = self.connect()
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        t0 = time.time()
        closed = None
        for _ in range(40):  # one header line every 0.25 s: never idle, never complete
            try:
                s.sendall(b"X-Slow: 1\r\n")
            except OSError:
                closed = time.time() - t0
                break
            if closed_by_peer(s, 0.25) is not None:
                closed = time.time() - t0
                break
            self.assertEqual(health(self.srv), 200)
        self.assertIsNotNone(closed, "a trickled header was held for 10 s")
        self.assertGreater(closed, 1.0)
        self.assertLess(closed, 4.0)
        self.assertEqual(health(self.srv), 200)
        self.assertGreaterEqual(self.srv.metrics()["cinfer_connection_timeouts_total"], 1)

    def test_silent_connection(self):
        s = self.connect()
        closed = closed_by_peer(s, 6)
        self.assertIsNotNone(closed)
        self.assertLess(closed, 4.0)

    def test_partial_body(self):
        s = self.connect()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100\r\n\r\n{\"prompt\":")
        closed = closed_by_peer(s, 6)
        self.assertIsNotNone(closed, "a partial body was held for 6 s")
        self.assertGreater(closed, 1.0)
        self.assertLess(closed, 4.0)

    def test_idle_keepalive_closed(self):
        s = self.connect()
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(5)
        self.assertIn(b"200 OK", s.recv(4096))
        closed = closed_by_peer(s, 6)
        self.assertIsNotNone(closed, "an idle keep-alive connection was held for 6 s")
        self.assertGreater(closed, 1.0)
        self.assertLess(closed, 4.0)

    def test_busy_keepalive_kept(self):
        s = self.connect()
        s.settimeout(5)
        for _ in range(6):  # 6 requests 0.8 s apart: 4.8 s on one connection, never idle for 2 s
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertIn(b"200 OK", s.recv(4096))
            time.sleep(0.8)


class TestMaxConnections(unittest.TestCase):
    def test_refused_then_recovers(self):
        srv = Server("--max-connections", "4")
        try:
            held = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(4)]
            time.sleep(0.3)
            status, headers, body = srv.http("GET", "/health")
            self.assertEqual(status, 503)
            self.assertIn(b"too_many_connections", body)
            self.assertEqual(headers.get("Connection", "").lower(), "close")
            for s in held:
                s.close()
            time.sleep(0.5)
            self.assertEqual(health(srv), 200)
            m = srv.metrics()
            self.assertGreaterEqual(m["cinfer_connections_refused_total"], 1)
            self.assertLessEqual(m["cinfer_connections_open"], 2)
        finally:
            self.assertEqual(srv.stop(), 0)


class TestOutOfDescriptors(unittest.TestCase):
    def test_emfile_flood(self):
        srv = Server("--max-connections", "100000", "--header-timeout", "30", nofile=64)
        try:
            with open("/proc/%d/stat" % srv.proc.pid) as f:
                f.read()

            def cpu():
                with open("/proc/%d/stat" % srv.proc.pid) as f:
                    x = f.read().rsplit(")", 1)[1].split()
                return (int(x[11]) + int(x[12])) / os.sysconf("SC_CLK_TCK")

            flood = []
            for _ in range(150):  # beyond the 64 descriptors and the listen backlog's fill
                try:
                    flood.append(socket.create_connection(("127.0.0.1", srv.port), timeout=0.5))
                except OSError:
                    break
            self.assertGreater(len(flood), 60)
            c0, t0 = cpu(), time.time()
            time.sleep(3)
            busy = (cpu() - c0) / (time.time() - t0)
            self.assertLess(busy, 0.3, "the server spins while out of descriptors")
            log = srv.log_text()
            self.assertIn("Too many open files", log)
            self.assertLess(len(log), 20000, "the log grows without bound: %s" % log[-2000:])
            for s in flood:
                s.close()
            deadline = time.time() + 10
            ok = False
            while not ok and time.time() < deadline:
                try:
                    ok = health(srv, timeout=2) == 200
                except OSError:
                    time.sleep(0.2)
            self.assertTrue(ok, "/health does not answer after the flood")
            self.assertGreaterEqual(srv.metrics()["cinfer_accept_pauses_total"], 1)
        finally:
            self.assertEqual(srv.stop(), 0)


KA, KB = "sk-tenant-a", "sk-tenant-b"


class TestTenants(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--api-key", KA, "--api-key", KB)
        cls.a = openai.OpenAI(base_url=cls.srv.url + "/v1", api_key=KA, max_retries=0, timeout=60)
        cls.b = openai.OpenAI(base_url=cls.srv.url + "/v1", api_key=KB, max_retries=0, timeout=60)

    @classmethod
    def tearDownClass(cls):
        assert cls.srv.stop() == 0, cls.srv.log_text()[-3000:]

    def test_stored_response_bound_to_key(self):
        r = self.a.responses.create(model=MODEL_NAME, input="Once upon a time", max_output_tokens=4)
        self.assertRegex(r.id, r"^resp_[0-9a-f]{32}$")
        self.assertEqual(self.a.responses.retrieve(r.id).id, r.id)
        with self.assertRaises(openai.NotFoundError):
            self.b.responses.retrieve(r.id)
        with self.assertRaises(openai.NotFoundError):
            self.b.responses.delete(r.id)
        with self.assertRaises(openai.NotFoundError):
            self.b.responses.create(model=MODEL_NAME, input="x", max_output_tokens=2, previous_response_id=r.id)
        self.assertEqual(self.a.responses.retrieve(r.id).id, r.id)  # B's delete did nothing
        r2 = self.a.responses.create(model=MODEL_NAME, input="More", max_output_tokens=2, previous_response_id=r.id)
        self.assertEqual(r2.previous_response_id, r.id)
        self.a.responses.delete(r.id)

    def test_ids_unpredictable(self):
        ids = []
        for _ in range(2):
            status, headers, _ = self.srv.http("POST", "/v1/messages", {"model": MODEL_NAME},
                                               headers={"x-api-key": "wrong", "Content-Type": "application/json"})
            self.assertEqual(status, 401)
            ids.append(headers.get("request-id"))
        for i in ids:
            self.assertRegex(i or "", r"^req-[0-9a-f]{32}$")
        self.assertNotEqual(ids[0][4:20], ids[1][4:20])
        c = self.a.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "Hi"}],
                                           max_tokens=2)
        self.assertRegex(c.id, r"^chatcmpl-[0-9a-f]{32}$")

    def test_prefix_cache_per_key(self):
        prompt = "The tenant's little cat sat on the warm mat and watched the birds fly by. " * 4
        msgs = [{"role": "user", "content": prompt}]

        def cached(client):
            r = client.chat.completions.create(model=MODEL_NAME, messages=msgs, max_tokens=2)
            return r.usage.prompt_tokens_details.cached_tokens

        cached(self.a)
        self.assertGreaterEqual(cached(self.a), 32, "the same key's repeat should hit the cache")
        self.assertEqual(cached(self.b), 0, "another key must not hit the first key's cache")


class TestSharedPrefixCache(unittest.TestCase):
    def test_share_flag(self):
        srv = Server("--api-key", KA, "--api-key", KB, "--share-prefix-cache")
        try:
            prompt = "A shared prompt about a big brown bear who liked honey and long naps. " * 4
            msgs = [{"role": "user", "content": prompt}]
            a = openai.OpenAI(base_url=srv.url + "/v1", api_key=KA, max_retries=0, timeout=60)
            b = openai.OpenAI(base_url=srv.url + "/v1", api_key=KB, max_retries=0, timeout=60)
            a.chat.completions.create(model=MODEL_NAME, messages=msgs, max_tokens=2)
            r = b.chat.completions.create(model=MODEL_NAME, messages=msgs, max_tokens=2)
            self.assertGreaterEqual(r.usage.prompt_tokens_details.cached_tokens, 32)
        finally:
            self.assertEqual(srv.stop(), 0)


class TestLogInjection(unittest.TestCase):
    def test_no_forged_lines(self):
        srv = Server()
        try:
            status, _, _ = srv.http("POST", "/v1/chat/completions",
                                    {"model": "a\nFORGED model line", "messages": [{"role": "user", "content": "x"}]})
            self.assertEqual(status, 404)
            status, _, _ = srv.http("GET", "/v1/responses/x%0aFORGED%0d%0aFORGED%1b[31m")
            self.assertEqual(status, 404)
            status, _, _ = srv.http("GET", "/nope%0aFORGED")
            self.assertEqual(status, 404)
            self.assertTrue(srv.wait_log(r"FORGED", 5))
        finally:
            self.assertEqual(srv.stop(), 0)
        log = srv.log_text()
        for line in log.splitlines():
            self.assertFalse(line.startswith("FORGED"), "forged log line: %r" % line)
            self.assertNotIn("\x1b", line)
        self.assertIn("a\\nFORGED", log)


if __name__ == "__main__":
    unittest.main()
