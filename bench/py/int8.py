"""int8, PyTorch twin of bench/int8.cpp: the encoder_infer model (encoder.py's EncoderClassifier,
--config small or large, eval mode, no grad) in float32 and after torch.ao.quantization.quantize_dynamic
with per-channel qint8 weights (per_channel_dynamic_qconfig), as nabla's nn::quantize_dynamic.

PyTorch leaves nn.MultiheadAttention's out_proj (a NonDynamicallyQuantizableLinear) in float32;
nabla quantises it. The quantised=<count> field says how many Linear layers each side swapped.
--precision float32 | int8: one MEASURE line; both (the default): both lines, then a RESULT line
with the same fields as bench/int8.cpp's.
"""

import torch
import torch.ao.quantization as tq

import common
from encoder import CONFIGS, VOCAB, EncoderClassifier


def quantised_weight_bytes(model):
    """(float32 bytes, int8 + float32 scale bytes) of the dynamically quantised Linear weights."""
    float_bytes = int8_bytes = 0
    for m in model.modules():
        if isinstance(m, torch.ao.nn.quantized.dynamic.Linear):
            w = m.weight()
            float_bytes += w.numel() * 4
            scales = w.q_per_channel_scales().numel() if w.qscheme() in (
                torch.per_channel_affine, torch.per_channel_symmetric) else 1
            int8_bytes += w.numel() + 4 * scales
    return float_bytes, int8_bytes


def main():
    p = common.parser(__doc__.split("\n\n")[0])
    p.add_argument("--config", choices=list(CONFIGS), default="small")
    p.add_argument("--precision", choices=["float32", "int8", "both"], default="both")
    args = p.parse_args()
    common.apply_threads(args)

    c = CONFIGS[args.config]
    torch.manual_seed(0)
    model = EncoderClassifier(c).eval()
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, VOCAB, (c["batch"], c["seq"]), generator=gen)
    base_rss = common.peak_rss_mb()

    with torch.no_grad():
        float_t = int8_t = None
        if args.precision != "int8":
            float_t = common.time_it(args, lambda: model(tokens))
            common.report(args, float_t, base_rss, precision="float32")
        qmodel = tq.quantize_dynamic(model, {torch.nn.Linear: tq.per_channel_dynamic_qconfig},
                                     dtype=torch.qint8)
        # torch 1.13's fused encoder fast path reads every Linear's .weight as a tensor, which a
        # dynamic quantised Linear has as a method, and fails: take the ordinary path there.
        for layer in qmodel.encoder.layers:
            layer.activation_relu_or_gelu = False
        count = sum(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in qmodel.modules())
        float_bytes, int8_bytes = quantised_weight_bytes(qmodel)
        if args.precision != "float32":
            int8_t = common.time_it(args, lambda: qmodel(tokens))
            common.report(args, int8_t, base_rss, precision="int8", quantised=count,
                          float_weight_bytes=float_bytes, int8_weight_bytes=int8_bytes)
    if args.precision == "both":
        print(f"RESULT bench=int8 config={args.config} float_ms={float_t[0]:.3f} "
              f"int8_ms={int8_t[0]:.3f} int8_over_float={int8_t[0] / float_t[0]:.3f} "
              f"float_weight_bytes={float_bytes} int8_weight_bytes={int8_bytes} "
              f"weight_ratio={float_bytes / int8_bytes:.2f} quantised={count} "
              f"backend=\"{torch.backends.quantized.engine}\"", flush=True)


if __name__ == "__main__":
    main()
