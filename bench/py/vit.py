"""vit, PyTorch twin of bench/vit.cpp: one ViT training step (zero_grad + forward +
cross_entropy + backward + AdamW step) on 28x28x1 images, 4x4 patches (49 + CLS = 50 tokens),
dim 64, 4 heads, MLP 128, 6 pre-norm GELU blocks, dropout 0.1 inside the blocks (none on the
embeddings), final LayerNorm, linear head on CLS, batch 128, 10 classes. The model is the
reference ViT of tests/fixtures/gen_transformer.py (which nabla's nn::ViT matches), built from
PyTorch modules. Inputs (images, labels) are fixed and seeded, made once outside the timed step.

flop (reported): per layer forward 8*N*d^2 (QKV + out projections) + 4*N*d*F (FFN)
+ 4*B*T^2*d (scores Q K^T and weights @ V), N = B*T tokens (T = 50), plus the patch embedding
2*B*49*16*64; a training step counts 3x the forward. Head and elementwise work are ignored.
Also prints params=<count>.
"""

import torch
import torch.nn as nn

import common

B, IMAGE, PATCH, DIM, HEADS, MLP, DEPTH, CLASSES, DROPOUT = 128, 28, 4, 64, 4, 128, 6, 10, 0.1


class ViT(nn.Module):
    def __init__(self):
        super().__init__()
        n = (IMAGE // PATCH) ** 2
        self.cls_token = nn.Parameter(torch.randn(1, 1, DIM) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, n + 1, DIM) * 0.02)
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv2d(1, DIM, PATCH, stride=PATCH)
        self.blocks = nn.ModuleList([
            nn.TransformerEncoderLayer(DIM, HEADS, MLP, dropout=DROPOUT, activation="gelu",
                                       batch_first=True, norm_first=True)
            for _ in range(DEPTH)])
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, CLASSES)

    def forward(self, img):
        x = self.patch_embed.proj(img).flatten(2).transpose(1, 2)  # (B, N, dim)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x)[:, 0])


def main():
    p = common.parser(__doc__.split("\n\n")[0])
    p.add_argument("--bf16", action="store_true",
                   help='forward and loss under torch.autocast("cpu", dtype=torch.bfloat16)')
    args = p.parse_args()
    common.apply_threads(args)

    torch.manual_seed(0)
    model = ViT()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    images = torch.randn(B, 1, IMAGE, IMAGE, generator=gen)
    labels = torch.randint(0, CLASSES, (B,), generator=gen)
    params = sum(p.numel() for p in model.parameters())

    # The forward flop count stated at the top of the file.
    patches = (IMAGE // PATCH) ** 2
    T = patches + 1
    N = B * T
    per_layer = 8 * N * DIM * DIM + 4 * N * DIM * MLP + 4 * B * T * T * DIM
    flop = 3 * (DEPTH * per_layer + 2 * B * patches * PATCH * PATCH * DIM)

    train_step = common.training_step(model, opt, images, labels, args.bf16)

    base_rss = common.peak_rss_mb()
    timing = common.time_it(args, train_step)
    common.report(args, timing, base_rss, flop=flop, params=params, bf16=int(args.bf16))


if __name__ == "__main__":
    main()
