"""test_pd_faults_netns.py - run by tests/integration/pd_faults_netns.sh: `cinfer router` (PD_R, PD
mode) in front of a prefill worker and two decode workers, each in its own network namespace, UCX over
TCP between them, one store directory; a random-weight model slow enough (PD_MODEL) that a 40-token
stream is still running when the test kills something after the client (the official openai SDK) got
its first chunks. A monolithic server on loopback gives the reference greedy stream. In order:
  1. the decode worker serving the stream is SIGKILLed: the router resumes it on the other decode
     worker, and the client's text and usage equal the monolithic run (nothing lost, nothing twice);
  2. the router is SIGKILLed mid-stream: the client's stream ends with an error, never hangs, and
     what it got is a prefix of the monolithic text; the decode worker drops the orphaned request
     (its client, the router, is gone); the router restarted with the same flags serves the same
     request identically (no worker state lost);
  3. the last decode worker is SIGKILLed mid-stream: no decode worker is left, so the stream ends
     with a clear error (or, were one found, completes identically), never hangs, and what the
     client got is a prefix of the monolithic text."""
import os
import shlex
import signal
import subprocess
import time
import unittest
import urllib.request
import json

import httpx
import openai

from cinfer_server import Server

R = os.environ.get("PD_R")
N = 40  # tokens per stream
KILL_AFTER = 4  # content chunks the client reads before the kill
MSGS = [{"role": "user", "content": " ".join("word%d" % i for i in range(60))}]
M = None
REF = None
RESTARTED = None


def setUpModule():
    global M, REF
    if not R:
        raise unittest.SkipTest("run by tests/integration/pd_faults_netns.sh (PD_R unset)")
    M = Server("--kv-memory", "0.125", model=os.environ["PD_MODEL"], ctx=512)
    REF = stream(M.url)


def tearDownModule():
    if RESTARTED and RESTARTED.poll() is None:
        RESTARTED.kill()
        RESTARTED.wait()
    if M:
        assert M.stop() == 0


def get_json(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def metric(url, name):
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def stream(url, on_chunk=None):
    """The greedy chat stream through the openai SDK: (text, usage dict); on_chunk(n) after each
    content chunk."""
    c = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=60)
    text, n, usage = "", 0, None
    for ch in c.chat.completions.create(model="slow", messages=MSGS, max_tokens=N, temperature=0, stream=True,
                                        stream_options={"include_usage": True}):
        usage = ch.usage or usage
        for choice in ch.choices:
            if choice.delta.content:
                text += choice.delta.content
                n += 1
                if on_chunk:
                    on_chunk(n, text)
    return text, usage.model_dump() if usage else None


def serving_decode_worker():
    busy = [w for w in get_json(R + "/workers")["workers"] if w["inflight"] > 0 and w.get("role") == "decode"]
    assert len(busy) == 1, busy
    return busy[0]["url"]


def decode_pids():
    return dict(kv.split("=", 1) for kv in os.environ["PD_D_PIDS"].split())


def wait_router(live, timeout=30):
    """The restarted router's workers, once it sees the prefill worker and the live decode workers healthy."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            ws = get_json(R + "/workers", timeout=2)["workers"]
            healthy = {w["url"] for w in ws if w["healthy"]}
            if any(w.get("role") == "prefill" and w["url"] in healthy for w in ws) and set(live) <= healthy:
                return ws
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError("the restarted router never saw its workers healthy")


class TestPDFaults(unittest.TestCase):
    def interrupted(self, kill):
        """A stream through the router with kill() after KILL_AFTER chunks: (text, usage, error)."""
        got = {"text": ""}

        def on_chunk(n, text):
            got["text"] = text
            if n == KILL_AFTER:
                kill()
        t0 = time.time()
        try:
            text, usage = stream(R, on_chunk)
            err = None
        except (openai.APIError, httpx.HTTPError) as e:
            text, usage, err = got["text"], None, e
        self.assertLess(time.time() - t0, 60)  # a hang would run into the SDK's 60 s read timeout
        self.assertGreaterEqual(len(text), 1)
        self.assertTrue(REF[0].startswith(text), "lost or duplicated text: %r vs %r" % (text[:200], REF[0][:200]))
        return text, usage, err

    def test_1_decode_worker_killed(self):
        killed = []

        def kill():
            url = serving_decode_worker()
            os.kill(int(decode_pids()[url]), signal.SIGKILL)
            killed.append(url)
        resumes = metric(R, "cinfer_router_resumes_total")
        text, usage, err = self.interrupted(kill)
        self.assertIsNone(err)
        self.assertEqual(len(killed), 1)
        self.assertEqual(text, REF[0])
        self.assertEqual(usage["completion_tokens"], REF[1]["completion_tokens"])
        self.assertEqual(usage["prompt_tokens"], REF[1]["prompt_tokens"])
        self.assertEqual(metric(R, "cinfer_router_resumes_total"), resumes + 1)

    def test_2_router_killed_and_restarted(self):
        global RESTARTED
        pid = int(os.environ["PD_R_PID"])
        live = [u for u in decode_pids() if w_healthy(u)]

        def kill():
            os.kill(pid, signal.SIGKILL)
        text, usage, err = self.interrupted(kill)
        self.assertIsNotNone(err)  # the connection to the client died with the router
        self.assertLess(len(text), len(REF[0]))
        # the decode workers drop the orphaned request (the router's connection closed)
        deadline = time.time() + 30
        while time.time() < deadline and any(metric(u, "cinfer_requests_inflight") > 0 for u in live):
            time.sleep(0.1)
        self.assertEqual([metric(u, "cinfer_requests_inflight") for u in live], [0.0] * len(live))
        with open(os.environ["PD_R_LOG"], "w") as log:
            RESTARTED = subprocess.Popen(shlex.split(os.environ["PD_R_CMD"]), stdout=subprocess.DEVNULL, stderr=log)
        ws = wait_router(live)
        self.assertEqual(sorted(w.get("role") for w in ws), ["decode", "decode", "prefill"])
        text, usage = stream(R)
        self.assertEqual((text, usage["completion_tokens"]), (REF[0], REF[1]["completion_tokens"]))

    def test_3_last_decode_worker_killed(self):
        live = [u for u in decode_pids() if w_healthy(u)]
        self.assertEqual(len(live), 1)  # test 1 killed the other

        def kill():
            url = serving_decode_worker()
            os.kill(int(decode_pids()[url]), signal.SIGKILL)
        text, usage, err = self.interrupted(kill)
        if err is None:  # resumed somewhere after all: then identical
            self.assertEqual((text, usage["completion_tokens"]), (REF[0], REF[1]["completion_tokens"]))
        else:
            self.assertLess(len(text), len(REF[0]))


def w_healthy(url):
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


if __name__ == "__main__":
    unittest.main(verbosity=2)
