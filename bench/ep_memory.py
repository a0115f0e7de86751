#!/usr/bin/env python3
"""ep_memory.py - memory per rank of expert parallelism: with `--ep` each rank keeps only the routed
experts its placement gives it, so its resident memory should fall with the rank count. Runs, in one
go, `cinfer serve` alone and `mpirun -n N cinfer serve --ep` for each N, sends a few greedy
completions (so every weight a rank uses has been touched), then reads every rank's
/proc/PID/status (VmRSS, RssAnon, RssFile) and its cinfer_ep_expert_bytes / _experts_held. Extra
runs: N=2 with --ep-redundant R (replicas now cost memory) and N=2 rebalancing every T busy rounds
(moved experts are loaded on their new rank and freed on the old one; the memory stays that of the
held experts).

  python3 bench/ep_memory.py --bin build/cinfer --model MODEL.gguf [--ranks 2,4] [--redundant 8]
      [--peer] [--extra "--swa-replay off"]
--peer adds a rebalancing run whose moved experts come from the other rank over MPI
(--ep-weight-source peer); --extra is appended to every serve command. Memory is read once no
rebalance is in flight (cinfer_ep_plan_staged 0 on every rank).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ep_serve import Job, ep_metrics, free_base, load  # noqa: E402

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "mpi_yield_when_idle", "1"]


def status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile"):
                out[k] = int(v.split()[0]) / 1024.0  # MiB
    return out


def run(label, cmd, n, ep, requests):
    job = Job(cmd, n)
    try:
        load(job.urls, requests, 8)
        load(job.urls, requests, 8)
        pids = job.pids() or [job.proc.pid]
        rows = []
        m = ep_metrics(job.urls) if ep else {}
        for _ in range(60):  # a rebalance still moving weights holds both plans' experts (and, peer, the
            if not any(m.get(("cinfer_ep_plan_staged", r, ""), 0) for r in range(n)):  # transfers): wait it out
                break
            time.sleep(0.5)
            m = ep_metrics(job.urls)
        for r, pid in enumerate(pids):
            st = status(pid)
            held = m.get(("cinfer_ep_experts_held", r, ""), float("nan"))
            eb = m.get(("cinfer_ep_expert_bytes", r, ""), float("nan")) / 2**20
            loads = m.get(("cinfer_ep_weight_loads_total", r, ""), 0)
            rows.append((r, st["VmRSS"], st["RssAnon"], st["RssFile"], held, eb, loads))
    finally:
        job.stop()
    for r, rss, anon, fil, held, eb, loads in rows:
        print("%-26s %4d %9.1f %9.1f %9.1f %8s %10s %6s" % (label, r, rss, anon, fil, "-" if held != held else
                                                             "%d" % held, "-" if eb != eb else "%.1f" % eb,
                                                             "%d" % loads if ep else "-"))
    return sum(x[1] for x in rows) / len(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/cinfer")
    ap.add_argument("--model", required=True)
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--redundant", type=int, default=8)
    ap.add_argument("--rebalance", type=int, default=16)
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--peer", action="store_true")
    ap.add_argument("--extra", default="")
    a = ap.parse_args()
    # info level: the ranks log their pids (Job.pids)
    opts = ["--ctx", "256", "-t", "1", "--max-batch-tokens", "64", "--kv-memory", "0.01", "--max-seqs", "8"] + a.extra.split()
    print("# ep_memory: model %s; %d greedy completions x 8 tokens twice, then /proc/PID/status per rank (MiB)"
          % (a.model, a.requests))
    print("%-26s %4s %9s %9s %9s %8s %10s %6s" % ("run", "rank", "VmRSS", "RssAnon", "RssFile", "experts",
                                                    "expertMiB", "loads"))
    mean = {}
    mean["1"] = run("serve (no --ep)", [a.bin, "serve", a.model, "--port", str(free_base(1))] + opts, 1, False,
                    a.requests)
    for n in [int(x) for x in a.ranks.split(",")]:
        cmd = MPIRUN + ["-n", str(n), a.bin, "serve", a.model, "--ep", "--port", str(free_base(n))] + opts
        mean[str(n)] = run("--ep, %d ranks" % n, cmd, n, True, a.requests)
    cmd = MPIRUN + ["-n", "2", a.bin, "serve", a.model, "--ep", "--port", str(free_base(2)), "--ep-redundant",
                    str(a.redundant)] + opts
    mean["2r"] = run("--ep, 2 ranks, %d replicas" % a.redundant, cmd, 2, True, a.requests)
    cmd = MPIRUN + ["-n", "2", a.bin, "serve", a.model, "--ep", "--port", str(free_base(2)), "--ep-redundant",
                    str(a.redundant), "--ep-rebalance", str(a.rebalance)] + opts
    mean["2rb"] = run("--ep, 2 ranks, rebalancing", cmd, 2, True, a.requests)
    if a.peer:
        cmd += ["--ep-weight-source", "peer"]
        cmd[cmd.index("--port") + 1] = str(free_base(2))
        mean["2rbp"] = run("--ep, 2 ranks, rebal. peer", cmd, 2, True, a.requests)
    print("# mean VmRSS per rank vs the single process: " +
          ", ".join("%s: %.2fx" % (k, v / mean["1"]) for k, v in mean.items()))


if __name__ == "__main__":
    main()
