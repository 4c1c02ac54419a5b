"""attention, PyTorch twin of bench/attention.cpp: scaled dot-product self-attention on float32
q, k, v of --shape N x T x d, --mode fwd (no grad) or fwdbwd (fixed random output gradient).
Debian's torch 1.13 has no public F.scaled_dot_product_attention; its private
F._scaled_dot_product_attention is the math path on the CPU (it materialises the weights).
--impl is accepted for the runner's sake; torch has one implementation here."""

import torch
import torch.nn.functional as F

import common


def main():
    p = common.parser(__doc__)
    p.add_argument("--impl", choices=["fused", "composite"], default="fused")
    p.add_argument("--mode", choices=["fwd", "fwdbwd"], default="fwdbwd")
    p.add_argument("--shape", default="8x1024x64", help="N x T x d")
    p.add_argument("--causal", action="store_true")
    p.add_argument("--dropout", type=float, default=0.0)
    args = p.parse_args()
    common.apply_threads(args)

    dims = common.parse_dims(args.shape)
    if len(dims) != 3:
        raise SystemExit("--shape must be N x T x d")
    gen = torch.Generator().manual_seed(0)
    q, k, v, g = (torch.randn(*dims, generator=gen) for _ in range(4))

    def forward():
        out, _ = F._scaled_dot_product_attention(q, k, v, None, args.dropout, False,
                                                 args.causal)
        return out

    base_rss = common.peak_rss_mb()
    if args.mode == "fwd":
        with torch.no_grad():
            timing = common.time_it(args, forward)
    else:
        for t in (q, k, v):
            t.requires_grad_()

        def fwdbwd():
            q.grad = k.grad = v.grad = None
            forward().backward(g)

        timing = common.time_it(args, fwdbwd)
    common.report(args, timing, base_rss)


if __name__ == "__main__":
    main()
