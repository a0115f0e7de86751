"""test_store_crash.py - issue 8 acceptance 3: crash safety. A loop of SIGKILLs lands while
servers write back many blocks; afterwards `cinfer store verify` finds no bad object (a
publish is a rename of a complete temporary). Then objects are damaged on purpose (a flipped
payload byte, a truncated file, a garbage header) in the chains of known prompts: a server
serving those prompts loads only the verified blocks before the damage, quarantines the bad
ones, and every output equals a cold run without a store. stories260K.
Run by tests/integration/store_crash.sh."""
import os
import random
import shutil
import signal
import tempfile
import threading
import time
import unittest

from cinfer_server import Server
import store_util as su

N = 300
PROMPTS = [su.prompt_ids(500 + i, N) for i in range(6)]


def fire(srv, prompts):
    """Sends the prompts concurrently; errors (the server being killed) are ignored."""
    def one(p):
        try:
            su.complete(srv, p, max_tokens=64)
        except Exception:  # noqa: BLE001 - the server dies under us on purpose
            pass
    ts = [threading.Thread(target=one, args=(p,), daemon=True) for p in prompts]
    for t in ts:
        t.start()
    return ts


class TestStoreCrash(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cinfer-store-crash-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_kill_loop_and_damage(self):
        cold_srv = Server()
        try:
            cold = [su.complete(cold_srv, p, max_tokens=8)["text"] for p in PROMPTS]
        finally:
            self.assertEqual(cold_srv.stop(), 0)
        rnd = random.Random(8)
        for it in range(5):
            srv = Server("--kv-store", self.dir, "--max-seqs", "8")
            fresh = [su.prompt_ids(1000 * it + k, N) for k in range(6)]
            fire(srv, fresh + PROMPTS[it % 3:it % 3 + 3])
            k, deadline = rnd.randrange(1, 60), time.time() + 8  # kill after k objects: mid write-back
            while srv.metrics()["cinfer_kv_store_objects_written_total"] < k and time.time() < deadline:
                time.sleep(0.005)
            srv.proc.send_signal(signal.SIGKILL)
            written = k
            srv.stop()
            tmps = sum(".tmp." in f for _, _, fs in os.walk(self.dir) for f in fs)
            print("\nkill %d: >= %d objects written by this server before SIGKILL, %d in the store, %d temporaries"
                  % (it + 1, written, len(su.objects(self.dir)), tmps), end="")
        rc, out = su.cli("store", "verify", self.dir)
        print("\nafter the kill loop: " + out.strip())
        self.assertEqual(rc, 0, out)
        # every PROMPT fully written, then killed as well
        srv = Server("--kv-store", self.dir)
        for p in PROMPTS:
            su.complete(srv, p, max_tokens=8)
        self.assertEqual(su.wait_chains(self.dir, PROMPTS), [N // su.BLOCK] * len(PROMPTS))
        srv.stop(sig=signal.SIGKILL)
        chains = [su.chain(self.dir, p) for p in PROMPTS[:3]]
        for c in chains:
            self.assertGreaterEqual(len(c), (N - 1) // su.BLOCK)
        with open(chains[0][3], "r+b") as f:  # flip one payload byte of block 3
            f.seek(-100, os.SEEK_END)
            b = f.read(1)
            f.seek(-100, os.SEEK_END)
            f.write(bytes([b[0] ^ 0x40]))
        with open(chains[1][5], "r+b") as f:  # truncate block 5
            f.truncate(os.path.getsize(chains[1][5]) // 2)
        with open(chains[2][0], "r+b") as f:  # garbage over block 0's header
            f.write(b"garbage!" * 8)
        rc, out = su.cli("store", "verify", self.dir)
        print("after damage: " + out.strip())
        self.assertEqual(rc, 1)
        self.assertEqual(out.count("\nbad ") + out.startswith("bad "), 3, out)
        srv = Server("--kv-store", self.dir)
        try:
            got = [su.complete(srv, p, max_tokens=8) for p in PROMPTS]
            m = srv.metrics()
        finally:
            self.assertEqual(srv.stop(), 0)
        self.assertEqual([g["text"] for g in got], cold, "outputs must equal the cold run")
        self.assertEqual([g["cached"] for g in got[:3]], [3 * su.BLOCK, 5 * su.BLOCK, 0])
        for g in got[3:]:
            self.assertEqual(g["cached"], (N - 1) // su.BLOCK * su.BLOCK)
        self.assertEqual(m["cinfer_kv_store_quarantined_total"], 3)
        rc, out = su.cli("store", "verify", self.dir)
        print("after serving: " + out.strip())
        self.assertEqual(rc, 0, out)  # bad objects moved to quarantine/ (and rewritten)
        rc, out = su.cli("store", "stats", self.dir)
        print(out)
        self.assertIn("quarantine    3 files", out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
