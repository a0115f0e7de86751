"""test_reasoning_budget.py - reasoning budgets through `cinfer serve` (docs/serve.md "Reasoning
budget") with the official SDKs: Anthropic thinking.budget_tokens, OpenAI Chat reasoning_effort and
Responses reasoning.effort become the engine's think budget, which forces "</think>" once the
budget is spent.

The model is the TEST-ONLY scripted bigram GGUF (scripted_bigram_model.py) in its think_loop
variant: after <think> it writes "The user", " says hello." forever (never </think> on its own),
and after </think> it answers "Hello! How can I help?" then EOS. So the reasoning of a response is
exactly the budget's tokens, the forced </think> shows up as the end of the thinking block, and
what follows is the model's own answer. Without a budget the model's chain is unchanged (it loops
until max_tokens); with a parser that has no <think> block (llama3) nothing is enforced;
--reasoning-budget-default applies to requests without a budget (here the model opens the block
itself, so the engine finds the start marker in the output).
(The budget-not-reached case on the ordinary scripted model is in test_tool_calls.py: thinking
with budget_tokens 1024 and a 3-token reasoning.)
Run by tests/integration/serve_think_budget.sh."""
import os
import tempfile
import unittest

import anthropic
import openai

import scripted_bigram_model as sbm
from cinfer_server import Server

SRV = None
TMP = None
NAME = "scripted"
OAI = None
ANT = None
HI = [{"role": "user", "content": "hi"}]
ANSWER_TOKENS = 7  # "Hello", "!", " How", " can", " I", " help", "?"


def loop_text(n):
    """The text of the first n reasoning tokens of the looping model."""
    pieces = sbm.SCRIPTS["<|think|>"][1:3]
    return "".join(pieces[i % 2] for i in range(n))


def setUpModule():
    global SRV, TMP, OAI, ANT
    TMP = tempfile.TemporaryDirectory()
    path = sbm.write(os.path.join(TMP.name, NAME + ".gguf"), think_loop=True)
    SRV = Server(model=path, ctx=2048)
    assert "output parser: hermes (detected)" in SRV.log_text(), SRV.log_text()
    OAI = openai.OpenAI(base_url=SRV.url + "/v1", api_key="x", max_retries=0, timeout=60)
    ANT = anthropic.Anthropic(base_url=SRV.url, api_key="x", max_retries=0, timeout=60)


def tearDownModule():
    rc = SRV.stop()
    TMP.cleanup()
    assert rc == 0, "server exit code %r\n%s" % (rc, SRV.log_text()[-3000:])


class TestMessagesBudget(unittest.TestCase):
    def test_budget_tokens(self):
        for budget in (1024, 1500):
            m = ANT.messages.create(model=NAME, max_tokens=budget + 100, messages=HI,
                                    thinking={"type": "enabled", "budget_tokens": budget})
            self.assertEqual([b.type for b in m.content], ["thinking", "text"])
            self.assertEqual(m.content[0].thinking, loop_text(budget))
            self.assertEqual(m.content[1].text, sbm.THINK_ANSWER_TEXT)
            self.assertEqual(m.stop_reason, "end_turn")
            # budget reasoning tokens + the forced </think> + the answer + EOS
            self.assertEqual(m.usage.output_tokens, budget + 1 + ANSWER_TOKENS + 1)

    def test_budget_tokens_stream(self):
        with ANT.messages.stream(model=NAME, max_tokens=1200, messages=HI,
                                 thinking={"type": "enabled", "budget_tokens": 1024}) as s:
            thinking = "".join(e.thinking for e in s if e.type == "thinking")
            final = s.get_final_message()
        self.assertEqual(thinking, loop_text(1024))
        self.assertEqual(final.content[1].text, sbm.THINK_ANSWER_TEXT)
        self.assertEqual(final.usage.output_tokens, 1024 + 1 + ANSWER_TOKENS + 1)

    def test_max_tokens_right_after_the_budget(self):
        # max_tokens leaves room for the forced </think> only: the block closes, no answer
        m = ANT.messages.create(model=NAME, max_tokens=1025, messages=HI,
                                thinking={"type": "enabled", "budget_tokens": 1024})
        self.assertEqual(m.stop_reason, "max_tokens")
        self.assertEqual(m.content[0].thinking, loop_text(1024))
        self.assertEqual(m.usage.output_tokens, 1025)

    def test_thinking_disabled_is_not_enforced(self):
        m = ANT.messages.create(model=NAME, max_tokens=50, messages=HI, thinking={"type": "disabled"})
        # no <think> in the prompt: the model opens the block itself and loops until max_tokens
        self.assertEqual(m.stop_reason, "max_tokens")
        self.assertEqual(m.content[0].thinking, loop_text(49))
        self.assertEqual(m.usage.output_tokens, 50)


