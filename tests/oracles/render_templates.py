#!/usr/bin/env python3
"""Regenerates tests/data/chat/expected/ : for every chat template in
$CINFER_SHARED/fixtures/templates (default ../shared) x every conversation in
tests/data/chat/*.json, renders with the shared oracle render.py (Jinja2
configured like Hugging Face's apply_chat_template, strftime_now fixed to
2026-11-29) and writes <template>__<conversation>.txt with the exact output,
or .err with the exception text when the template raises.
The C test (tests/unit/text/test_chat_template.c) compares against these
files; run this by hand after changing conversations and commit the result."""
import os, subprocess, sys, glob

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
shared = os.environ.get("CINFER_SHARED", os.path.join(root, "..", "shared"))
tdir = os.path.join(shared, "fixtures", "templates")
render = os.path.join(tdir, "render.py")
cdir = os.path.join(root, "tests", "data", "chat")
odir = os.path.join(cdir, "expected")
os.makedirs(odir, exist_ok=True)
for f in glob.glob(os.path.join(odir, "*")):
    os.remove(f)
n = 0
for t in sorted(glob.glob(os.path.join(tdir, "*.jinja"))):
    tname = os.path.basename(t)[:-len(".jinja")]
    for c in sorted(glob.glob(os.path.join(cdir, "*.json"))):
        cname = os.path.basename(c)[:-len(".json")]
        with open(c, "rb") as fin:
            r = subprocess.run([sys.executable, render, t], stdin=fin, capture_output=True)
        base = os.path.join(odir, f"{tname}__{cname}")
        if r.returncode == 0:
            open(base + ".txt", "wb").write(r.stdout)
        else:
            open(base + ".err", "wb").write(r.stderr)
        n += 1
print(f"wrote {n} expected renderings to {odir}")
