"""test_serve_speculative.py - speculative decoding through `cinfer serve` with the official
OpenAI SDK (docs/serve.md "Speculative decoding"), on stories260K with itself as the draft model
(--draft-model; the same vocabulary, so it is accepted at start):

- greedy Chat and Completions answers are the same text with per-request `cinfer.speculative`
  off, n-gram and draft (k 1..16), and with the server default;
- usage.completion_tokens_details.accepted_prediction_tokens reports accepted drafts (all of them
  for the draft model, which is the target itself), absent when none (off); the same count in
  Responses (usage.output_tokens_details.accepted_prediction_tokens) and Anthropic Messages
  (usage.cinfer_accepted_prediction_tokens) through the official openai / anthropic SDKs, streamed
  and not, each equal to what /metrics counted for that request;
- /metrics counts drafted / accepted tokens per drafter and the acceptance-length histogram,
  moving by exactly what the requests report;
- invalid options are a 400 naming cinfer.speculative; a server without a draft model refuses the
  draft drafter at submit and `--speculative draft` without `--draft-model` at start;
- the MTP drafter on a random-weight deepseek2 model with one next-n layer (`cinfer mkmodel
  --mtp-layers 1`), served with `--speculative mtp`: greedy Chat answers identical with mtp, the
  default and off, /metrics counts MTP drafts; stories260K (no MTP block) refuses `mtp` with a 400
  and `--speculative mtp` at start;
- the DSpark block drafter on a random-weight deepseek4 model with DSpark tensors (`cinfer mkmodel
  --mtp-layers 1 --dspark-block 5`), served with `--speculative dspark`: greedy Chat answers
  identical with dspark, the default and off, /metrics counts DSpark drafts under
  drafter="dspark", `mtp` is a 400 there (its MTP block is a DSpark stage); stories260K refuses
  `dspark` with a 400 and `--speculative dspark` at start.
Run by tests/integration/serve_speculative.sh."""
import os
import subprocess
import tempfile
import unittest

import anthropic
import openai

from cinfer_server import BIN, MODEL, Server

SRV = None
OAI = None
ANT = None
PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play. Once upon a time"


def setUpModule():
    global SRV, OAI
    SRV = Server("--draft-model", MODEL, "--speculative", "ngram", "--spec-k", "4")
    OAI = openai.OpenAI(base_url=SRV.url + "/v1", api_key="x", max_retries=0, timeout=60)
    global ANT
    ANT = anthropic.Anthropic(base_url=SRV.url, api_key="x", max_retries=0, timeout=60)


def tearDownModule():
    rc = SRV.stop()
    assert rc == 0, "server exit code %r\n%s" % (rc, SRV.log_text()[-3000:])


def chat(spec, **kw):
    extra = {"cinfer": {"speculative": spec}} if spec is not None else {}
    return OAI.chat.completions.create(model="stories260K", messages=[{"role": "user", "content": PROMPT}],
                                       max_tokens=48, temperature=0, extra_body=extra, **kw)


def accepted(r):
    """usage.completion_tokens_details.accepted_prediction_tokens (absent when 0)."""
    return r.usage.completion_tokens_details.accepted_prediction_tokens or 0