class TestChatEffort(unittest.TestCase):
    def test_effort_low(self):
        r = OAI.chat.completions.create(model=NAME, messages=HI, reasoning_effort="low")
        m = r.choices[0].message
        self.assertEqual(m.model_extra["reasoning_content"], loop_text(1024))
        self.assertEqual(m.content, sbm.THINK_ANSWER_TEXT)
        self.assertEqual(r.choices[0].finish_reason, "stop")
        self.assertEqual(r.usage.completion_tokens, 1024 + 1 + ANSWER_TOKENS + 1)
        # the server counts the end marker as reasoning, as it does when the model writes it
        self.assertEqual(r.usage.completion_tokens_details.reasoning_tokens, 1024 + 1)

    def test_effort_low_stream(self):
        chunks = list(OAI.chat.completions.create(model=NAME, messages=HI, reasoning_effort="minimal", stream=True,
                                                  stream_options={"include_usage": True}))
        deltas = [c.choices[0].delta for c in chunks if c.choices]
        self.assertEqual("".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas),
                         loop_text(1024))
        self.assertEqual("".join(d.content or "" for d in deltas), sbm.THINK_ANSWER_TEXT)
        self.assertEqual(chunks[-1].usage.completion_tokens_details.reasoning_tokens, 1024 + 1)

    def test_no_budget_unchanged(self):
        # no effort: no budget; the model writes <think> itself and loops until max_tokens
        r = OAI.chat.completions.create(model=NAME, messages=HI, max_tokens=64)
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.choices[0].message.model_extra["reasoning_content"], loop_text(63))
        self.assertFalse(r.choices[0].message.content)
        # effort none turns thinking off in the template and sets no budget
        r = OAI.chat.completions.create(model=NAME, messages=HI, max_tokens=64, reasoning_effort="none")
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens_details.reasoning_tokens, 64)

    def test_n2_logprobs(self):
        r = OAI.chat.completions.create(model=NAME, messages=HI, reasoning_effort="low", n=2, logprobs=True,
                                        top_logprobs=2, temperature=0)
        self.assertEqual(len(r.choices), 2)
        for ch in r.choices:
            self.assertEqual(ch.message.model_extra["reasoning_content"], loop_text(1024))
            self.assertEqual(ch.message.content, sbm.THINK_ANSWER_TEXT)
            lps = ch.logprobs.content
            self.assertEqual(len(lps), 1024 + 1 + ANSWER_TOKENS)
            self.assertEqual(lps[1024].token, "</think>")
            # the forced token carries the model's own (tiny) probability of it; the model's
            # own choices are near-certain
            self.assertLess(lps[1024].logprob, -20)
            self.assertNotEqual(lps[1024].top_logprobs[0].token, "</think>")
            self.assertGreater(min(t.logprob for i, t in enumerate(lps) if i != 1024), -1e-3)
        self.assertEqual(r.usage.completion_tokens_details.reasoning_tokens, 2 * (1024 + 1))


class TestResponsesEffort(unittest.TestCase):
    def test_effort_low(self):
        r = OAI.responses.create(model=NAME, input="hi", reasoning={"effort": "low"})
        self.assertEqual([o.type for o in r.output], ["reasoning", "message"])
        self.assertEqual(r.output_text, sbm.THINK_ANSWER_TEXT)
        self.assertEqual(r.usage.output_tokens_details.reasoning_tokens, 1024 + 1)
        self.assertEqual(r.usage.output_tokens, 1024 + 1 + ANSWER_TOKENS + 1)


class TestNoThinkParser(unittest.TestCase):
    """--tool-call-parser llama3 has no <think> block: the budget has no markers, nothing is forced."""

    def test_not_enforced(self):
        srv = Server("--tool-call-parser", "llama3", model=os.path.join(TMP.name, NAME + ".gguf"), ctx=2048)
        try:
            oai = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0, timeout=60)
            r = oai.chat.completions.create(model=NAME, messages=HI, reasoning_effort="low", max_tokens=1100)
            self.assertEqual(r.choices[0].finish_reason, "length")
            self.assertEqual(r.usage.completion_tokens, 1100)
            self.assertEqual(r.choices[0].message.content, loop_text(1100))
        finally:
            self.assertEqual(srv.stop(), 0)


class TestDefaultBudget(unittest.TestCase):
    """--reasoning-budget-default 100: requests that set no budget get it, unless thinking is off."""

    def test_default(self):
        srv = Server("--reasoning-budget-default", "100", model=os.path.join(TMP.name, NAME + ".gguf"), ctx=2048)
        try:
            oai = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0, timeout=60)
            ant = anthropic.Anthropic(base_url=srv.url, api_key="x", max_retries=0, timeout=60)
            # no effort: the prompt does not open the block; the model writes <think> itself (the
            # engine sees the start marker), reasons 100 tokens, </think> is forced, the answer follows
            r = oai.chat.completions.create(model=NAME, messages=HI)
            self.assertEqual(r.choices[0].message.model_extra["reasoning_content"], loop_text(100))
            self.assertEqual(r.choices[0].message.content, sbm.THINK_ANSWER_TEXT)
            self.assertEqual(r.usage.completion_tokens, 1 + 100 + 1 + ANSWER_TOKENS + 1)
            self.assertEqual(r.usage.completion_tokens_details.reasoning_tokens, 1 + 100 + 1)
            # the request's own budget wins
            m = ant.messages.create(model=NAME, max_tokens=1200, messages=HI,
                                    thinking={"type": "enabled", "budget_tokens": 1024})
            self.assertEqual(m.content[0].thinking, loop_text(1024))
            # thinking turned off: no budget
            r = oai.chat.completions.create(model=NAME, messages=HI, reasoning_effort="none", max_tokens=300)
            self.assertEqual(r.choices[0].finish_reason, "length")
            self.assertEqual(r.usage.completion_tokens_details.reasoning_tokens, 300)
        finally:
            self.assertEqual(srv.stop(), 0)
