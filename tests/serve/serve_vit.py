"""nabla-serve --model vit on a vit_fashion_mnist --smoke checkpoint: images in, the same batching
code; batched answers equal the alone ones (1e-6), bad images get 400 and serving goes on.
Usage: serve_vit.py <nabla-serve> <checkpoint.safetensors>"""
import concurrent.futures as cf
import sys

from serve_common import Server, check

binary, checkpoint = sys.argv[1], sys.argv[2]


def image(seed):
    """A deterministic 28x28 pattern in [0, 1] (no data files needed)."""
    return [[((r * 7 + c * 3 + seed * 11) % 17) / 16 for c in range(28)] for r in range(28)]


server = Server(binary, checkpoint, "--model", "vit", "--max-wait-ms", "20")
try:
    status, health = server.request("GET", "/healthz")
    check(status == 200 and health["labels"][0] == "T-shirt", f"/healthz: {health}")
    status, answer = server.predict({"image": image(0), "attention": True})
    check(status == 200 and len(answer["probabilities"]) == 10, f"image: {status} {answer}")
    check(len(answer["attention"]["weights"]) == 16, "4x4 patch attention")
    for bad, words in [({"image": image(0)[:27]}, "28 rows"), ({"image": "cat"}, "28 rows"),
                       ({"image": [[2] * 28] * 28}, "in [0, 1]"), ({"text": "hi"}, "missing")]:
        status, answer = server.predict(bad)
        check(status == 400 and words in answer["error"], f"bad image: {status} {answer}")
        check(server.predict({"image": image(1)})[0] == 200, "a good image after a bad one")
    alone = [server.predict({"image": image(s)})[1]["probabilities"] for s in range(8)]
    with cf.ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda s: server.predict({"image": image(s)}), range(8)))
    for a, (status, b) in zip(alone, together):
        check(status == 200, f"concurrent: {status} {b}")
        worst = max(abs(a[k] - b["probabilities"][k]) for k in a)
        check(worst <= 1e-6, f"batched vs alone differ by {worst}")
    check(server.stop() == 0, "exit code after SIGTERM")
finally:
    server.kill()
print("serve_vit: all checks passed")
