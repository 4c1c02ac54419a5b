"""gemm, PyTorch twin of bench/gemm.cpp: torch.matmul on float32 A (B, M, K) @ B (B, K, N);
--shape is MxKxN (2-D operands) or BxMxKxN (a batch of B products)."""

import torch

import common


def main():
    p = common.parser(__doc__)
    p.add_argument("--shape", default="2048x128x384", help="MxKxN or BxMxKxN")
    args = p.parse_args()
    common.apply_threads(args)

    dims = common.parse_dims(args.shape)
    if len(dims) == 3:
        dims = [1] + dims
    if len(dims) != 4:
        raise SystemExit(f"--shape wants MxKxN or BxMxKxN, got {args.shape}")
    batch, m, k, n = dims
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(*([batch] if batch > 1 else []), m, k, generator=gen)
    b = torch.randn(*([batch] if batch > 1 else []), k, n, generator=gen)

    base_rss = common.peak_rss_mb()
    with torch.no_grad():
        timing = common.time_it(args, lambda: torch.matmul(a, b))
    common.report(args, timing, base_rss, flop=2 * batch * m * n * k, impl="torch")


if __name__ == "__main__":
    main()
