"""test_pd_window_netns.py - run by tests/integration/pd_window_netns.sh: window state in the handoff
across hosts: a prefill worker (PD_P) and a decode worker (PD_D) on tiny-gemma2, each in its own
network namespace, UCX over TCP between them ("link": "net"); a monolithic server started here
(loopback) is the reference. For Chat, Messages and Responses, streamed and not, greedy outputs
through the handoff equal the monolithic ones, with the window snapshot sent and installed on D
(the checks of test_pd_window.py: blocks cached, no replay, window bytes in metrics and pool)."""
import os
import unittest
import urllib.request

from cinfer_server import MODEL_LABEL, Server
import test_pd_window as base

P_URL, D_URL = os.environ.get("PD_P"), os.environ.get("PD_D")


class Remote:
    """A worker in another namespace: its base URL and its /metrics (as Server.metrics parses them)."""

    def __init__(self, url):
        self.url = url

    def metrics(self):
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            body = r.read().decode()
        out = {}
        for line in body.splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[MODEL_LABEL.sub("", k, count=1).replace("{}", "")] = float(v)
        return out


class TestGemma2Netns(base.WindowChecks, unittest.TestCase):
    NAME, BLOCK, LINK = "tiny-gemma2", 16, "net"
    TEXT = base.TestGemma2.TEXT

    @classmethod
    def setUpClass(cls):
        if not P_URL or not D_URL:
            raise unittest.SkipTest("run by tests/integration/pd_window_netns.sh (PD_P / PD_D unset)")
        cls.P, cls.D = Remote(P_URL), Remote(D_URL)
        cls.M = Server(model=base.GEMMA, ctx=cls.ctx)

    @classmethod
    def tearDownClass(cls):
        assert cls.M.stop() == 0


if __name__ == "__main__":
    unittest.main()