class TestSpeculative(unittest.TestCase):
    def test_greedy_identical_and_usage(self):
        off = chat({"drafter": "off"})
        self.assertIsNone(off.usage.completion_tokens_details.accepted_prediction_tokens)
        before = SRV.metrics()
        got = {}
        for spec in (None, "ngram", {"drafter": "ngram", "k": 1}, {"drafter": "draft", "k": 16},
                     {"drafter": "draft"}, True):
            r = chat(spec)
            self.assertEqual(r.choices[0].message.content, off.choices[0].message.content, spec)
            self.assertEqual(r.usage.completion_tokens, off.usage.completion_tokens)
            got[str(spec)] = accepted(r)
        after = SRV.metrics()
        # the draft model is the target: every greedy draft is accepted, and it drafts every step
        self.assertGreater(got["{'drafter': 'draft', 'k': 16}"], 30)
        d = lambda k: after.get(k, 0) - before.get(k, 0)
        drafted = d('cinfer_spec_draft_tokens_total{drafter="draft"}')
        acc = d('cinfer_spec_accepted_tokens_total{drafter="draft"}')
        self.assertEqual(drafted, acc)
        self.assertEqual(acc, got["{'drafter': 'draft', 'k': 16}"] + got["{'drafter': 'draft'}"])
        acc_ngram = d('cinfer_spec_accepted_tokens_total{drafter="ngram"}')
        self.assertEqual(acc_ngram, got["None"] + got["ngram"] + got["{'drafter': 'ngram', 'k': 1}"] + got["True"])
        verifies = d('cinfer_spec_verifies_total{drafter="draft"}') + d('cinfer_spec_verifies_total{drafter="ngram"}')
        self.assertEqual(d('cinfer_spec_acceptance_length_count'), verifies)
        self.assertEqual(d('cinfer_spec_acceptance_length_sum'), acc + acc_ngram)

    def test_completions_and_sampling(self):
        a = OAI.completions.create(model="stories260K", prompt=PROMPT, max_tokens=32, temperature=0,
                                   extra_body={"cinfer": {"speculative": "off"}})
        b = OAI.completions.create(model="stories260K", prompt=PROMPT, max_tokens=32, temperature=0,
                                   extra_body={"cinfer": {"speculative": {"drafter": "draft", "k": 5}}})
        self.assertEqual(a.choices[0].text, b.choices[0].text)
        # sampled, with a seed: runs and counts tokens (the distribution test is test_spec_sampling)
        r = chat({"drafter": "draft", "k": 3}, seed=5, top_p=0.9)
        self.assertEqual(r.usage.completion_tokens, 48)

    def accepted_delta(self, fn):
        """Runs fn(); returns (its result, drafts /metrics counted as accepted meanwhile)."""
        key = 'cinfer_spec_accepted_tokens_total{drafter="draft"}'
        before = SRV.metrics().get(key, 0)
        r = fn()
        return r, SRV.metrics().get(key, 0) - before

    def test_usage_responses_and_messages(self):
        msgs = [{"role": "user", "content": PROMPT}]
        draft = {"cinfer": {"speculative": {"drafter": "draft", "k": 8}}}
        off = {"cinfer": {"speculative": "off"}}
        # Responses (openai SDK): output_tokens_details.accepted_prediction_tokens
        r, acc = self.accepted_delta(lambda: OAI.responses.create(model="stories260K", input=PROMPT,
                                                                  max_output_tokens=40, temperature=0,
                                                                  extra_body=draft))
        self.assertGreater(acc, 20)
        self.assertEqual(r.usage.output_tokens_details.accepted_prediction_tokens, acc)
        self.assertLessEqual(acc, r.usage.output_tokens)
        plain = OAI.responses.create(model="stories260K", input=PROMPT, max_output_tokens=40, temperature=0,
                                     extra_body=off)
        self.assertEqual(plain.output_text, r.output_text)
        self.assertIsNone(getattr(plain.usage.output_tokens_details, "accepted_prediction_tokens", None))

        def responses_stream():
            done = None
            for ev in OAI.responses.create(model="stories260K", input=PROMPT, max_output_tokens=40, temperature=0,
                                           stream=True, extra_body=draft):
                if ev.type in ("response.completed", "response.incomplete"):
                    done = ev.response
            return done

        r, acc = self.accepted_delta(responses_stream)
        self.assertGreater(acc, 20)
        self.assertEqual(r.usage.output_tokens_details.accepted_prediction_tokens, acc)
        # Messages (anthropic SDK): usage.cinfer_accepted_prediction_tokens
        m, acc = self.accepted_delta(lambda: ANT.messages.create(model="stories260K", max_tokens=40, messages=msgs,
                                                                 temperature=0, extra_body=draft))
        self.assertGreater(acc, 20)
        self.assertEqual(m.usage.cinfer_accepted_prediction_tokens, acc)
        self.assertLessEqual(acc, m.usage.output_tokens)
        p = ANT.messages.create(model="stories260K", max_tokens=40, messages=msgs, temperature=0, extra_body=off)
        self.assertEqual(p.content[0].text, m.content[0].text)
        self.assertIsNone(getattr(p.usage, "cinfer_accepted_prediction_tokens", None))

        def messages_stream():
            """The usage of the stream's message_delta event (the final counts)."""
            usage = None
            with ANT.messages.stream(model="stories260K", max_tokens=40, messages=msgs, temperature=0,
                                     extra_body=draft) as st:
                for ev in st:
                    if ev.type == "message_delta":
                        usage = ev.usage
            return usage

        u, acc = self.accepted_delta(messages_stream)
        self.assertGreater(acc, 20)
        self.assertEqual(u.cinfer_accepted_prediction_tokens, acc)

    def test_invalid(self):
        for bad in ({"drafter": "nope"}, {"k": 0}, {"k": 17}, {"k": "3"}, {"extra": 1}, 5, "nope"):
            with self.assertRaises(openai.BadRequestError) as cm:
                chat(bad)
            self.assertEqual(cm.exception.body.get("param"), "cinfer.speculative", bad)


