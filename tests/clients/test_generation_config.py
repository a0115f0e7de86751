"""test_generation_config.py - `cinfer serve DIR` applies the model's generation_config.json sampling
defaults (issue 22; vLLM's --generation-config auto), with the official openai SDK, on a copy of the tiny
Hugging Face llama fixture (tests/data/hf/llama) whose generation_config.json is rewritten per case:
- defaults shown in /v1/models (and /v1/models/{id}) as sampling_defaults;
- temperature 0 from generation_config.json: requests that set no temperature are greedy (identical across
  seeds and equal to an explicit temperature 0), a request's own temperature still wins (seeds differ);
- --generation-config none: no defaults shown, requests sample at the API default (seeds differ);
- an out-of-range value (top_p 2) stops start-up with one line naming the key;
- a 3-id eos_token_id list: the third id ends generation (finish_reason stop, the text cut before it).
Run by tests/integration/serve_generation_config.sh."""
import codecs
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import openai

import fixtures
from cinfer_server import BIN, ROOT, Server

SRC = os.path.join(ROOT, "tests", "data", "hf", "llama")
fixtures.require(os.path.join(SRC, "config.json"), "HF llama fixture")
PROMPT = "Once upon a time"


def byte_level_ids():
    """token text (as the API returns it) -> id, through GPT-2's byte <-> unicode map"""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    to_byte = {chr(c): b for b, c in zip(bs, cs)}
    with open(os.path.join(SRC, "tokenizer.json")) as f:
        vocab = json.load(f)["model"]["vocab"]
    return {bytes(to_byte[ch] for ch in t): i for t, i in vocab.items()}


def token_bytes(t):
    """a logprobs token: text, or "bytes:\\xNN..." for a piece that is not valid UTF-8"""
    return codecs.escape_decode(t[6:])[0] if t.startswith("bytes:") else t.encode()


def model_dir(tmp, gen):
    d = os.path.join(tmp, "m")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(SRC, d)
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump(gen, f)
    return d


class TestGenerationConfig(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def texts(self, client, seeds, **kw):
        return [client.completions.create(model="m", prompt=PROMPT, max_tokens=16, seed=s, **kw).choices[0].text
                for s in seeds]

    def test_defaults_applied(self):
        d = model_dir(self.tmp, {"eos_token_id": 2, "temperature": 0.0, "top_p": 0.9, "top_k": 20,
                                 "repetition_penalty": 1.0})
        srv = Server("--served-model-name", "m", model=d)
        try:
            self.assertIn("sampling defaults from the model", srv.log_text())
            st, _, b = srv.http("GET", "/v1/models")
            self.assertEqual(st, 200)
            sd = json.loads(b)["data"][0]["sampling_defaults"]
            self.assertEqual(sd, {"temperature": 0.0, "top_p": 0.9, "top_k": 20, "repetition_penalty": 1.0})
            st, _, b = srv.http("GET", "/v1/models/m")
            self.assertEqual(json.loads(b)["sampling_defaults"]["top_k"], 20)
            client = openai.OpenAI(base_url=srv.url + "/v1", api_key="x")
            unset = self.texts(client, [1, 2, 3])
            self.assertEqual(len(set(unset)), 1, unset)
            self.assertEqual(unset[0], self.texts(client, [4], temperature=0)[0])
            own = self.texts(client, [1, 2, 3, 4], temperature=1.5, top_p=1.0, extra_body={"top_k": 0})
            self.assertGreater(len(set(own)), 1, own)
        finally:
            srv.stop()

    def test_none(self):
        d = model_dir(self.tmp, {"eos_token_id": 2, "temperature": 0.0})
        srv = Server("--served-model-name", "m", "--generation-config", "none", model=d)
        try:
            st, _, b = srv.http("GET", "/v1/models")
            self.assertEqual(json.loads(b)["data"][0]["sampling_defaults"], {})
            client = openai.OpenAI(base_url=srv.url + "/v1", api_key="x")
            self.assertGreater(len(set(self.texts(client, [1, 2, 3, 4]))), 1)
        finally:
            srv.stop()

    def test_bad_value(self):
        d = model_dir(self.tmp, {"eos_token_id": 2, "top_p": 2.0})
        p = subprocess.run([BIN, "serve", d, "--port", "0"], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 1, p.stderr)
        err = [l for l in p.stderr.splitlines() if "general.sampling.top_p" in l]
        self.assertEqual(len(err), 1, p.stderr)
        self.assertIn("out of range for top_p", err[0])

    def test_eos_list(self):
        # a token of the greedy text becomes an end-of-generation id: the completion stops before it
        d = model_dir(self.tmp, {"eos_token_id": 2, "temperature": 0.0})
        srv = Server("--served-model-name", "m", model=d)
        body = {"prompt": PROMPT, "max_tokens": 8, "logprobs": 1}
        try:
            st, _, b = srv.http("POST", "/v1/completions", body)
            self.assertEqual(st, 200, b)
            toks = json.loads(b)["choices"][0]["logprobs"]["tokens"]
        finally:
            srv.stop()
        # the first token after the first that is a plain vocabulary piece not seen before it
        vocab = byte_level_ids()
        cut = next(i for i in range(1, len(toks)) if token_bytes(toks[i]) in vocab and toks[i] not in toks[:i])
        stop_id = vocab[token_bytes(toks[cut])]
        d = model_dir(self.tmp, {"eos_token_id": [2, 1, stop_id], "temperature": 0.0})
        srv = Server("--served-model-name", "m", model=d)
        try:
            st, _, b = srv.http("POST", "/v1/completions", body)
            ch = json.loads(b)["choices"][0]
            self.assertEqual(ch["finish_reason"], "stop", b)
            self.assertEqual(ch["logprobs"]["tokens"], toks[:cut])
        finally:
            srv.stop()


if __name__ == "__main__":
    unittest.main()
