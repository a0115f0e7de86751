"""test_serve_moe.py - `cinfer serve` on a MoE model (tiny-deepseek2: MLA + 8 routed experts, top-2,
one leading dense layer): completions work through the HTTP path, and /metrics exports the
engine's expert load (cinfer_moe_expert_tokens per layer and expert over the last 64 steps,
cinfer_moe_expert_imbalance per layer) with the right totals: every token a step computes is
routed to exactly expert_used_count experts in each MoE layer.
Run by tests/integration/serve_moe.sh."""
import json
import os
import re
import unittest

import fixtures
from cinfer_server import SHARED, Server

MODEL = os.path.join(SHARED, "models", "tiny", "tiny-deepseek2.gguf")
fixtures.require(MODEL, "model")
N_LAYER, N_DENSE, N_EXPERT, N_USED = 4, 1, 8, 2


class TestMoeMetrics(unittest.TestCase):
    def test_expert_load(self):
        srv = Server(model=MODEL, ctx=256)
        try:
            st, _, b = srv.http("POST", "/v1/completions",
                                {"prompt": "The capital of France is", "max_tokens": 8, "temperature": 0})
            self.assertEqual(st, 200, b)
            usage = json.loads(b)["usage"]
            st, _, text = srv.http("GET", "/metrics")
            text = text.decode()
        finally:
            self.assertEqual(srv.stop(), 0)
        self.assertIn("# TYPE cinfer_moe_expert_tokens gauge", text)
        per_layer = {}
        for layer, expert, v in re.findall(r'^cinfer_moe_expert_tokens\{model_name="[^"]*",layer="(\d+)",expert="(\d+)"\} (\d+)$', text,
                                           re.M):
            per_layer.setdefault(int(layer), []).append(int(v))
        self.assertEqual(sorted(per_layer), list(range(N_DENSE, N_LAYER)))  # dense layer 0 has no experts
        # positions computed: the prompt, then every sampled token but the last
        steps_tokens = usage["prompt_tokens"] + usage["completion_tokens"] - 1
        for layer, counts in per_layer.items():
            self.assertEqual(len(counts), N_EXPERT)
            self.assertEqual(sum(counts), steps_tokens * N_USED, (layer, counts))
        imb = re.findall(r'^cinfer_moe_expert_imbalance\{model_name="[^"]*",layer="(\d+)"\} ([0-9.e+-]+)$', text, re.M)
        self.assertEqual(len(imb), N_LAYER - N_DENSE)
        for _, v in imb:
            self.assertGreaterEqual(float(v), 1.0)
            self.assertLessEqual(float(v), N_EXPERT / N_USED)


if __name__ == "__main__":
    unittest.main()
