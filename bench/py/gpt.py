"""gpt, PyTorch twin of bench/gpt.cpp: char_gpt's model (examples/char_gpt/model.h).

    tokens (B, T) -> wte + wpe (learned positions) -> dropout -> L pre-norm GELU causal
    nn.TransformerEncoderLayer (batch_first) -> ln_f -> F.linear(., wte.weight) (tied)

Parameter names are nabla's (wte, wpe, h.layers.{i}.*, ln_f): tests/fixtures/gen_char_gpt.py
uses this GPT class for the model's parity fixture.

--mode train: one training step (zero_grad, forward, cross-entropy over every position,
backward, AdamW) at --batch x --seq (default 32 x 256) with --context 256.
--mode generate: 500 characters (--new) after a 256-character prompt (--prompt-len), batch 1,
greedy, eval mode, no grad, with --context 1024 so prompt + new tokens fit without sliding.
--cache on: a hand-written KV cache (torch 1.13 has no built-in one for nn.TransformerEncoder):
the prompt in one pass, then one position per step attending over preallocated key/value
buffers. --cache off: the whole prefix again at every step (as nabla's RecomputeNextToken).
Prints ops=<new tokens> in generate mode (run.py turns it into us per character).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 65  # about char_gpt's 63 characters; the bench's speed does not depend on it


class GPT(nn.Module):
    def __init__(self, vocab, context=256, d_model=256, heads=8, layers=4, ffn=1024, dropout=0.1):
        super().__init__()
        self.context, self.heads = context, heads
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(context, d_model)
        self.drop = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(d_model, heads, ffn, dropout, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.h = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.ln_f = nn.LayerNorm(d_model)
        self.register_buffer("causal", torch.triu(torch.ones(context, context, dtype=torch.bool),
                                                  diagonal=1), persistent=False)

    def forward(self, tokens):
        t = tokens.shape[1]
        x = self.drop(self.wte(tokens) + self.wpe(torch.arange(t)))
        x = self.h(x, mask=self.causal[:t, :t])
        return F.linear(self.ln_f(x), self.wte.weight)

    # --- a hand-written KV cache (eval mode: no dropout) -------------------------------------
    def new_cache(self, batch):
        d = self.wte.weight.shape[1]
        hd = d // self.heads
        shape = (batch, self.heads, self.context, hd)
        return {"len": 0, "kv": [(torch.empty(shape), torch.empty(shape)) for _ in self.h.layers]}

    def forward_cached(self, tokens, cache):
        """tokens (B, t) after cache["len"] positions -> logits of the last position (B, V)."""
        b, t = tokens.shape
        p = cache["len"]
        x = self.wte(tokens) + self.wpe(torch.arange(p, p + t))
        mask = self.causal[p:p + t, :p + t] if t > 1 else None
        for layer, (kbuf, vbuf) in zip(self.h.layers, cache["kv"]):
            attn = layer.self_attn
            d = x.shape[-1]
            hd = d // self.heads
            q, k, v = F.linear(layer.norm1(x), attn.in_proj_weight, attn.in_proj_bias).split(d, -1)
            q, k, v = (z.view(b, t, self.heads, hd).transpose(1, 2) for z in (q, k, v))
            kbuf[:, :, p:p + t] = k
            vbuf[:, :, p:p + t] = v
            scores = q @ kbuf[:, :, :p + t].transpose(-1, -2) / math.sqrt(hd)
            if mask is not None:
                scores = scores.masked_fill(mask, float("-inf"))
            o = (scores.softmax(-1) @ vbuf[:, :, :p + t]).transpose(1, 2).reshape(b, t, d)
            x = x + attn.out_proj(o)
            x = x + layer.linear2(F.gelu(layer.linear1(layer.norm2(x))))
        cache["len"] = p + t
        return F.linear(self.ln_f(x[:, -1]), self.wte.weight)


def generate(model, prompt, new, cache):
    """Greedy: prompt (1, T) -> the new token ids (list)."""
    out = []
    if cache:
        c = model.new_cache(prompt.shape[0])
        nxt = model.forward_cached(prompt, c).argmax(-1, keepdim=True)
        for _ in range(new):
            out.append(int(nxt))
            if len(out) == new:
                break
            nxt = model.forward_cached(nxt, c).argmax(-1, keepdim=True)
    else:
        seq = prompt
        for _ in range(new):
            nxt = model(seq)[:, -1].argmax(-1, keepdim=True)
            out.append(int(nxt))
            seq = torch.cat([seq, nxt], 1)
    return out


def main():
    import common

    p = common.parser(__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["train", "generate"], default="train")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--context", type=int, default=0, help="0: 256 (train), 1024 (generate)")
    p.add_argument("--prompt-len", type=int, default=256)
    p.add_argument("--new", type=int, default=500)
    p.add_argument("--cache", choices=["on", "off"], default="on")
    args = p.parse_args()
    common.apply_threads(args)

    context = args.context or (256 if args.mode == "train" else 1024)
    torch.manual_seed(0)
    model = GPT(VOCAB, context=context)
    params = sum(q.numel() for q in model.parameters())
    gen = torch.Generator().manual_seed(1)
    base_rss = common.peak_rss_mb()
    if args.mode == "train":
        tokens = torch.randint(0, VOCAB, (args.batch, args.seq + 1), generator=gen)
        x, y = tokens[:, :-1], tokens[:, 1:]
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
        model.train()

        def step():
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
            loss.backward()
            opt.step()

        timing = common.time_it(args, step)
        common.report(args, timing, base_rss, params=params)
    else:
        prompt = torch.randint(0, VOCAB, (1, args.prompt_len), generator=gen)
        model.eval()
        with torch.no_grad():
            timing = common.time_it(args, lambda: generate(model, prompt, args.new,
                                                           args.cache == "on"))
        common.report(args, timing, base_rss, params=params, ops=args.new)


if __name__ == "__main__":
    main()
