"""test_serve_ep.py - expert parallelism: `mpirun -n N cinfer serve --ep` on the tiny DeepSeek-V2
model (4 layers, 3 MoE, 8 routed experts, top-2). Each rank serves on --port + rank; requests are
spread over the ranks. Checks, against the single-process server with the same options:
  - 2 and 4 ranks (4: dual-batch overlap, --ep-micro-batches 2): greedy completions (official openai SDK) sent concurrently (batched), then sent
    again (prefix cache hits, cached_tokens > 0), are identical to the single-process ones;
  - each rank holds only its placement's routed experts (cinfer_ep_experts_held, _expert_bytes: 1/N);
  - live rebalancing (2 ranks, 2 redundant slots, EPLB every 4 busy rounds): outputs stay identical
    across rebalances, which load the moved/replicated experts' weights in the background on their new
    ranks; /metrics reports them, the replica memory and the expert rows per rank;
  - --ep-weight-source peer: the experts a rebalance moves arrive by MPI point-to-point from the rank
    holding them (bytes in = loads x the expert's raw bytes = the other rank's bytes out), outputs identical;
  - deepseek4 (TestDeepseek4): its routed experts are partitioned (1/4 per rank at 4 ranks), move on
    rebalances (from the file, or from a peer), and ranks with mismatching layout options fail fast;
  - `cinfer ep stats` shows every rank, and the rows the ranks computed add up to the rows sent;
  - two hosts (TestTwoHosts, under tests/integration/serve_ep_netns.sh: network namespaces, Open
    MPI's TCP transport): 2 ranks (one per host) and 4 (two per host, rebalancing) likewise;
  - a rank SIGKILLed: the job fails fast (mpirun exits non-zero within seconds, its message names
    the rank), no rank is left serving or hanging, and a new job serves again;
  - the front: `cinfer router` over the ranks' ports answers 503 in the API's error shape (official
    SDK) while the job is down, without hanging, and serves the same outputs again once the job is
    restarted on the same ports.
Needs mpirun (Open MPI): missing, the suite skips (exit 77), or fails under CI=true.
Run by tests/integration/serve_ep.sh."""
import concurrent.futures
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import unittest
import urllib.request

import openai

import fixtures
from cinfer_server import BIN, SHARED, Server

MODEL = os.path.join(SHARED, "models", "tiny", "tiny-deepseek2.gguf")
fixtures.require(MODEL, "model")
MPIRUN = shutil.which("mpirun") or "/usr/bin/mpirun"
fixtures.require(MPIRUN, "mpirun (Open MPI)")
OPTS = ["--ctx", "512", "-t", "1", "--max-batch-tokens", "64", "--kv-memory", "0.02", "--max-seqs", "8"]
PREFIX = "In the beginning the tiny model read a long shared preamble about experts and routers, "
PROMPTS = [PREFIX + s for s in ["one", "two apples", "the third", "a fourth line", "five", "six six six"]] + [
    "Hello world", "The capital of France is", "1 2 3 4 5", "Once upon a time"]
_live = []


