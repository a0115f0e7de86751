"""test_openai_chat.py - `cinfer serve` driven by the official openai SDK (pinned in
requirements.txt): chat non-streaming and streaming, completions (checked against
`cinfer run`), n=2, stop strings, seed reproducibility, cached_tokens on a repeated
prompt, logprobs, the vLLM extras (extra_body), /v1/models, /tokenize and /detokenize. Run by
tests/integration/serve_openai.sh with the project venv."""
import json
import subprocess
import unittest

import openai

from cinfer_server import BIN, MODEL, MODEL_NAME, Server

SRV = None
CLIENT = None
PROMPT = "Once upon a time"


def setUpModule():
    global SRV, CLIENT
    SRV = Server()
    CLIENT = openai.OpenAI(base_url=SRV.url + "/v1", api_key="unused", max_retries=0, timeout=60)


def tearDownModule():
    rc = SRV.stop()
    assert rc == 0, "server exit code %r\n%s" % (rc, SRV.log_text()[-3000:])


def chat(**kw):
    args = dict(model=MODEL_NAME, messages=[{"role": "user", "content": "Tell me a story."}], max_tokens=24,
                temperature=0)
    args.update(kw)
    return CLIENT.chat.completions.create(**args)


def greedy_completion(prompt=PROMPT, n=24, **kw):
    return CLIENT.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=n, temperature=0, **kw)