class TestWithoutDraftModel(unittest.TestCase):
    def test_refused(self):
        srv = Server()
        try:
            c = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0, timeout=60)
            with self.assertRaises(openai.APIStatusError):
                c.chat.completions.create(model="stories260K", messages=[{"role": "user", "content": "hi"}],
                                          max_tokens=4, extra_body={"cinfer": {"speculative": "draft"}})
        finally:
            self.assertEqual(srv.stop(), 0)
        p = subprocess.run([BIN, "serve", MODEL, "--port", "0", "--speculative", "draft"], capture_output=True,
                           text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--draft-model", p.stderr)


def greedy_identical(tc, srv, name, drafter):
    """Greedy Chat answers on srv (served with --speculative drafter) are the same with the drafter by name and
    object (k 8), the default and off; /metrics counts its drafts (verified, or dropped by confidence). Returns
    the client."""
    c = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0, timeout=60)
    ask = lambda spec: c.chat.completions.create(
        model=name, messages=[{"role": "user", "content": PROMPT}], max_tokens=32, temperature=0,
        extra_body={"cinfer": {"speculative": spec}} if spec is not None else {})
    before = srv.metrics()
    off = ask("off")
    for spec in (None, drafter, {"drafter": drafter, "k": 8}):
        r = ask(spec)
        tc.assertEqual(r.choices[0].message.content, off.choices[0].message.content, spec)
        tc.assertEqual(r.usage.completion_tokens, off.usage.completion_tokens)
    after = srv.metrics()
    d = lambda k: after.get(k, 0) - before.get(k, 0)
    tc.assertGreater(d('cinfer_spec_draft_tokens_total{drafter="%s"}' % drafter)
                     + d('cinfer_spec_confidence_dropped_total') + d('cinfer_spec_block_cut_total'), 0)
    return c


def refused_on_stories(tc, drafter, want):
    """stories260K (no MTP block, no DSpark tensors) refuses drafter with a 400 naming `want`, and as the server
    default at start."""
    srv = Server()
    try:
        c = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0, timeout=60)
        with tc.assertRaises(openai.BadRequestError) as cm:
            c.chat.completions.create(model="stories260K", messages=[{"role": "user", "content": "hi"}],
                                      max_tokens=4, extra_body={"cinfer": {"speculative": drafter}})
        tc.assertIn(want, str(cm.exception))
    finally:
        tc.assertEqual(srv.stop(), 0)
    p = subprocess.run([BIN, "serve", MODEL, "--port", "0", "--speculative", drafter], capture_output=True,
                       text=True, timeout=60)
    tc.assertNotEqual(p.returncode, 0)
    tc.assertIn(want, p.stderr)


class TestMtp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = os.path.join(cls.tmp.name, "ds2-mtp.gguf")
        subprocess.run([BIN, "mkmodel", "--arch", "deepseek2", "--dim", "64", "--layers", "3", "--heads", "4",
                        "--ffn", "128", "--kv-lora", "32", "--qk-nope", "16", "--qk-rope", "8", "--v-head", "16",
                        "--q-lora", "32", "--experts", "8", "--experts-used", "2", "--expert-ffn", "32",
                        "--shared-experts", "1", "--dense-layers", "1", "--mtp-layers", "1", "--vocab-from", MODEL,
                        "--dtype", "f32", "--seed", "21", cls.model], check=True, capture_output=True)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_mtp_greedy_identical(self):
        srv = Server("--speculative", "mtp", "--spec-k", "3", model=self.model)
        try:
            greedy_identical(self, srv, "ds2-mtp", "mtp")
        finally:
            self.assertEqual(srv.stop(), 0)

    def test_refused_without_mtp(self):
        refused_on_stories(self, "mtp", "MTP")


class TestDspark(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = os.path.join(cls.tmp.name, "ds4-dspark.gguf")
        subprocess.run([BIN, "mkmodel", "--arch", "deepseek4", "--dim", "64", "--layers", "3", "--heads", "4",
                        "--ffn", "64", "--head-dim", "64", "--qk-rope", "16", "--q-lora", "32", "--o-groups", "2",
                        "--o-lora", "32", "--ratios", "4,4,128", "--window", "16", "--index-heads", "8",
                        "--index-dim", "64", "--index-topk", "3", "--experts", "4",
                        "--experts-used", "2", "--expert-ffn", "32", "--shared-experts", "1", "--hash-layers", "1",
                        "--mtp-layers", "1", "--dspark-block", "5", "--dspark-taps", "1,2,3", "--dspark-rank", "32",
                        "--vocab-from", MODEL, "--dtype", "f32", "--seed", "9", cls.model], check=True,
                       capture_output=True)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_dspark_greedy_identical(self):
        srv = Server("--speculative", "dspark", "--spec-k", "4", model=self.model)
        try:
            before = srv.metrics()
            c = greedy_identical(self, srv, "ds4-dspark", "dspark")
            self.assertEqual(srv.metrics().get('cinfer_spec_draft_tokens_total{drafter="mtp"}', 0),
                             before.get('cinfer_spec_draft_tokens_total{drafter="mtp"}', 0))
            with self.assertRaises(openai.BadRequestError) as cm:
                c.chat.completions.create(model="ds4-dspark", messages=[{"role": "user", "content": "hi"}],
                                          max_tokens=4, extra_body={"cinfer": {"speculative": "mtp"}})
            self.assertIn("DSpark", str(cm.exception))
        finally:
            self.assertEqual(srv.stop(), 0)

    def test_refused_without_dspark(self):
        refused_on_stories(self, "dspark", "dspark")


if __name__ == "__main__":
    unittest.main()
