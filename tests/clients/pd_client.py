"""pd_client.py - drives the two steps of the prefill/decode contract (docs/pd.md) the way the
router will, for tests until `cinfer router` exists: step 1 sends the original request to the
prefill worker P with X-Cinfer-Handoff-Id / X-Cinfer-Handoff-To (raw HTTP: its answer is the
handoff JSON), step 2 sends it to the decode worker D with X-Cinfer-Handoff-Id through the
official SDKs (streamed or not), and the same request to a monolithic server M gives the
reference. Every helper returns (text, usage-ish dict) so tests compare greedy outputs."""
import json
import secrets
import threading
import urllib.error
import urllib.request

import anthropic
import openai

MODEL = "stories260K"
CHAT = {"model": MODEL, "messages": [{"role": "system", "content": "Tell a story."},
                                     {"role": "user", "content": "Once upon a time " * 24}],
        "max_tokens": 24, "temperature": 0}
MESSAGES = {"model": MODEL, "system": "Tell a story.", "max_tokens": 24, "temperature": 0,
            "messages": [{"role": "user", "content": "A little bird sang " * 24}]}
RESPONSES = {"model": MODEL, "instructions": "Tell a story.", "input": "The sun was warm and " * 24,
             "max_output_tokens": 24, "temperature": 0}
PATHS = {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses"}


def new_id():
    return secrets.token_hex(16)


def step1(p_url, d_url, api, body, hid, timeout=60, key=None):
    """POST the original request to P as a handoff: (status, parsed JSON)."""
    headers = {"Content-Type": "application/json", "X-Cinfer-Handoff-Id": hid, "X-Cinfer-Handoff-To": d_url}
    if key:
        headers["Authorization"] = "Bearer " + key
    req = urllib.request.Request(p_url + PATHS[api], data=json.dumps(body).encode(), method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def generate(url, api, body, stream, hid=None, timeout=60):
    """The request through the official SDK (with the handoff id when given): (text, cached tokens)."""
    h = {"X-Cinfer-Handoff-Id": hid} if hid else {}
    if api == "messages":
        c = anthropic.Anthropic(base_url=url, api_key="none", max_retries=0, timeout=timeout)
        if stream:
            with c.messages.stream(extra_headers=h, **body) as s:
                text = "".join(s.text_stream)
                m = s.get_final_message()
        else:
            m = c.messages.create(extra_headers=h, **body)
            text = "".join(b.text for b in m.content if b.type == "text")
        return text, m.usage.cache_read_input_tokens or 0
    c = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=timeout)
    if api == "chat":
        if stream:
            text, cached = "", None
            for ch in c.chat.completions.create(extra_headers=h, stream=True, stream_options={"include_usage": True},
                                                **body):
                if ch.choices and ch.choices[0].delta.content:
                    text += ch.choices[0].delta.content
                if ch.usage:
                    cached = ch.usage.prompt_tokens_details.cached_tokens
            return text, cached
        r = c.chat.completions.create(extra_headers=h, **body)
        return r.choices[0].message.content, r.usage.prompt_tokens_details.cached_tokens
    if stream:
        text, final = "", None
        for ev in c.responses.create(extra_headers=h, stream=True, **body):
            if ev.type == "response.output_text.delta":
                text += ev.delta
            if ev.type in ("response.completed", "response.incomplete"):
                final = ev.response
        return text, final.usage.input_tokens_details.cached_tokens
    r = c.responses.create(extra_headers=h, **body)
    return r.output_text, r.usage.input_tokens_details.cached_tokens


def disaggregated(p_url, d_url, api, body, stream, concurrent=False):
    """Both steps, in order or with step 2 sent while step 1 runs: (step-1 answer, text, cached)."""
    hid = new_id()
    if not concurrent:
        st, ans = step1(p_url, d_url, api, body, hid)
        assert st == 200, (st, ans)
        text, cached = generate(d_url, api, body, stream, hid)
        return ans, text, cached
    out = {}
    t = threading.Thread(target=lambda: out.update(r=generate(d_url, api, body, stream, hid)))
    t.start()
    st, ans = step1(p_url, d_url, api, body, hid)
    t.join(120)
    assert st == 200, (st, ans)
    return ans, out["r"][0], out["r"][1]
