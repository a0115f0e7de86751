"""test_serve_load.py - bounded load test of `cinfer serve` on loopback: 64 concurrent streaming
clients (the official openai SDK, asyncio) x 4 requests each, 64 tokens per request (ignore_eos,
so every output has a known length). Checks: 0 errors, every stream complete (a finish_reason,
usage, the expected token count), server RSS bounded while it runs, KV blocks all released after.
Prints requests/s and aggregate generated tok/s (bench/README.md quotes them; the machine is
shared, so the numbers are noisy). Stops by itself: a 90 s overall timeout.
Also: a ~7 MB prompt does not stall other connections (prompt workers).
Run by tests/integration/serve_load.sh; CINFER_LOAD_CLIENTS / CINFER_LOAD_REQUESTS override."""
import asyncio
import os
import threading
import time
import unittest

import openai

from cinfer_server import MODEL_NAME, Server

CLIENTS = int(os.environ.get("CINFER_LOAD_CLIENTS", "64"))
PER_CLIENT = int(os.environ.get("CINFER_LOAD_REQUESTS", "4"))
TOKENS = 64


class TestLoad(unittest.TestCase):
    def test_64_streaming_clients(self):
        srv = Server("--max-seqs", "64")
        try:
            self.run_load(srv)
        finally:
            self.assertEqual(srv.stop(), 0)

    def test_big_prompt_does_not_stall_the_loop(self):
        # the chat template and the tokenizer run on a prompt worker, not on the HTTP loop: while a
        # ~7 MB prompt is prepared (then refused: it does not fit the context), /health answers at once
        srv = Server("--max-body-bytes", str(16 << 20))
        try:
            body = {"model": MODEL_NAME, "max_tokens": 4,
                    "messages": [{"role": "user", "content": "once upon a time there was a dog. " * 200000}]}
            out = {}

            def big():
                t = time.time()
                out["status"] = srv.http("POST", "/v1/chat/completions", body, timeout=120)[0]
                out["secs"] = time.time() - t
            th = threading.Thread(target=big)
            th.start()
            worst = 0.0
            while th.is_alive():
                t = time.time()
                self.assertEqual(srv.http("GET", "/health")[0], 200)
                worst = max(worst, time.time() - t)
                time.sleep(0.02)
            th.join()
            self.assertEqual(out["status"], 400)  # context_length_exceeded, after tokenizing it all
            print("big prompt: %.2fs, worst /health latency meanwhile %.3fs" % (out["secs"], worst))
            if out["secs"] > 1.0:  # long enough to tell: the probes did not wait for it
                self.assertLess(worst, out["secs"] / 2)
        finally:
            self.assertEqual(srv.stop(), 0)

    @staticmethod
    def server_cpu(srv):
        with open("/proc/%d/stat" % srv.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def run_load(self, srv):
        base_rss = srv.rss_kib()
        peak = [base_rss]
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], srv.rss_kib())
                time.sleep(0.05)

        cpu0, my0 = self.server_cpu(srv), time.process_time()
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        errors, done, tokens = [], [0], [0]

        async def one_client(client, k):
            for r in range(PER_CLIENT):
                try:
                    stream = await client.chat.completions.create(
                        model=MODEL_NAME, stream=True, stream_options={"include_usage": True},
                        messages=[{"role": "user", "content": "Story %d about a cat and a dog." % (k * 7 + r)}],
                        max_tokens=TOKENS, temperature=0.8, seed=k * 100 + r, extra_body={"ignore_eos": True})
                    text, finish, usage = "", None, None
                    async for ch in stream:
                        if ch.choices:
                            text += ch.choices[0].delta.content or ""
                            finish = ch.choices[0].finish_reason or finish
                        if ch.usage:
                            usage = ch.usage
                    if finish != "length" or usage is None or usage.completion_tokens != TOKENS or not text:
                        errors.append("client %d request %d: finish=%r usage=%r" % (k, r, finish, usage))
                    else:
                        done[0] += 1
                        tokens[0] += usage.completion_tokens
                except Exception as e:  # noqa: BLE001 - every failure is counted and reported
                    errors.append("client %d request %d: %r" % (k, r, e))

        async def main():
            client = openai.AsyncOpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0, timeout=60)
            t0 = time.time()
            await asyncio.wait_for(asyncio.gather(*(one_client(client, k) for k in range(CLIENTS))), 90)
            return time.time() - t0

        wall = asyncio.run(main())
        stop.set()
        sampler.join()
        n = CLIENTS * PER_CLIENT
        print("\nload: %d clients x %d streaming requests (%d tokens each): %d ok, %d errors in %.2f s -> "
              "%.1f requests/s, %.0f generated tok/s; server RSS %.1f MiB at start, peak %.1f MiB; "
              "CPU seconds: server %.1f, Python clients %.1f"
              % (CLIENTS, PER_CLIENT, TOKENS, done[0], len(errors), wall, n / wall, tokens[0] / wall,
                 base_rss / 1024, peak[0] / 1024, self.server_cpu(srv) - cpu0, time.process_time() - my0))
        self.assertEqual(errors, [])
        self.assertEqual(done[0], n)
        self.assertLess(peak[0] - base_rss, 256 * 1024, "server RSS grew by more than 256 MiB")
        m = srv.metrics()
        self.assertEqual(m["cinfer_kv_blocks_used"], 0)
        self.assertEqual(m["cinfer_requests_inflight"], 0)
        self.assertEqual(m['cinfer_requests_total{status="200"}'], n)
        self.assertEqual(m["cinfer_generation_tokens_total"], n * TOKENS)
        self.assertEqual(m["cinfer_time_to_first_token_seconds_count"], n)


if __name__ == "__main__":
    unittest.main(verbosity=2)
