#!/usr/bin/env python3
"""cpu_tail.py - a llama-bench decode figure in process CPU time (bench/longctx.sh, issue 24).

usage: cpu_tail.py THREADS -- llama-bench ARGS... (with -r 1 and one -n N test)

llama-bench reports wall-clock tok/s only, which on a shared, oversubscribed machine counts
other processes' turns. This runs it, samples its process CPU time (utime + stime of all its
threads, /proc/PID/stat) every 0.2 s, prints its output when it exits, and after it exits takes the
decode row's wall tok/s R: the decode took N / R wall seconds and ended when the process last
used CPU before exit (teardown is short next to it). The CPU seconds used in that window, divided
by THREADS, give tok/s with every thread on its own core, the figure comparable to `cinfer bench
latency`'s `cpu` line. Prints one line:
  cpu          llama decode N tokens: W s wall, C CPU-s -> T tok/s (process CPU time / THREADS threads)
The window's edges are known to one sample (0.2 s of wall clock).
"""
import os
import re
import subprocess
import sys
import tempfile
import time


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def main(argv):
    if len(argv) > 1 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) < 4 or argv[2] != "--":
        print("cpu_tail.py: " + __doc__.strip().splitlines()[2] + " (--help for more)", file=sys.stderr)
        return 2
    threads = float(argv[1])
    with tempfile.TemporaryFile(mode="w+") as log:
        proc = subprocess.Popen(argv[3:], stdout=log, stderr=subprocess.STDOUT, text=True)
        samples = []  # (wall, cpu)
        while proc.poll() is None:
            c = cpu_seconds(proc.pid)
            if c is not None:
                samples.append((time.monotonic(), c))
            time.sleep(0.2)
        log.seek(0)
        text = log.read()
    sys.stdout.write(text)
    m = re.search(r"\|\s*tg(\d+)(?: @ d\d+)?\s*\|\s*([0-9.]+)", text)
    if proc.returncode != 0 or not m or len(samples) < 3:
        print("cpu          llama decode: no CPU-time figure (no tg row, or the run failed)")
        return proc.returncode or 1
    n, rate = int(m.group(1)), float(m.group(2))
    window = n / rate
    # end of decode: the last sample at which CPU time still grew
    end_i = len(samples) - 1
    while end_i > 0 and samples[end_i][1] <= samples[end_i - 1][1]:
        end_i -= 1
    t_end, c_end = samples[end_i]
    start = [s for s in samples if s[0] <= t_end - window]
    if not start:
        print("cpu          llama decode: the decode window is longer than the sampled run")
        return 1
    t0, c0 = start[-1]
    cpu = c_end - c0
    if cpu <= 0:
        print("cpu          llama decode: no CPU time in the decode window")
        return 1
    print(f"cpu          llama decode {n} tokens: {window:.2f} s wall, {cpu:.2f} CPU-s -> {n / (cpu / threads):.2f} tok/s "
          f"(process CPU time / {threads:g} threads)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
