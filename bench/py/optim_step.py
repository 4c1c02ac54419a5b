"""optim_step, PyTorch twin of bench/optim_step.cpp: one optimizer step over float32 parameters
shaped like encoder_small's (27 tensors, 525,834 elements) with fixed random gradients; only
step() is timed. --optimizer adamw (weight decay 1e-2) | adam (none); --amsgrad."""

import torch

import common


def encoder_small_shapes():
    shapes = [(1000, 128)]
    for _ in range(2):
        shapes += [(384, 128), (384,), (128, 128), (128,), (512, 128), (512,), (128, 512),
                   (128,), (128,), (128,), (128,), (128,)]
    return shapes + [(10, 128), (10,)]


def main():
    p = common.parser(__doc__)
    p.add_argument("--optimizer", choices=["adamw", "adam"], default="adamw")
    p.add_argument("--amsgrad", action="store_true")
    args = p.parse_args()
    common.apply_threads(args)

    gen = torch.Generator().manual_seed(0)
    params = []
    for shape in encoder_small_shapes():
        t = torch.randn(*shape, generator=gen).requires_grad_()
        t.grad = torch.randn(*shape, generator=gen)
        params.append(t)
    cls = torch.optim.AdamW if args.optimizer == "adamw" else torch.optim.Adam
    opt = cls(params, amsgrad=args.amsgrad)

    base_rss = common.peak_rss_mb()
    timing = common.time_it(args, opt.step)
    common.report(args, timing, base_rss, elems=sum(t.numel() for t in params),
                  tensors=len(params))


if __name__ == "__main__":
    main()
