"""nabla-serve --model vit's page in a real browser: headless chromium loads /?selftest=trouser;
the page draws a pair of trousers on its canvas through its pointer handlers, sends the canvas
through the Classify button's code and writes "selftest: ok label=.. cells=.." and the 28x28
values it sent into the DOM, which --dump-dom prints. The test sends those values itself and
checks that the page shows the server's answer: the label and every probability bar. Also keeps
a screenshot. Skips (exit 77) when chromium is not installed.
Usage: serve_page_vit.py <nabla-serve> <vit checkpoint.safetensors> <screenshot.png>"""
import json
import re
import sys

from serve_common import Server, check, find_chromium, run_chromium, screenshot, selftest_element

binary, checkpoint, screenshot_path = sys.argv[1:4]
chromium = find_chromium()

server = Server(binary, checkpoint, "--model", "vit")
try:
    url = f"http://127.0.0.1:{server.port}/?selftest=trouser"
    dom = run_chromium(chromium, url, "--dump-dom")
    line, attributes = selftest_element(dom.stdout)
    print(line)
    check(line.startswith("selftest: ok"), f"the page's self-test did not pass:\n"
                                           f"{dom.stdout[-3000:]}\n{dom.stderr[-2000:]}")
    fields = dict(re.findall(r"(\w+)=(\S+)", line))
    # One cell per 7x7 patch (4x4), one bar per class; the strokes cover a good part of the image.
    check(fields.get("cells") == "16" and fields.get("bars") == "10", f"heatmap or bars: {line}")
    check(int(fields.get("ink", 0)) >= 60, f"too little was drawn: {line}")
    image = json.loads(attributes.get("data-image", "null"))
    check(isinstance(image, list) and len(image) == 28 and all(len(r) == 28 for r in image)
          and all(0 <= v <= 1 for r in image for v in r), "data-image is not 28x28 in [0, 1]")
    # The same image sent by the test: the page must show this answer.
    status, answer = server.predict({"image": image})
    check(status == 200, f"predict: {status} {answer}")
    check(fields["label"] == answer["label"], f"page shows {fields['label']}, server {answer}")
    bars = dict(re.findall(r'<div class="bar"><span>([^<]+)</span><div [^>]*></div>'
                           r'<small>([\d.]+)%</small></div>', dom.stdout))
    check(len(bars) == 10, f"{len(bars)} probability bars in the DOM")
    for name, p in answer["probabilities"].items():
        check(abs(float(bars[name]) - 100 * p) <= 0.051, f"{name}: page {bars[name]}%, server {p}")
    # A shape the page does not know is reported as a failure, not a blank canvas sent.
    line, _ = selftest_element(run_chromium(chromium, url + "-shaped", "--dump-dom").stdout)
    check(line.startswith("selftest: failed no shape 'trouser-shaped'"), f"unknown shape: {line}")
    screenshot(chromium, url, screenshot_path, 1040)
    status, metrics = server.request("GET", "/metrics")
    check('path="/v1/predict",code="200"} 3' in metrics, "the page's requests were not counted")
    check(server.stop() == 0, "exit code after SIGTERM")
finally:
    server.kill()
print(f"serve_page_vit: the page works in {chromium}; screenshot {screenshot_path}")
