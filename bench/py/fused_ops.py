"""fused_ops, PyTorch twin of bench/fused_ops.cpp: softmax (dim -1), layer_norm (last dim, weight
and bias), exact gelu, cross_entropy (logits (N, C, ...), int64 target, mean) and dropout
(p = 0.1, training) on float32 inputs of --shape; --mode fwd (no grad) or fwdbwd (x, and
layer_norm's weight and bias, require grad; backward with a fixed random output gradient, none
for the scalar loss; grads reset every run)."""

import torch
import torch.nn.functional as F

import common


def main():
    p = common.parser(__doc__)
    p.add_argument(
        "--op",
        choices=["softmax", "layer_norm", "gelu", "cross_entropy", "dropout"],
        default="softmax",
    )
    p.add_argument("--mode", choices=["fwd", "fwdbwd"], default="fwd")
    p.add_argument("--shape", default="2048x512", help="e.g. 2048x512 or 32x4x64x64")
    args = p.parse_args()
    common.apply_threads(args)

    dims = common.parse_dims(args.shape)
    if len(dims) < 2:
        raise SystemExit("--shape needs at least 2 dims")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(*dims, generator=gen)
    last = dims[-1]
    weight, bias = torch.ones(last), torch.zeros(last)
    # cross_entropy: classes on dim 1, the target drops that dim.
    target = torch.randint(0, dims[1], dims[:1] + dims[2:], generator=gen)

    def forward():
        if args.op == "softmax":
            return F.softmax(x, -1)
        if args.op == "layer_norm":
            return F.layer_norm(x, (last,), weight, bias)
        if args.op == "gelu":
            return F.gelu(x)
        if args.op == "cross_entropy":
            return F.cross_entropy(x, target)
        return F.dropout(x, 0.1, True)

    base_rss = common.peak_rss_mb()
    if args.mode == "fwd":
        with torch.no_grad():
            timing = common.time_it(args, forward)
    else:
        x.requires_grad_()
        if args.op == "layer_norm":
            weight.requires_grad_()
            bias.requires_grad_()
        y0 = forward()
        g = None if y0.dim() == 0 else torch.randn(y0.shape, generator=gen)
        del y0

        def fwdbwd():
            x.grad = weight.grad = bias.grad = None
            forward().backward(g)

        timing = common.time_it(args, fwdbwd)
    common.report(args, timing, base_rss, elems=x.numel())


if __name__ == "__main__":
    main()