class TestChat(unittest.TestCase):
    def test_non_streaming(self):
        r = chat()
        self.assertEqual(r.object, "chat.completion")
        self.assertTrue(r.id.startswith("chatcmpl-"))
        self.assertEqual(r.model, MODEL_NAME)
        self.assertEqual(len(r.choices), 1)
        c = r.choices[0]
        self.assertEqual(c.message.role, "assistant")
        self.assertTrue(c.message.content)
        self.assertIn(c.finish_reason, ("stop", "length"))
        self.assertGreater(r.usage.prompt_tokens, 0)
        self.assertTrue(0 < r.usage.completion_tokens <= 24)
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens)
        self.assertIsInstance(r.usage.prompt_tokens_details.cached_tokens, int)

    def test_chat_stop_string(self):
        # a stop string that occurs: finish_reason "stop", the text cut before it, and vLLM's
        # stop_reason names the string (the engine reports which one matched)
        full = chat(max_tokens=40).choices[0].message.content
        words = full.split()
        self.assertGreater(len(words), 3, full)
        word = words[2]
        c = chat(max_tokens=40, stop=["zq-never-occurs", word]).choices[0]
        self.assertEqual(c.finish_reason, "stop")
        self.assertEqual(c.message.content or "", full[:full.index(word)])
        self.assertEqual(c.model_extra.get("stop_reason"), word)
        chunks = list(chat(max_tokens=40, stop=[word], stream=True))
        self.assertEqual([ch.choices[0].finish_reason for ch in chunks if ch.choices][-1], "stop")
        self.assertEqual("".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices),
                         full[:full.index(word)])

    def test_vllm_extras(self):
        # extra_body fields are honoured, never ignored: include_stop_str_in_output keeps the
        # matched stop string, min_tokens holds EOS back (a -100 bias... here +100 on EOS, id 2),
        # ignore_eos runs to max_tokens, stop_token_ids ends at the first such id
        full = chat(max_tokens=40).choices[0].message.content
        word = full.split()[2]
        c = chat(max_tokens=40, stop=[word], extra_body={"include_stop_str_in_output": True}).choices[0]
        self.assertEqual(c.finish_reason, "stop")
        self.assertEqual(c.message.content, full[:full.index(word) + len(word)])
        r = chat(max_tokens=12, logit_bias={"2": 100}, extra_body={"min_tokens": 5})
        self.assertEqual(r.choices[0].finish_reason, "stop")
        self.assertEqual(r.usage.completion_tokens, 6)
        r = chat(max_tokens=12, logit_bias={"2": 100}, extra_body={"ignore_eos": True})
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens, 12)
        st, _, body = SRV.http("POST", "/tokenize", {"prompt": full, "add_special_tokens": False})
        self.assertEqual(st, 200, body)
        ids = json.loads(body)["tokens"]
        r = chat(max_tokens=40, extra_body={"stop_token_ids": [ids[3]]})
        self.assertEqual(r.choices[0].finish_reason, "stop")
        self.assertLessEqual(r.usage.completion_tokens, 4)

    def test_streaming_matches_non_streaming(self):
        full = chat(max_tokens=40).choices[0]
        chunks = list(chat(max_tokens=40, stream=True, stream_options={"include_usage": True}))
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        ids = {c.id for c in chunks}
        self.assertEqual(len(ids), 1)
        self.assertTrue(all(c.object == "chat.completion.chunk" for c in chunks))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        self.assertEqual(text, full.message.content)
        finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        self.assertEqual(finishes, [full.finish_reason])
        self.assertEqual(chunks[-1].choices, [])
        self.assertIsNotNone(chunks[-1].usage)
        self.assertGreater(chunks[-1].usage.completion_tokens, 0)
        self.assertTrue(all(c.usage is None for c in chunks[:-1]))

    def test_streaming_without_usage(self):
        chunks = list(chat(stream=True))
        self.assertTrue(all(c.choices for c in chunks))
        self.assertTrue(chunks[-1].choices[0].finish_reason)

    def test_n2_seeded(self):
        r = chat(n=2, temperature=1.0, seed=7, max_tokens=32)
        self.assertEqual(sorted(c.index for c in r.choices), [0, 1])
        self.assertNotEqual(r.choices[0].message.content, r.choices[1].message.content)
        r2 = chat(n=2, temperature=1.0, seed=7, max_tokens=32)
        self.assertEqual([c.message.content for c in r.choices], [c.message.content for c in r2.choices])
        # prompt counted once, completions summed
        self.assertEqual(r.usage.prompt_tokens, chat(max_tokens=1).usage.prompt_tokens)

    def test_n2_streaming(self):
        texts = {0: "", 1: ""}
        fin = {}
        for ch in chat(n=2, temperature=1.0, seed=3, stream=True, max_tokens=16):
            for c in ch.choices:
                texts[c.index] += c.delta.content or ""
                if c.finish_reason:
                    fin[c.index] = c.finish_reason
        self.assertEqual(set(fin), {0, 1})
        self.assertTrue(texts[0] and texts[1])

    def test_seed_reproducible(self):
        a = chat(temperature=1.0, seed=42, max_tokens=32).choices[0].message.content
        b = chat(temperature=1.0, seed=42, max_tokens=32).choices[0].message.content
        c = chat(temperature=1.0, seed=43, max_tokens=32).choices[0].message.content
        self.assertEqual(a, b)
        self.assertNotEqual(a, c)

    def test_cached_tokens_on_repeat(self):
        long_prompt = "The little dog ran to the park and played with a red ball all day long. " * 4
        msgs = [{"role": "user", "content": long_prompt}]
        first = chat(messages=msgs, max_tokens=4)
        second = chat(messages=msgs, max_tokens=4)
        p = second.usage.prompt_tokens
        self.assertGreater(p, 48)
        cached = second.usage.prompt_tokens_details.cached_tokens
        self.assertGreaterEqual(cached, 32, "repeated prompt should be served from the prefix cache")
        self.assertLess(cached, p)
        self.assertEqual(cached % 16, 0)
        self.assertLessEqual(first.usage.prompt_tokens_details.cached_tokens, cached)

    def test_content_parts_and_system(self):
        r = chat(messages=[{"role": "developer", "content": "Be brief."},
                           {"role": "user", "content": [{"type": "text", "text": "Tell me "},
                                                        {"type": "text", "text": "a story."}]}])
        self.assertTrue(r.choices[0].message.content)

    def test_logprobs(self):
        r = chat(logprobs=True, top_logprobs=3, max_tokens=8)
        lp = r.choices[0].logprobs.content
        self.assertEqual(len(lp), r.usage.completion_tokens - (1 if r.choices[0].finish_reason == "stop" else 0))
        self.assertTrue(all(e.logprob <= 0 for e in lp))
        self.assertEqual("".join(e.token for e in lp).strip(), r.choices[0].message.content.strip())
        for e in lp:  # greedy: the chosen token is the most likely alternative
            self.assertEqual(len(e.top_logprobs), 3)
            self.assertEqual(e.top_logprobs[0].token, e.token)
            self.assertAlmostEqual(e.top_logprobs[0].logprob, e.logprob, places=5)
            self.assertEqual([t.logprob for t in e.top_logprobs], sorted((t.logprob for t in e.top_logprobs),
                                                                         reverse=True))
        streamed = [c.choices[0].logprobs for c in chat(logprobs=True, top_logprobs=2, max_tokens=8, stream=True)
                    if c.choices and c.choices[0].logprobs]
        tokens = [e.token for part in streamed for e in part.content]
        self.assertEqual(tokens, [e.token for e in lp])
        self.assertTrue(all(len(e.top_logprobs) == 2 for part in streamed for e in part.content))


