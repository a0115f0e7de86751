#!/usr/bin/env python3
"""ep_serve.py - expert parallelism end to end: tokens/s of `cinfer serve` alone and of
`mpirun -n N cinfer serve --ep` (N = 2, 4) on the same MoE model and load, in one run, plus each
EP run's time split from the ranks' /metrics (all-to-all, expert compute, idle backoff of the
round threads; the rest of a step is attention/dense/sampling on the engine thread). Each rank
count runs twice, without and with rebalancing (--rebalance T): the realized rank load imbalance
(max/mean rows computed over the timed load) of both, and EPLB's own before/after on its window.

With --micro-batches 1,2 each configuration also runs with dual-batch overlap (--ep-micro-batches 2),
so the step-time split before/after is in the same run.

Load: R concurrent greedy completions of M tokens each (distinct prompts), spread round-robin over
the ranks' ports. The machine is shared and small: read ratios within one run.

  python3 bench/ep_serve.py --bin build/cinfer --model ../shared/models/tiny/tiny-deepseek2.gguf
"""
import argparse
import concurrent.futures
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request


def free_base(n):
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        ok = base + n < 65535
        socks = []
        try:
            for i in range(n):
                t = socket.socket()
                socks.append(t)
                t.bind(("127.0.0.1", base + i))
        except OSError:
            ok = False
        for t in socks:
            t.close()
        if ok:
            return base
    raise RuntimeError("no free port range")


class Job:
    def __init__(self, cmd, n):
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        self.log = []
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.time() + 120
        while len(self.ports()) < n and time.time() < deadline and self.proc.poll() is None:
            time.sleep(0.1)
        if len(self.ports()) < n:
            self.kill()
            sys.exit("did not start: " + "".join(self.log)[-2000:])
        self.urls = ["http://127.0.0.1:%d" % p for p in sorted(self.ports())]

    def _read(self):
        for line in self.proc.stdout:
            self.log.append(line)

    def ports(self):
        return set(int(p) for p in re.findall(r"listening on http://[^:]+:(\d+)", "".join(self.log)))

    def pids(self):
        return [int(p) for p in re.findall(r"rank \d+ of \d+, pid (\d+)", "".join(self.log))]

    def stop(self):
        pids = self.pids() or [self.proc.pid]
        for p in pids:
            os.kill(p, signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def complete(url, prompt, n_tokens):
    body = json.dumps({"prompt": prompt, "max_tokens": n_tokens, "temperature": 0, "ignore_eos": True}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())["usage"]["completion_tokens"]


def load(urls, n_req, n_tokens):
    prompts = ["Request %d: the experts of layer %d route tokens %s" % (i, i % 3, "x " * (i % 7)) for i in range(n_req)]
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(n_req) as ex:
        toks = sum(ex.map(lambda ip: complete(urls[ip[0] % len(urls)], ip[1], n_tokens), enumerate(prompts)))
    return toks, time.time() - t0


def ep_metrics(urls):
    out = {}
    for u in urls:
        with urllib.request.urlopen(u + "/metrics", timeout=30) as r:
            for line in r.read().decode().splitlines():
                m = re.match(r'(cinfer_ep_\w+)\{[^}]*rank="(\d+)"([^}]*)\} ([0-9.e+-]+)$', line)
                if m:
                    out[(m.group(1), int(m.group(2)), m.group(3))] = float(m.group(4))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/cinfer")
    ap.add_argument("--model", required=True)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--rebalance", type=int, default=8, help="--ep-rebalance for the EP runs (0: off)")
    ap.add_argument("--redundant", type=int, default=2)
    ap.add_argument("--micro-batches", default="1",
                    help="--ep-micro-batches values to run each EP configuration with (e.g. 1,2: dual-batch overlap "
                         "off and on)")
    a = ap.parse_args()
    opts = ["--ctx", "512", "-t", "1", "--max-batch-tokens", "256", "--kv-memory", "0.05", "--max-seqs", "16",
            "--log-level", "warn"]
    print("# ep_serve: %d concurrent greedy completions x %d tokens; model %s" % (a.requests, a.tokens, a.model))
    base = free_base(1)
    job = Job([a.bin, "serve", a.model, "--port", str(base)] + opts, 1)
    try:
        load(job.urls, 2, 4)  # warm-up
        toks, dt = load(job.urls, a.requests, a.tokens)
    finally:
        job.stop()
    single = toks / dt
    print("single-process  tokens/s %8.1f  (%d tokens in %.2f s)" % (single, toks, dt))
    runs = [(int(x), rb, int(mb)) for x in a.ranks.split(",") for rb in ([0, a.rebalance] if a.rebalance else [0])
            for mb in a.micro_batches.split(",")]
    for n, rebalance, mb in runs:
        base = free_base(n)
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "mpi_yield_when_idle", "1", "-n", str(n),
               a.bin, "serve", a.model, "--ep", "--port", str(base), "--ep-redundant", str(a.redundant),
               "--ep-rebalance", str(rebalance), "--ep-micro-batches", str(mb)] + opts
        job = Job(cmd, n)
        try:
            load(job.urls, 2, 4)
            m0 = ep_metrics(job.urls)
            toks, dt = load(job.urls, a.requests, a.tokens)
            m1 = ep_metrics(job.urls)
        finally:
            job.stop()
        d = lambda name, rank, extra="": m1.get((name, rank, extra), 0) - m0.get((name, rank, extra), 0)
        computed = [d("cinfer_ep_rows_computed_total", r) for r in range(n)]
        realized = max(computed) * n / sum(computed) if sum(computed) else 1.0
        print("ep %d ranks, %d micro-batch%s, rebalance %s: tokens/s %8.1f  (%d tokens in %.2f s)  ratio to single %.2f; "
              "realized rank load imbalance (max/mean rows computed) %.3f" %
              (n, mb, "es" if mb > 1 else "", "every %d rounds" % rebalance if rebalance else "off", toks / dt, toks, dt, toks / dt / single,
               realized))
        for r in range(n):
            a2a = d("cinfer_ep_seconds_total", r, ',phase="alltoall"')
            comp = d("cinfer_ep_seconds_total", r, ',phase="compute"')
            idle = d("cinfer_ep_seconds_total", r, ',phase="idle"')
            rows = d("cinfer_ep_rows_computed_total", r)
            sent = d("cinfer_ep_rows_sent_total", r)
            byts = d("cinfer_ep_bytes_total", r, ',direction="sent"')
            print("  rank %d: wall %.2f s = alltoall %.2f + expert compute %.2f + idle %.2f + engine rest %.2f; "
                  "rows computed %d, sent %d, cross-rank bytes/row %.0f" %
                  (r, dt, a2a, comp, idle, max(dt - a2a - comp - idle, 0), rows, sent, byts / sent if sent else 0))
        print("  rebalances %d; imbalance (max/mean rank load, mean over MoE layers) before %.3f after %.3f; "
              "replica bytes %d" % (m1.get(("cinfer_ep_rebalances_total", 0, ""), 0),
                                     m1.get(("cinfer_ep_imbalance", 0, ',when="before"'), 0),
                                     m1.get(("cinfer_ep_imbalance", 0, ',when="after"'), 0),
                                     m1.get(("cinfer_ep_replica_bytes", 0, ""), 0)))


if __name__ == "__main__":
    main()
