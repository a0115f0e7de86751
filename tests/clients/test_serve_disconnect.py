"""test_serve_disconnect.py - clients that go away, clients that do not read, and shutdown.
- a streaming client closes mid-stream -> its engine request is cancelled (metrics + log),
  and its KV blocks are freed (cinfer_kv_blocks_used back to 0);
- the same for a non-streaming client that closes while waiting;
- a client that stops reading a big stream does not stall other requests, and gets its whole
  stream once it reads again (bounded per-connection buffer, engine output queues meanwhile);
- SIGTERM: in-flight streams finish, the server exits 0; with a short deadline the rest are
  cancelled (finish_reason "abort") and it still exits 0.
Run by tests/integration/serve_disconnect.sh."""
import json
import signal
import socket
import threading
import time
import unittest

import openai

from cinfer_server import MODEL_NAME, Server


def raw_request(port, body, rcvbuf=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)  # a small window: the server's buffer fills
    s.connect(("127.0.0.1", port))
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(data) + data)
    return s


def read_all(s, timeout=30):
    s.settimeout(timeout)
    out = b""
    while not out.endswith(b"0\r\n\r\n"):
        b = s.recv(65536)
        if not b:
            break
        out += b
    return out


def long_chat(**kw):
    b = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "Tell me a long story."}],
         "max_tokens": 400, "ignore_eos": True, "temperature": 0}
    b.update(kw)
    return b


def wait_for(pred, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return False


class TestDisconnect(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--conn-buffer-bytes", "16384")

    @classmethod
    def tearDownClass(cls):
        rc = cls.srv.stop()
        assert rc == 0, "server exit code %r" % rc

    def idle(self):
        m = self.srv.metrics()
        return m["cinfer_kv_blocks_used"] == 0 and m["cinfer_requests_inflight"] == 0

    def test_stream_disconnect_cancels(self):
        before = self.srv.metrics()["cinfer_requests_cancelled_total"]
        s = raw_request(self.srv.port, long_chat(stream=True, n=4))
        s.settimeout(10)
        got = b""
        while b'"content":"' not in got.replace(b'"content":""', b""):
            got += s.recv(4096)
        self.assertGreater(self.srv.metrics()["cinfer_kv_blocks_used"], 0)
        s.close()
        self.assertTrue(wait_for(lambda: self.srv.metrics()["cinfer_requests_cancelled_total"] == before + 1),
                        "cancel not visible in /metrics")
        self.assertTrue(wait_for(self.idle), "KV blocks not freed: %r" % self.srv.metrics())
        self.assertTrue(self.srv.wait_log(r"status=499 .*client disconnected, [1-4] choice\(s\) cancelled"))

    def test_non_stream_disconnect_cancels(self):
        before = self.srv.metrics()["cinfer_requests_cancelled_total"]
        s = raw_request(self.srv.port, long_chat(n=8))
        self.assertTrue(wait_for(lambda: self.srv.metrics()["cinfer_kv_blocks_used"] > 0, 5))
        s.close()
        self.assertTrue(wait_for(lambda: self.srv.metrics()["cinfer_requests_cancelled_total"] == before + 1))
        self.assertTrue(wait_for(self.idle))

    def test_slow_reader_does_not_stall_others(self):
        pauses = self.srv.metrics()["cinfer_stream_pauses_total"]
        s = raw_request(self.srv.port, long_chat(stream=True, n=16), rcvbuf=4096)
        time.sleep(0.3)  # the slow client reads nothing for now
        client = openai.OpenAI(base_url=self.srv.url + "/v1", api_key="x", max_retries=0, timeout=30)
        t0 = time.time()
        for _ in range(3):
            r = client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "hi"}],
                                               max_tokens=8)
            self.assertTrue(r.choices[0].finish_reason)
        self.assertLess(time.time() - t0, 10)
        rss = self.srv.rss_kib()
        body = read_all(s)
        s.close()
        events = [l for l in body.split(b"\n") if l.startswith(b"data: ")]
        self.assertEqual(events[-1], b"data: [DONE]")
        finishes = [json.loads(e[6:])["choices"][0]["finish_reason"] for e in events[:-1]]
        self.assertEqual(sum(1 for f in finishes if f == "length"), 16)
        self.assertLess(rss, 200 * 1024)
        self.assertGreater(self.srv.metrics()["cinfer_stream_pauses_total"], pauses)
        self.assertTrue(wait_for(self.idle))


class TestShutdown(unittest.TestCase):
    def test_sigterm_finishes_in_flight(self):
        srv = Server()
        s = raw_request(srv.port, long_chat(stream=True, max_tokens=300, n=2))
        s.settimeout(10)
        s.recv(100)
        srv.proc.send_signal(signal.SIGTERM)
        body = read_all(s)
        s.close()
        self.assertIn(b"data: [DONE]", body[-200:], body[-300:])
        self.assertEqual(body.count(b'"finish_reason":"length"'), 2, body[-300:])
        self.assertEqual(srv.stop(), 0)
        self.assertIn("shutdown complete", srv.log_text())

    def test_sigterm_deadline_cancels(self):
        srv = Server("--shutdown-timeout", "0.05", ctx=4096)
        s = raw_request(srv.port, long_chat(stream=True, max_tokens=4000, n=8))
        s.settimeout(10)
        s.recv(100)
        srv.proc.send_signal(signal.SIGTERM)
        body = read_all(s)
        s.close()
        self.assertEqual(body.count(b'"finish_reason":"abort"'), 8, body[-300:])
        self.assertIn(b"data: [DONE]", body[-200:], body[-300:])
        self.assertEqual(srv.stop(), 0)

    def test_sigterm_deadline_cancels_single_choice(self):
        # n = 1 takes the recipe path (parser + stream encoder): still "abort", then [DONE]
        srv = Server("--shutdown-timeout", "0.05", ctx=4096)
        s = raw_request(srv.port, long_chat(stream=True, max_tokens=4000, n=1))
        s.settimeout(10)
        s.recv(100)
        srv.proc.send_signal(signal.SIGTERM)
        body = read_all(s)
        s.close()
        self.assertEqual(body.count(b'"finish_reason":"abort"'), 1, body[-300:])
        self.assertIn(b"data: [DONE]", body[-200:], body[-300:])
        self.assertEqual(srv.stop(), 0)

    def test_refuses_new_work_while_draining(self):
        srv = Server()
        s = raw_request(srv.port, long_chat(stream=True, max_tokens=400, n=8))
        s.settimeout(10)
        s.recv(100)
        srv.proc.send_signal(signal.SIGTERM)
        self.assertTrue(srv.wait_log("shutting down"))
        with self.assertRaises(OSError):  # the listening socket is closed
            socket.create_connection(("127.0.0.1", srv.port), timeout=2).recv(1)
        read_all(s)
        s.close()
        self.assertEqual(srv.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
