"""op_overhead, PyTorch twin of bench/op_overhead.cpp: a chain of n adds y = y + b on
numel-element float32 tensors, in mode nograd (torch.no_grad), grad (a and b require grad) or
fwdbwd (grad, then y.backward(ones) through the chain)."""

import torch

import common


def main():
    p = common.parser(__doc__)
    p.add_argument("--mode", choices=["nograd", "grad", "fwdbwd"], default="nograd")
    p.add_argument("--n", type=int, default=1000, help="adds in the chain")
    p.add_argument("--numel", type=int, default=16, help="elements per tensor")
    args = p.parse_args()
    common.apply_threads(args)

    gen = torch.Generator().manual_seed(0)
    a = torch.randn(args.numel, generator=gen)
    b = torch.randn(args.numel, generator=gen)
    g = torch.ones(args.numel)
    if args.mode != "nograd":
        a.requires_grad_()
        b.requires_grad_()

    def chain():
        y = a
        for _ in range(args.n):
            y = y + b
        return y

    def fwdbwd():
        a.grad = None
        b.grad = None
        chain().backward(g)

    base_rss = common.peak_rss_mb()
    if args.mode == "nograd":
        with torch.no_grad():
            timing = common.time_it(args, chain)
    elif args.mode == "grad":
        timing = common.time_it(args, chain)
    else:
        timing = common.time_it(args, fwdbwd)
    common.report(args, timing, base_rss, ops=args.n)


if __name__ == "__main__":
    main()
