"""test_serve_store.py - `cinfer serve --kv-store DIR`: a prompt computed by one server process is
served from the persistent KV store by the next one (after a restart): usage reports it in
cached_tokens, /metrics in cinfer_cached_tokens_store_total, and the greedy output is identical.
Run by tests/integration/serve_store.sh."""
import shutil
import tempfile
import time
import unittest

import openai

from cinfer_server import MODEL_NAME, Server

PROMPT = "The little dog ran to the park and played with a red ball all day long. " * 6


def ask(srv):
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0, timeout=60)
    return client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": PROMPT}],
                                          max_tokens=16, temperature=0)


class TestStore(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cinfer-serve-store-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_prefix_survives_restart(self):
        a = Server("--kv-store", self.dir)
        try:
            first = ask(a)
            self.assertEqual(a.metrics()["cinfer_kv_store_enabled"], 1)
            p = first.usage.prompt_tokens
            self.assertGreater(p, 100)
            self.assertEqual(first.usage.prompt_tokens_details.cached_tokens, 0)
            full_blocks = (p - 1) // 16
            written = (p + 16 - 1) // 16  # every computed position; one fewer could leave a middle block unwritten
            deadline = time.time() + 20
            while a.metrics()["cinfer_kv_store_objects_written_total"] < written and time.time() < deadline:
                time.sleep(0.05)
        finally:
            self.assertEqual(a.stop(), 0)
        b = Server("--kv-store", self.dir)
        try:
            second = ask(b)
            cached = second.usage.prompt_tokens_details.cached_tokens
            self.assertGreaterEqual(cached, full_blocks * 16 - 16, "prefix not loaded from the store")
            self.assertGreater(b.metrics()["cinfer_cached_tokens_store_total"], 0)
            self.assertEqual(second.choices[0].message.content, first.choices[0].message.content)
        finally:
            self.assertEqual(b.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
