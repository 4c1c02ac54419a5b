"""cnn, PyTorch twin of bench/cnn.cpp: a small convolutional classifier's training step.

    images (128, 1, 28, 28) -> Conv2d 3x3 pad 1 (1 -> 16) -> ReLU -> max_pool2d 2 -> Conv2d 3x3
    pad 1 (16 -> 32) -> ReLU -> mean over the 14x14 positions -> Linear(32, 10) -> cross_entropy

One step: zero_grad + forward + backward + AdamW step, on fixed seeded inputs.
flop (reported): forward 2*B*(28*28*16*9 + 14*14*32*16*9); a step counts 3x the forward.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

import common


def main():
    args = common.parser(__doc__.split("\n")[0]).parse_args()
    common.apply_threads(args)
    B = 128
    torch.manual_seed(0)
    conv1, conv2 = nn.Conv2d(1, 16, 3, padding=1), nn.Conv2d(16, 32, 3, padding=1)
    head = nn.Linear(32, 10)
    params = [*conv1.parameters(), *conv2.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    images = torch.randn(B, 1, 28, 28, generator=gen)
    labels = torch.randint(0, 10, (B,), generator=gen)
    base_rss = common.peak_rss_mb()

    def step():
        opt.zero_grad()
        h = F.relu(conv2(F.max_pool2d(F.relu(conv1(images)), 2)))
        loss = F.cross_entropy(head(h.mean(dim=(2, 3))), labels)
        loss.backward()
        opt.step()

    flop = 3.0 * 2 * B * (28 * 28 * 16 * 9 + 14 * 14 * 32 * 16 * 9)
    common.report(args, common.time_it(args, step), base_rss, flop=f"{flop:.0f}")


if __name__ == "__main__":
    main()