def free_base(n):
    """A port p with p..p+n-1 free on loopback (bound and released: a race is possible but harmless)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n >= 65535:
            continue
        try:
            socks = []
            for i in range(n):
                t = socket.socket()
                socks.append(t)
                t.bind(("127.0.0.1", base + i))
            return base
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
    raise RuntimeError("no free port range")


# Two hosts (tests/integration/serve_ep_netns.sh): the namespaces' addresses and mpirun's transport options
NETNS_HOSTS = [h for h in os.environ.get("EP_NETNS_HOSTS", "").split(",") if h]
NETNS_ARGS = os.environ.get("EP_MPIRUN_ARGS", "").split()


class PortTaken(RuntimeError):
    pass


class EpJob:
    def __init__(self, n, *args, base=None, model=MODEL):
        """Starts the job; another process may take a port of the range between free_base and the
        ranks' bind: then a new range is tried (3 times; with a fixed base, the same one)."""
        for attempt in range(3):
            try:
                self.start(n, base, model, *args)
                return
            except PortTaken:
                if attempt == 2:
                    raise
                time.sleep(1)

    def start(self, n, base, model, *args):
        self.n = n
        base = base or free_base(n)
        self.base = base
        place = []
        if NETNS_HOSTS:  # n / len(hosts) ranks per host, in rank order; every rank listens on all addresses
            per = n // len(NETNS_HOSTS)
            place = NETNS_ARGS + ["--host", ",".join("%s:%d" % (h, per) for h in NETNS_HOSTS)]
            args = ("--host", "0.0.0.0") + args
        cmd = [MPIRUN, "--allow-run-as-root", "--oversubscribe"] + place + ["-n", str(n), BIN, "serve", model,
                                                                           "--ep", "--port", str(base)] + OPTS + list(args)
        self.proc = subprocess.Popen(cmd, stderr=subprocess.STDOUT, stdout=subprocess.PIPE, text=True,
                                     start_new_session=True)
        _live.append(self.proc)
        self.log = []
        self.cv = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.time() + 180
        with self.cv:
            while len(self.ports()) < n and self.proc.poll() is None and time.time() < deadline:
                self.cv.wait(0.1)
        if len(self.ports()) < n:
            self.kill()
            if "already in use" in self.text():
                raise PortTaken(self.text())
            raise RuntimeError("the EP job did not start: " + "".join(self.log)[-3000:])
        ports = sorted(self.ports())
        if NETNS_HOSTS:
            per = n // len(NETNS_HOSTS)
            self.urls = ["http://%s:%d" % (NETNS_HOSTS[r // per], p) for r, p in enumerate(ports)]
        else:
            self.urls = ["http://127.0.0.1:%d" % p for p in ports]

    def _read(self):
        for line in self.proc.stdout:
            with self.cv:
                self.log.append(line)
                self.cv.notify_all()

    def text(self):
        with self.cv:
            return "".join(self.log)

    def ports(self):
        return set(int(p) for p in re.findall(r"listening on http://[^:]+:(\d+)", "".join(self.log)))

    def pids(self):
        return {int(r): int(p) for r, p in re.findall(r"rank (\d+) of \d+, pid (\d+)", self.text())}

    def stop(self, timeout=60):
        """SIGTERM to every rank (mpirun itself exits 1 when signalled, even after a clean shutdown)."""
        if self.proc.poll() is None:
            for pid in self.pids().values():
                os.kill(pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                return None
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def metrics(self, rank):
        with urllib.request.urlopen(self.urls[rank] + "/metrics", timeout=30) as r:
            return r.read().decode()

    def settled_metrics(self):
        """Every rank's /metrics once no rank has a staged plan (a rebalance's experts may still be
        moving when the last request ends: its bytes are counted as they arrive, its loads at the
        switch), within 30 s."""
        deadline = time.time() + 30
        while True:
            ms = [self.metrics(r) for r in range(self.n)]
            if all(metric(m, "cinfer_ep_plan_staged") == 0 for m in ms) or time.time() > deadline:
                return ms
            time.sleep(0.2)


def _cleanup():
    for p in _live:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)


import atexit  # noqa: E402

atexit.register(_cleanup)


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def complete(url, prompt):
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)
    r = client.completions.create(model=client.models.list().data[0].id, prompt=prompt, max_tokens=10,
                                  temperature=0)
    return r.choices[0].text, r.usage.prompt_tokens_details.cached_tokens if r.usage.prompt_tokens_details else 0


def run_all(urls, prompts=PROMPTS):
    """Every prompt, all at once, spread round-robin over urls: [(text, cached)]."""
    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as ex:
        futs = [ex.submit(complete, urls[i % len(urls)], p) for i, p in enumerate(prompts)]
        return [f.result() for f in futs]


REFERENCE = None


def reference():
    global REFERENCE
    if REFERENCE is None:
        srv = Server(*OPTS[4:], model=MODEL, ctx=512)
        try:
            REFERENCE = [t for t, _ in run_all([srv.url])]
        finally:
            srv.stop()
    return REFERENCE


class Identity:
    def check_identical(self, n, *args):
        ref = reference()
        job = EpJob(n, *args)
        try:
            first = run_all(job.urls)
            again = run_all(job.urls)  # the shared prefix is cached on every rank now
            ms = job.settled_metrics()
            m0 = ms[0]
            view = subprocess.run([BIN, "ep", "stats"] + [u.split("//", 1)[1] for u in job.urls],
                                  capture_output=True, text=True, timeout=60)
        finally:
            rc = job.stop()
        self.assertEqual([t for t, _ in first], ref)
        self.assertEqual([t for t, _ in again], ref)
        self.assertTrue(any(c > 0 for _, c in again), again)
        self.assertEqual(rc, 0, job.text()[-2000:])
        # `cinfer ep stats`: one row per rank, and the rows computed add up to the rows sent
        self.assertEqual(view.returncode, 0, view.stderr)
        rows = [l.split() for l in view.stdout.splitlines() if re.match(r"\s*\d+\s", l)]
        self.assertEqual([int(r[0]) for r in rows], list(range(n)), view.stdout)
        self.assertEqual(sum(int(r[1]) for r in rows), sum(int(r[2]) for r in rows), view.stdout)
        self.assertIn("ranks %d, experts 8" % n, view.stdout)
        self.ms = ms
        return m0


def metric(text, name, labels=""):
    return float(re.search(r"%s\{[^}]*%s[^}]*\} ([0-9.e+-]+)" % (name, labels), text).group(1))


@unittest.skipIf(NETNS_HOSTS, "single-host suite")
class TestExpertParallel(Identity, unittest.TestCase):
    def check_partitioned(self, n):
        """Each rank holds only its placement's experts: 8 x 3 MoE layers / n, and their bytes."""
        held = [metric(m, "cinfer_ep_experts_held") for m in self.ms]
        self.assertEqual(held, [24 / n] * n)
        per_expert = metric(self.ms[0], "cinfer_ep_expert_bytes") / held[0]
        self.assertGreater(per_expert, 0)
        for m in self.ms:
            self.assertEqual(metric(m, "cinfer_ep_expert_bytes"), per_expert * 24 / n)

    def test_two_ranks(self):
        m = self.check_identical(2)
        self.assertRegex(m, r'cinfer_ep_info\{model_name="[^"]*",rank="0",ranks="2",experts="8",slots="8"')
        computed = int(re.search(r"cinfer_ep_rows_computed_total\{[^}]*\} (\d+)", m).group(1))
        self.assertGreater(computed, 0)
        self.check_partitioned(2)

    def test_four_ranks(self):  # with dual-batch overlap: two micro-batches per round
        self.check_identical(4, "--ep-micro-batches", "2")
        self.check_partitioned(4)

    def test_rebalance(self):
        m = self.check_identical(2, "--ep-redundant", "2", "--ep-rebalance", "4")
        rebal = int(re.search(r"cinfer_ep_rebalances_total\{[^}]*\} (\d+)", m).group(1))
        self.assertGreater(rebal, 0)
        self.assertRegex(m, r'slots="10"')
        replica = int(re.search(r"cinfer_ep_replica_bytes\{[^}]*\} (\d+)", m).group(1))
        self.assertGreater(replica, 0)  # 2 replicas x 3 MoE layers x one expert's bytes
        after = float(re.search(r'cinfer_ep_imbalance\{[^}]*when="after"\} ([0-9.]+)', m).group(1))
        self.assertGreaterEqual(after, 1.0)
        # the replicas are real: each rank holds its 5 slots' experts per layer (a replica placed twice on one
        # rank once), the experts a plan moved were loaded in the background and the old ones freed
        for r, mr in enumerate(self.ms):
            held = metric(mr, "cinfer_ep_experts_held")
            self.assertTrue(12 <= held <= 15, (r, held))
            self.assertEqual(metric(mr, "cinfer_ep_weight_load_bytes_total") > 0,
                             metric(mr, "cinfer_ep_weight_loads_total") > 0)
        loads = sum(metric(mr, "cinfer_ep_weight_loads_total") for mr in self.ms)
        self.assertGreater(loads, 0)
        self.assertGreater(sum(metric(mr, "cinfer_ep_experts_held") for mr in self.ms), 24)  # replicas held

    def test_rebalance_peer(self):
        """--ep-weight-source peer: each expert a rebalance gives a rank arrives by MPI point-to-point from the
        other rank (checksummed), 3 x 256 x 128 f32 = 393216 raw bytes each; outputs identical."""
        self.check_identical(2, "--ep-redundant", "2", "--ep-rebalance", "4", "--ep-weight-source", "peer")
        loads = [metric(m, "cinfer_ep_weight_loads_total") for m in self.ms]
        got = [metric(m, "cinfer_ep_weight_peer_bytes_total", 'dir="in"') for m in self.ms]
        sent = [metric(m, "cinfer_ep_weight_peer_bytes_total", 'dir="out"') for m in self.ms]
        self.assertGreater(sum(loads), 0)
        self.assertEqual(got, [n * 393216 for n in loads])
        self.assertEqual(sent, list(reversed(got)))

    def test_rank_killed(self):
        job = EpJob(2)
        try:
            self.assertEqual(run_all(job.urls)[0][0], reference()[0])
            pids = job.pids()
            self.assertEqual(sorted(pids), [0, 1], job.text())
            t0 = time.time()
            os.kill(pids[1], signal.SIGKILL)
            job.proc.wait(60)
            took = time.time() - t0
        finally:
            job.kill()
        self.assertNotEqual(job.proc.returncode, 0)
        self.assertLess(took, 60)
        # mpirun names the failure: the killed rank's signal, or (when rank 0 noticed first and stopped) a
        # rank's non-zero exit
        self.assertRegex(job.text(), r"process rank 1 with PID \d+ on node \S+ exited on signal 9|"
                         r"1 process returned\s+a non-zero exit code")
        with self.assertRaises(OSError):  # nothing left serving on rank 0's port
            urllib.request.urlopen(job.urls[0] + "/health", timeout=5)
        for pid in pids.values():
            self.assertFalse(alive(pid), "rank pid %d still running" % pid)
        # restart recovers: a new job serves the same outputs
        again = EpJob(2)
        try:
            self.assertEqual([t for t, _ in run_all(again.urls)], reference())
        finally:
            self.assertEqual(again.stop(), 0)


class Ds4Model:
    """An mkmodel deepseek4 (a hash-routed first layer, score layers, a shared expert, clamped SwiGLU),
    its single-process outputs (the reference) and run_job: an EP job's outputs, batched and again with
    prefix hits, checked against them."""
    EXPERT_BYTES = 3 * 64 * 32 * 4  # gate, up, down of one expert: f32 [64 -> 32], [32 -> 64]
    N_EXPERTS = 3 * 8  # 3 MoE blocks x 8 routed experts

    @classmethod
    def setUpClass(cls):
        import tempfile
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = os.path.join(cls.tmp.name, "ds4.gguf")
        subprocess.run([BIN, "mkmodel", "--arch", "deepseek4", "--dim", "64", "--layers", "3", "--heads", "4",
                        "--ffn", "64", "--head-dim", "64", "--qk-rope", "16", "--q-lora", "32", "--o-groups", "2",
                        "--o-lora", "32", "--ratios", "0,4,128", "--window", "16", "--index-heads", "8",
                        "--index-dim", "64", "--index-topk", "6", "--experts", "8", "--experts-used", "2",
                        "--expert-ffn", "32", "--shared-experts", "1", "--hash-layers", "1", "--swiglu-limit", "10",
                        "--ctx", "1024", "--vocab-from", MODEL, "--dtype", "f32", "--seed", "3", cls.model],
                       check=True, capture_output=True)
        # a shared prefix over one 128-token block, so the second pass hits the prefix cache (exact resumption)
        cls.prompts = [PREFIX * 8 + p for p in PROMPTS]
        srv = Server(*(OPTS[4:] + ["--swa-replay", "off"]), model=cls.model, ctx=512)
        try:
            cls.ref = [t for t, _ in run_all([srv.url], cls.prompts)]
        finally:
            srv.stop()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_job(self, n, *args):
        job = EpJob(n, "--swa-replay", "off", *args, model=self.model)
        try:
            first = run_all(job.urls, self.prompts)
            again = run_all(job.urls, self.prompts)
            ms = job.settled_metrics()
        finally:
            rc = job.stop()
        self.assertEqual([t for t, _ in first], self.ref)
        self.assertEqual([t for t, _ in again], self.ref)
        self.assertTrue(any(c > 0 for _, c in again), again)
        self.assertEqual(rc, 0, job.text()[-2000:])
        self.assertGreater(metric(ms[0], "cinfer_ep_rows_computed_total"), 0)
        return ms


@unittest.skipIf(NETNS_HOSTS, "single-host suite")
class TestDeepseek4(Ds4Model, unittest.TestCase):
    """deepseek4 through 2 ranks, rebalancing live, and 4: the single-process outputs; each rank holds
    only its placement's routed experts (hash layer included), and a rebalance moves expert weights
    between ranks."""

    def test_four_ranks_partitioned(self):
        ms = self.run_job(4)
        for m in ms:  # exactly 1/4 of the routed experts and of their bytes on every rank
            self.assertEqual(metric(m, "cinfer_ep_experts_held"), self.N_EXPERTS / 4)
            self.assertEqual(metric(m, "cinfer_ep_expert_bytes"), self.EXPERT_BYTES * self.N_EXPERTS / 4)
            self.assertEqual(metric(m, "cinfer_ep_weight_loads_total"), 0)

    def test_two_ranks_rebalancing(self):
        ms = self.run_job(2, "--ep-redundant", "2", "--ep-rebalance", "4", "--ep-micro-batches", "2")
        self.assertGreater(metric(ms[0], "cinfer_ep_rebalances_total"), 0)
        # each rank holds its 5 slots' experts per block (a replica placed twice on one rank once), with
        # their bytes; the experts a plan moved were loaded in the background and the old ones freed
        for r, m in enumerate(ms):
            held = metric(m, "cinfer_ep_experts_held")
            self.assertTrue(12 <= held <= 15, (r, held))
            self.assertEqual(metric(m, "cinfer_ep_expert_bytes"), held * self.EXPERT_BYTES)
            self.assertEqual(metric(m, "cinfer_ep_weight_load_bytes_total"),
                             metric(m, "cinfer_ep_weight_loads_total") * self.EXPERT_BYTES)
        self.assertGreater(sum(metric(m, "cinfer_ep_weight_loads_total") for m in ms), 0)
        self.assertGreater(sum(metric(m, "cinfer_ep_experts_held") for m in ms), self.N_EXPERTS)  # replicas

    def test_peer_weight_moves(self):
        """--ep-weight-source peer: the moved experts' bytes come from the ranks holding them by MPI
        point-to-point (checksummed), never from the receiver's file; outputs stay identical."""
        ms = self.run_job(2, "--ep-redundant", "2", "--ep-rebalance", "4", "--ep-weight-source", "peer")
        self.assertGreater(metric(ms[0], "cinfer_ep_rebalances_total"), 0)
        loads = [metric(m, "cinfer_ep_weight_loads_total") for m in ms]
        got = [metric(m, "cinfer_ep_weight_peer_bytes_total", 'dir="in"') for m in ms]
        sent = [metric(m, "cinfer_ep_weight_peer_bytes_total", 'dir="out"') for m in ms]
        self.assertGreater(sum(loads), 0)
        # every expert a rank loaded arrived from the other rank: its raw bytes (f32: the resident bytes too)
        self.assertEqual(got, [n * self.EXPERT_BYTES for n in loads])
        self.assertEqual(sent, list(reversed(got)))
        for m in ms:
            self.assertEqual(metric(m, "cinfer_ep_weight_load_bytes_total"),
                             metric(m, "cinfer_ep_weight_loads_total") * self.EXPERT_BYTES)
            self.assertEqual(metric(m, "cinfer_ep_expert_bytes"), metric(m, "cinfer_ep_experts_held") *
                             self.EXPERT_BYTES)

    def test_layout_mismatch_fails_fast(self):
        """Ranks started with different layout options: the job fails within seconds, naming the option."""
        base = free_base(2)
        common = [BIN, "serve", self.model, "--ep", "--port", str(base)] + OPTS + ["--swa-replay", "off"]
        cmd = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-n", "1"] + common + ["--ep-weight-source", "peer"]
        cmd += [":", "-n", "1"] + common + ["--ep-weight-source", "file"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        _live.append(proc)
        try:
            out, _ = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            self.fail("a layout mismatch did not end the job: " + out[-2000:])
        self.assertNotEqual(proc.returncode, 0, out[-2000:])
        self.assertIn("the ranks disagree on --ep-weight-source", out)
        self.assertNotIn("listening on", out)


@unittest.skipIf(NETNS_HOSTS, "single-host suite")
class TestFront(unittest.TestCase):
    def test_router_front_survives_rank_death(self):
        from cinfer_router import Router
        job = EpJob(2)
        router = None
        try:
            router = Router(job.urls, "--policy", "least_requests", "--queue-timeout", "2", "--max-attempts", "2")
            self.assertEqual(complete(router.url, PROMPTS[0])[0], reference()[0])
            os.kill(job.pids()[1], signal.SIGKILL)
            job.proc.wait(60)  # mpirun takes every rank down
            client = openai.OpenAI(base_url=router.url + "/v1", api_key="unused", max_retries=0, timeout=60)
            t0 = time.time()
            with self.assertRaises(openai.APIStatusError) as cm:
                client.completions.create(model="tiny-deepseek2", prompt=PROMPTS[1], max_tokens=4, temperature=0)
            self.assertLess(time.time() - t0, 30)  # the queue timeout (2 s), not a hang
            self.assertEqual(cm.exception.status_code, 503)
            err = cm.exception.body
            self.assertIsInstance(err, dict, cm.exception)
            self.assertIn("message", err)
            self.assertEqual(err.get("type"), "server_error")
            status, _, body = router.http("GET", "/ready")
            self.assertEqual(status, 503, body)
            # restart on the same ports: the router's health checks find the ranks again
            job = EpJob(2, base=job.base)
            router.wait_workers(lambda ws: all(w["healthy"] for w in ws))
            self.assertEqual([t for t, _ in run_all([router.url])], reference())
        finally:
            if router:
                router.stop()
            self.assertEqual(job.stop(), 0)


@unittest.skipUnless(NETNS_HOSTS, "needs two namespaces: run by tests/integration/serve_ep_netns.sh")
class TestDeepseek4TwoHosts(Ds4Model, unittest.TestCase):
    def test_one_rank_per_host(self):
        """deepseek4 with one rank in each namespace (MPI over TCP): the single-process outputs, and
        each rank holds half of the routed experts."""
        for m in self.run_job(2):
            self.assertEqual(metric(m, "cinfer_ep_experts_held"), self.N_EXPERTS / 2)


@unittest.skipUnless(NETNS_HOSTS, "needs two namespaces: run by tests/integration/serve_ep_netns.sh")
class TestTwoHosts(Identity, unittest.TestCase):
    def test_one_rank_per_host(self):
        self.check_identical(2)

    def test_two_ranks_per_host(self):
        self.check_identical(4, "--ep-redundant", "4", "--ep-rebalance", "4")

    def test_peer_moves_across_hosts(self):
        """--ep-weight-source peer across the namespaces: moved experts arrive over TCP from the other host."""
        self.check_identical(2, "--ep-redundant", "2", "--ep-rebalance", "4", "--ep-weight-source", "peer")
        got = [metric(m, "cinfer_ep_weight_peer_bytes_total", 'dir="in"') for m in self.ms]
        sent = [metric(m, "cinfer_ep_weight_peer_bytes_total", 'dir="out"') for m in self.ms]
        self.assertEqual(got, [metric(m, "cinfer_ep_weight_loads_total") * 393216 for m in self.ms])
        self.assertGreater(sum(got), 0)
        self.assertEqual(sent, list(reversed(got)))


if __name__ == "__main__":
    unittest.main()
