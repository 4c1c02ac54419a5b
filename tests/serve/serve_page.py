"""nabla-serve's page in a real browser: headless chromium loads /?selftest=<text>; the page
submits the text itself and writes "selftest: ok label=.. cells=.." into the DOM, which
--dump-dom prints. Also keeps a screenshot. Skips (exit 77) when chromium is not installed.
Usage: serve_page.py <nabla-serve> <checkpoint.safetensors> <screenshot.png>"""
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

from serve_common import Server, check

binary, checkpoint, screenshot = sys.argv[1:4]
chromium = shutil.which("chromium") or shutil.which("chromium-browser")
if not chromium:
    print("SKIP: chromium is not installed (scripts/setup.sh --browser installs it)")
    sys.exit(77)

TEXT = "Wer nicht wagt, der nicht gewinnt. Über Stock und Stein."


def run_chromium(url, *mode):
    profile = tempfile.mkdtemp(prefix="nabla_chromium_")
    try:
        # --virtual-time-budget lets the page's fetch finish before the DOM is dumped.
        return subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-dev-shm-usage", f"--user-data-dir={profile}",
             "--virtual-time-budget=20000", *mode, url],
            capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


server = Server(binary, checkpoint)
try:
    url = f"http://127.0.0.1:{server.port}/?selftest={urllib.parse.quote(TEXT)}"
    dom = run_chromium(url, "--dump-dom")
    line = next((l for l in dom.stdout.splitlines() if "selftest:" in l), "")
    print(line.strip())
    check("selftest: ok" in line, f"the page's self-test did not pass:\n{dom.stdout[-3000:]}\n"
                                  f"{dom.stderr[-2000:]}")
    # One cell per character of the text, one bar per language.
    check(f"cells={len(TEXT)}" in line and "bars=8" in line, f"heatmap or bars missing: {line}")
    check('class="cell"' in dom.stdout, "no heatmap cells in the DOM")
    os.makedirs(os.path.dirname(os.path.abspath(screenshot)), exist_ok=True)
    shot = run_chromium(url, f"--screenshot={os.path.abspath(screenshot)}",
                        "--window-size=900,760", "--hide-scrollbars")
    check(os.path.exists(screenshot) and os.path.getsize(screenshot) > 10000,
          f"no screenshot: {shot.stderr[-2000:]}")
    status, metrics = server.request("GET", "/metrics")
    check('path="/v1/predict",code="200"} 2' in metrics, "the page's requests were not counted")
    check(server.stop() == 0, "exit code after SIGTERM")
finally:
    server.kill()
print(f"serve_page: the page works in {chromium}; screenshot {screenshot}")
