"""nabla-serve's page in a real browser: headless chromium loads /?selftest=<text>; the page
submits the text itself and writes "selftest: ok label=.. cells=.." into the DOM, which
--dump-dom prints. Also keeps a screenshot. Skips (exit 77) when chromium is not installed.
Usage: serve_page.py <nabla-serve> <checkpoint.safetensors> <screenshot.png>"""
import sys
import urllib.parse

from serve_common import Server, check, find_chromium, run_chromium, screenshot, selftest_element

binary, checkpoint, screenshot_path = sys.argv[1:4]
chromium = find_chromium()

TEXT = "Wer nicht wagt, der nicht gewinnt. Über Stock und Stein."


server = Server(binary, checkpoint)
try:
    url = f"http://127.0.0.1:{server.port}/?selftest={urllib.parse.quote(TEXT)}"
    dom = run_chromium(chromium, url, "--dump-dom")
    line, _ = selftest_element(dom.stdout)
    print(line)
    check("selftest: ok" in line, f"the page's self-test did not pass:\n{dom.stdout[-3000:]}\n"
                                  f"{dom.stderr[-2000:]}")
    # One cell per character of the text, one bar per language.
    check(f"cells={len(TEXT)}" in line and "bars=8" in line, f"heatmap or bars missing: {line}")
    check('class="cell"' in dom.stdout, "no heatmap cells in the DOM")
    screenshot(chromium, url, screenshot_path, 760)
    status, metrics = server.request("GET", "/metrics")
    check('path="/v1/predict",code="200"} 2' in metrics, "the page's requests were not counted")
    check(server.stop() == 0, "exit code after SIGTERM")
finally:
    server.kill()
print(f"serve_page: the page works in {chromium}; screenshot {screenshot_path}")
