"""encoder, PyTorch twin of bench/encoder.cpp: a Transformer-encoder classifier.

    tokens (B, T) -> Embedding(vocab, d) + sinusoidal positions (dropout) -> L post-norm
    nn.TransformerEncoderLayer (batch_first, ReLU) -> mean over the sequence -> Linear(d, 10)

--mode train: one training step, zero_grad + forward + cross_entropy + backward + AdamW step.
--mode infer: model.eval() and a forward under torch.no_grad(). In eval mode without grad,
torch's nn.TransformerEncoder may take its fused inference fast path
(torch._transformer_encoder_layer_fwd); that is fine: it is what a torch user gets.
--config small: B 32, T 64, d 128, 4 heads, FFN 512, 2 layers; large: B 16, T 256, d 256,
8 heads, FFN 1024, 4 layers. Both: vocab 1000, dropout 0.1, 10 classes.
Inputs (token ids, labels) are fixed and seeded, made once outside the timed step.

flop (reported): per layer forward 8*N*d^2 (QKV + out projections) + 4*N*d*F (FFN)
+ 4*B*T^2*d (scores Q K^T and weights @ V), N = B*T tokens; a training step counts 3x the
forward. Embedding, head and elementwise work are ignored. Also prints params=<count>.
"""

import math

import torch
import torch.nn as nn

import common

CONFIGS = {
    "small": dict(batch=32, seq=64, d_model=128, heads=4, ffn=512, layers=2),
    "large": dict(batch=16, seq=256, d_model=256, heads=8, ffn=1024, layers=4),
}
VOCAB, CLASSES, DROPOUT = 1000, 10, 0.1


def sinusoidal_table(max_len, d):
    """P[pos, 2i] = sin(pos / 10000^(2i/d)), P[pos, 2i+1] = cos(...), as nn::sinusoidal_table."""
    pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
    div = torch.pow(10000.0, torch.arange(0, d, 2, dtype=torch.float64) / d)
    p = torch.zeros(max_len, d, dtype=torch.float64)
    p[:, 0::2] = torch.sin(pos / div)
    p[:, 1::2] = torch.cos(pos / div)
    return p.float()


class EncoderClassifier(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["d_model"]
        self.embedding = nn.Embedding(VOCAB, d)
        self.register_buffer("P", sinusoidal_table(c["seq"], d).unsqueeze(0), persistent=False)
        self.pos_drop = nn.Dropout(DROPOUT)
        layer = nn.TransformerEncoderLayer(d, c["heads"], c["ffn"], DROPOUT, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, c["layers"])
        self.head = nn.Linear(d, CLASSES)

    def forward(self, tokens):
        x = self.pos_drop(self.embedding(tokens) + self.P[:, :tokens.shape[1]])  # (B, T, d)
        x = self.encoder(x)                                                       # (B, T, d)
        return self.head(x.mean(dim=1))                                           # (B, classes)


def forward_flop(c):
    """The forward flop count stated at the top of the file."""
    B, T, d, F_, L = c["batch"], c["seq"], c["d_model"], c["ffn"], c["layers"]
    N = B * T
    return L * (8 * N * d * d + 4 * N * d * F_ + 4 * B * T * T * d)


def main():
    p = common.parser(__doc__.split("\n\n")[0])
    p.add_argument("--config", choices=list(CONFIGS), default="small")
    p.add_argument("--mode", choices=["train", "infer"], default="train")
    p.add_argument("--bf16", action="store_true",
                   help='forward and loss under torch.autocast("cpu", dtype=torch.bfloat16)')
    args = p.parse_args()
    common.apply_threads(args)

    c = CONFIGS[args.config]
    torch.manual_seed(0)
    model = EncoderClassifier(c)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, VOCAB, (c["batch"], c["seq"]), generator=gen)
    labels = torch.randint(0, CLASSES, (c["batch"],), generator=gen)
    params = sum(p.numel() for p in model.parameters())

    train_step = common.training_step(model, opt, tokens, labels, args.bf16)

    base_rss = common.peak_rss_mb()
    flop = forward_flop(c)
    if args.mode == "train":
        model.train()
        flop *= 3
        timing = common.time_it(args, train_step)
    else:
        model.eval()
        with torch.no_grad():
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
                timing = common.time_it(args, lambda: model(tokens))
    common.report(args, timing, base_rss, flop=flop, params=params, bf16=int(args.bf16))


if __name__ == "__main__":
    main()
