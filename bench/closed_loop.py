"""closed_loop.py - a closed-loop replay of the Mooncake conversation trace (bench/swa_replay_serve.py).

Why: an open-loop replay (requests sent at their trace timestamps, `cinfer bench serve --workload
trace`) on a loaded machine completes different requests per server configuration (timeouts,
stragglers at the end), so their prefill totals cannot be compared. Here a fixed number of
sessions run at once; each sends its next turn only after the previous one completed plus its
think time; when a conversation ends the next one starts. Every configuration therefore sends
exactly the same requests, and a run is only valid when every one of them completed (the caller
checks).

Conversations: trace lines grouped by shared hash-id prefixes (a line continues the earlier line
whose first k >= 2 hash ids it shares, longest k; hash id 0, the trace's common first block, alone
does not link). A turn's prompt is built from its own hash ids, as the trace says (a Mooncake turn
does not always extend its predecessor: it may branch from an earlier prefix). Token-id prompts:
each hash id is a block of `block` token ids drawn from a generator seeded by the id (equal ids,
equal tokens), the input scaled from 512-token blocks like `cinfer bench serve --block-scale`.
Think time: the trace's gap between the two turns divided by the time scale, clamped to
[min_think, max_think] seconds.

Measured per request: TTFT (first streamed token), latency, usage (prompt, cached, replayed
tokens). Streaming Completions API with stream_options.include_usage."""
import http.client
import json
import queue
import random
import threading
import time

TRACE_BLOCK = 512


def load_conversations(trace, first_line, n_lines, min_turns, max_turns):
    """Conversations (lists of trace records in order) from lines [first_line, first_line + n_lines)
    with at least min_turns turns, each cut to its first max_turns turns, ordered by first line."""
    recs = []
    with open(trace) as f:
        for i, line in enumerate(f):
            if i >= first_line + n_lines:
                break
            if i >= first_line:
                recs.append(json.loads(line))
    first, parent = {}, []
    for j, r in enumerate(recs):
        h = tuple(r["hash_ids"])
        parent.append(next((first[h[:k]] for k in range(len(h) - 1, 1, -1) if h[:k] in first), None))
        for k in range(2, len(h) + 1):
            first.setdefault(h[:k], j)
    chains = {}
    for j, p in enumerate(parent):
        root = j
        while parent[root] is not None:
            root = parent[root]
        chains.setdefault(root, []).append(j)
    return [[recs[j] for j in c[:max_turns]] for root, c in sorted(chains.items()) if len(c) >= min_turns]


def scaled_input(rec, block):
    """The input length at `block` tokens per hash id (as bs_trace_scaled_input): proportional,
    rounded up, clamped so the last block is partial but not empty."""
    n = len(rec["hash_ids"])
    v = -(-rec["input_length"] * block // TRACE_BLOCK)
    return max((n - 1) * block + 1, min(v, n * block))


def prompt_ids(rec, block, vocab_lo, vocab_hi):
    out = []
    n_in = scaled_input(rec, block)
    for hid in rec["hash_ids"]:
        g = random.Random(hid * 1000003 + 17)
        out.extend(g.randrange(vocab_lo, vocab_hi) for _ in range(block))
    return out[:n_in]


class Turn:
    __slots__ = ("session", "turn", "prompt_tokens", "cached", "replayed", "ttft", "latency", "error")

    def __init__(self, session, turn):
        self.session, self.turn = session, turn
        self.prompt_tokens = self.cached = self.replayed = 0
        self.ttft = self.latency = 0.0
        self.error = None


def send(host, port, body, timeout, rec):
    """One streamed completion; fills rec (usage, TTFT, latency) or rec.error."""
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection(host, port, timeout=timeout)
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        resp = c.getresponse()
        if resp.status != 200:
            rec.error = "HTTP %d: %s" % (resp.status, resp.read(300).decode("utf-8", "replace"))
            return
        usage, done = None, False
        for raw in resp:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            ev = json.loads(data)
            if "error" in ev:
                rec.error = "stream error: %s" % ev["error"]
                return
            if ev.get("choices") and ev["choices"][0].get("text") and not rec.ttft:
                rec.ttft = time.monotonic() - t0
            if ev.get("usage"):
                usage = ev["usage"]
        c.close()
        if not done or not usage:
            rec.error = "stream ended without [DONE] or usage"
            return
        d = usage.get("prompt_tokens_details") or {}
        rec.prompt_tokens = usage["prompt_tokens"]
        rec.cached = d.get("cached_tokens", 0)
        rec.replayed = d.get("replayed_tokens", 0)
        rec.latency = time.monotonic() - t0
        if not rec.ttft:
            rec.ttft = rec.latency
    except (OSError, ValueError, http.client.HTTPException) as e:
        rec.error = "%s: %s" % (type(e).__name__, e)


def run(url_host, url_port, conversations, opts):
    """Runs every conversation, opts.concurrency at a time; returns the Turn records in
    (session, turn) order. opts: block, vocab_lo, vocab_hi, max_output, time_scale, min_think,
    max_think, timeout, concurrency."""
    work = queue.Queue()
    for i, conv in enumerate(conversations):
        work.put((i, conv))
    out, lock = [], threading.Lock()

    def worker():
        while True:
            try:
                si, conv = work.get_nowait()
            except queue.Empty:
                return
            for k, rec in enumerate(conv):
                if k:
                    gap = (rec["timestamp"] - conv[k - 1]["timestamp"]) / 1000.0 / opts.time_scale
                    time.sleep(min(max(gap, opts.min_think), opts.max_think))
                t = Turn(si, k)
                body = {"prompt": prompt_ids(rec, opts.block, opts.vocab_lo, opts.vocab_hi),
                        "max_tokens": max(1, min(rec["output_length"], opts.max_output)), "temperature": 0,
                        "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
                send(url_host, url_port, body, opts.timeout, t)
                with lock:
                    out.append(t)
                if t.error:  # the session stops: its later turns would not be the trace's
                    break

    threads = [threading.Thread(target=worker) for _ in range(opts.concurrency)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return sorted(out, key=lambda t: (t.session, t.turn))