class TestCompletions(unittest.TestCase):
    def test_matches_cinfer_run(self):
        r = greedy_completion(n=24)
        self.assertEqual(r.object, "text_completion")
        self.assertTrue(r.id.startswith("cmpl-"))
        out = subprocess.run([BIN, "run", "-m", MODEL, "-p", PROMPT, "-n", "24", "--temp", "0", "--no-echo",
                              "--ctx", "512", "-t", "1"], capture_output=True, text=True, check=True).stdout
        self.assertEqual(r.choices[0].text, out.rstrip("\n"))
        self.assertEqual(r.usage.prompt_tokens, 5)  # BOS + 4 (tests/integration/tokenize.sh)

    def test_token_prompt(self):
        a = greedy_completion(prompt=[1, 403, 407, 261, 378], n=12).choices[0].text
        b = greedy_completion(n=12).choices[0].text
        self.assertEqual(a, b)

    def test_stop_strings(self):
        full = greedy_completion(n=40).choices[0].text
        words = full.split(" ")
        self.assertGreater(len(words), 4)
        stop = " " + words[3]
        cut = greedy_completion(n=40, stop=[stop, "zzzq"]).choices[0]
        self.assertEqual(cut.text, full[:full.index(stop)])
        self.assertEqual(cut.finish_reason, "stop")
        chunks = list(CLIENT.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=40, temperature=0,
                                                stop=stop, stream=True))
        self.assertEqual("".join(c.choices[0].text for c in chunks if c.choices), cut.text)

    def test_logprobs(self):
        r = greedy_completion(n=6, logprobs=2)
        lp = r.choices[0].logprobs
        self.assertEqual(len(lp.tokens), len(lp.token_logprobs))
        self.assertEqual("".join(lp.tokens), r.choices[0].text)
        for tok, tlp, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
            self.assertLessEqual(len(top), 2)
            self.assertAlmostEqual(top[tok], tlp, places=5)
        self.assertEqual(lp.text_offset[0], 0)
        offsets = [o for c in CLIENT.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=6, temperature=0,
                                                        logprobs=1, stream=True)
                   if c.choices and c.choices[0].logprobs for o in c.choices[0].logprobs.text_offset]
        self.assertEqual(offsets, lp.text_offset)


class TestMisc(unittest.TestCase):
    def test_models(self):
        ms = CLIENT.models.list()
        self.assertEqual([m.id for m in ms.data], [MODEL_NAME])
        self.assertEqual(CLIENT.models.retrieve(MODEL_NAME).id, MODEL_NAME)
        with self.assertRaises(openai.NotFoundError):
            CLIENT.models.retrieve("gpt-17")

    def test_tokenize_detokenize(self):
        import json
        st, _, body = SRV.http("POST", "/tokenize", {"model": MODEL_NAME, "prompt": PROMPT})
        self.assertEqual(st, 200)
        t = json.loads(body)
        self.assertEqual(t["tokens"], [1, 403, 407, 261, 378])
        self.assertEqual(t["count"], 5)
        st, _, body = SRV.http("POST", "/detokenize", {"tokens": t["tokens"]})
        self.assertEqual(st, 200)
        self.assertEqual(json.loads(body)["prompt"], PROMPT)
        st, _, body = SRV.http("POST", "/tokenize", {"messages": [{"role": "user", "content": "hi"}]})
        self.assertEqual(st, 200)
        self.assertEqual(json.loads(body)["count"], chat(messages=[{"role": "user", "content": "hi"}],
                                                         max_tokens=1).usage.prompt_tokens)

    def test_user_text_cannot_forge_special_tokens(self):
        import json
        # <s> and </s> are stories260K's BOS/EOS control tokens: in user content they must stay text
        st, _, body = SRV.http("POST", "/tokenize", {"messages": [{"role": "user", "content": "hi <s> there</s>"}]})
        self.assertEqual(st, 200)
        toks = json.loads(body)["tokens"]
        self.assertEqual(toks.count(1), 1)  # only the leading BOS
        self.assertEqual(toks[0], 1)
        self.assertNotIn(2, toks)
        r = chat(messages=[{"role": "user", "content": "<s></s><s>"}], max_tokens=4)
        self.assertEqual(r.usage.prompt_tokens, len(json.loads(SRV.http(
            "POST", "/tokenize", {"messages": [{"role": "user", "content": "<s></s><s>"}]})[2])["tokens"]))

    def test_health_ready(self):
        self.assertEqual(SRV.http("GET", "/health")[0], 200)
        self.assertEqual(SRV.http("GET", "/ready")[0], 200)

    def test_request_log(self):
        chat(max_tokens=2)
        self.assertTrue(SRV.wait_log(r"request chatcmpl-\S+ POST /v1/chat/completions status=200 prompt_tokens=\d+ "
                                     r"cached_tokens=\d+ completion_tokens=\d+ ttft=[0-9.]+s duration=[0-9.]+s"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
