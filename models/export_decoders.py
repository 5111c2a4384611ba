"""Export tiny random-weight decoders with a KV cache to ONNX, as exporters write them.

Needs torch and transformers, which the project does not depend on: run it with a separate venv
(see models/exported/README.md), never in CI. The outputs are committed under models/exported/.

    /work/venv-export/bin/python models/export_decoders.py [--out models/exported]

Writes, from seeded random-weight configs (2 layers, hidden 64):
  gpt2_{torchscript,dynamo}.onnx   Hugging Face GPT-2 with past_key_values
  llama_{torchscript,dynamo}.onnx  Llama-style (GQA 4 query / 2 KV heads, rotary, RMSNorm, SiLU MLP)
  gpt2_mha_contrib.onnx            the same GPT-2 weights with com.microsoft.MultiHeadAttention
  llama_gqa_contrib.onnx           the same Llama weights as onnxruntime-genai writes them (GroupQueryAttention)
  llama_attention23.onnx           the same Llama weights with the opset-23 ONNX Attention op
and checks every file's logits against the torch model on onnxruntime before keeping it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
import transformers
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
from transformers.cache_utils import DynamicCache

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from models import attention_decoders

SEED = 0
LAYERS = 2
VOCAB = 512
HIDDEN = 64
HEADS = 4
KV_HEADS = 2
MAX_POSITIONS = 256
TORCHSCRIPT_OPSET = 17  # the TorchScript exporter's opsets stop at 20; optimum writes 14-18
DYNAMO_OPSET = 18
ATOL = 1e-4

# Dim names as optimum.exporters writes them for decoders with past.
BATCH, SEQ, PAST, TOTAL = (
    "batch_size",
    "sequence_length",
    "past_sequence_length",
    "past_sequence_length + sequence_length",
)


def tiny_gpt2() -> GPT2LMHeadModel:
    torch.manual_seed(SEED)
    cfg = GPT2Config(
        vocab_size=VOCAB,
        n_positions=MAX_POSITIONS,
        n_embd=HIDDEN,
        n_layer=LAYERS,
        n_head=HEADS,
        n_inner=4 * HIDDEN,
        initializer_range=0.2,  # at the default 0.02 the tied embeddings make greedy decoding repeat its last token
    )
    cfg._attn_implementation = "eager"
    return randomised_norms(GPT2LMHeadModel(cfg).eval())


def tiny_llama() -> LlamaForCausalLM:
    torch.manual_seed(SEED)
    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=2 * HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=MAX_POSITIONS,
        rms_norm_eps=1e-6,
        initializer_range=0.2,  # as GPT-2's: logits of scale ~1, so a 1e-4 tolerance is a tight one
        rope_theta=10000.0,
        tie_word_embeddings=False,
    )
    cfg._attn_implementation = "eager"
    return randomised_norms(LlamaForCausalLM(cfg).eval())


def randomised_norms(lm: torch.nn.Module) -> torch.nn.Module:
    """Norm scales drawn around 1 and biases around 0 instead of exactly 1 and 0: identity norms
    would hide a norm written wrongly, and both exporters merge equal initializers (the TorchScript
    one through Identity nodes), so every layer would share one tensor."""
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for name, p in lm.named_parameters():
            if name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif "norm" in name or ".ln_" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
    return lm


class WithPast(torch.nn.Module):
    """Flat-tensor signature of a causal LM with a KV cache: (ids, mask, positions, k0, v0, k1, v1, ...)
    -> (logits, present k0, present v0, ...), as optimum's ONNX configs present it."""

    def __init__(self, lm: torch.nn.Module):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids, attention_mask, position_ids, *past):
        pairs = [(past[2 * i], past[2 * i + 1]) for i in range(len(past) // 2)]
        cache = DynamicCache(ddp_cache_data=pairs, config=self.lm.config)
        out = self.lm(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=cache,
            use_cache=True,
        )
        present = []
        for layer in out.past_key_values.layers:
            present += [layer.keys, layer.values]
        return (out.logits, *present)


def names(layers: int) -> tuple[list[str], list[str]]:
    past = [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    present = [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    return ["input_ids", "attention_mask", "position_ids", *past], ["logits", *present]


def example_inputs(kv_heads: int, head_dim: int, batch: int, seq: int, past: int, seed: int) -> tuple:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (batch, seq), generator=g)
    mask = torch.ones(batch, past + seq, dtype=torch.int64)
    pos = torch.arange(past, past + seq, dtype=torch.int64).unsqueeze(0).expand(batch, seq).contiguous()
    kv = [torch.randn(batch, kv_heads, past, head_dim, generator=g) for _ in range(2 * LAYERS)]
    return (ids, mask, pos, *kv)


def dynamic_axes(layers: int) -> dict[str, dict[int, str]]:
    ins, outs = names(layers)
    axes = {"input_ids": {0: BATCH, 1: SEQ}, "attention_mask": {0: BATCH, 1: TOTAL}, "position_ids": {0: BATCH, 1: SEQ}}
    axes |= {n: {0: BATCH, 2: PAST} for n in ins[3:]}
    axes |= {"logits": {0: BATCH, 1: SEQ}} | {n: {0: BATCH, 2: TOTAL} for n in outs[1:]}
    return axes


def dynamic_shapes(layers: int) -> tuple:
    batch = torch.export.Dim("batch_size", min=1, max=64)
    seq = torch.export.Dim("sequence_length", min=1, max=MAX_POSITIONS // 2)
    past = torch.export.Dim("past_sequence_length", min=1, max=MAX_POSITIONS // 2)
    total = torch.export.Dim("total_sequence_length", min=2, max=MAX_POSITIONS)
    kv = {0: batch, 2: past}
    return ({0: batch, 1: seq}, {0: batch, 1: total}, {0: batch, 1: seq}, tuple([kv] * (2 * layers)))


def export(lm: torch.nn.Module, path: Path, dynamo: bool) -> None:
    cfg = lm.config
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    example = example_inputs(kv_heads, head_dim, batch=2, seq=3, past=5, seed=1)
    ins, outs = names(cfg.num_hidden_layers)
    model = WithPast(lm).eval()
    with torch.no_grad():
        if dynamo:
            prog = torch.onnx.export(
                model,
                example,
                input_names=ins,
                output_names=outs,
                dynamic_shapes=dynamic_shapes(cfg.num_hidden_layers),
                opset_version=DYNAMO_OPSET,
                dynamo=True,
                optimize=True,
                external_data=False,
            )
            prog.save(str(path), external_data=False)
        else:
            torch.onnx.export(
                model,
                example,
                str(path),
                input_names=ins,
                output_names=outs,
                dynamic_axes=dynamic_axes(cfg.num_hidden_layers),
                opset_version=TORCHSCRIPT_OPSET,
                dynamo=False,
                do_constant_folding=True,
            )


def llama_shape(cfg: LlamaConfig) -> attention_decoders.DecoderShape:
    return attention_decoders.DecoderShape(
        layers=cfg.num_hidden_layers,
        hidden=cfg.hidden_size,
        heads=cfg.num_attention_heads,
        kv_heads=cfg.num_key_value_heads,
        vocab=cfg.vocab_size,
        max_positions=cfg.max_position_embeddings,
        rope_theta=cfg.rope_parameters["rope_theta"],
        eps=cfg.rms_norm_eps,
    )


def gpt2_shape(cfg: GPT2Config) -> attention_decoders.DecoderShape:
    return attention_decoders.DecoderShape(
        layers=cfg.n_layer,
        hidden=cfg.n_embd,
        heads=cfg.n_head,
        kv_heads=cfg.n_head,
        vocab=cfg.vocab_size,
        max_positions=cfg.n_positions,
        eps=cfg.layer_norm_epsilon,
    )


def torch_outputs(lm: torch.nn.Module, inputs: tuple) -> list[np.ndarray]:
    with torch.no_grad():
        return [t.numpy() for t in WithPast(lm)(*inputs)]


def check_against_torch(lm: torch.nn.Module, path: Path, shapes: list[tuple[int, int, int]]) -> float:
    """Largest |ORT - torch| over all outputs at each (batch, seq, past); raises above ATOL."""
    cfg = lm.config
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    wanted = {i.name for i in sess.get_inputs()}
    worst = 0.0
    for batch, seq, past in shapes:
        example = example_inputs(kv_heads, head_dim, batch, seq, past, seed=seq * 100 + past)
        ins, _ = names(cfg.num_hidden_layers)
        feeds = {n: t.numpy() for n, t in zip(ins, example) if n in wanted}
        got = sess.run(None, feeds)
        want = torch_outputs(lm, example)
        for g, w in zip(got, want):
            if g.shape != w.shape:
                raise SystemExit(f"{path.name}: shape {g.shape} != torch {w.shape} at {(batch, seq, past)}")
            worst = max(worst, float(np.abs(g - w).max()))
    if worst > ATOL:
        raise SystemExit(f"{path.name}: differs from torch by {worst:.2e} (> {ATOL})")
    return worst


GREEDY_PROMPT = [1, 2, 3, 4, 5]
GREEDY_STEPS = 8


def torch_greedy(lm: torch.nn.Module) -> list[int]:
    """transformers' own greedy generation, recorded for the tests to compare ORT's against."""
    with torch.no_grad():
        out = lm.generate(torch.tensor([GREEDY_PROMPT]), max_new_tokens=GREEDY_STEPS, do_sample=False)
    return out[0, len(GREEDY_PROMPT) :].tolist()


CHECK_SHAPES = [(1, 4, 0), (2, 3, 5), (1, 1, 9), (3, 7, 2)]
# GroupQueryAttention on ORT CPU refuses batch > 1 when sequence > 1 and a past is given.
GQA_CHECK_SHAPES = [(1, 4, 0), (1, 3, 5), (2, 1, 9), (3, 7, 0)]


def write_checked(path: Path, write: Callable[[Path], None], lm: torch.nn.Module, shapes: list) -> float:
    """Write a model beside `path`, keep it only when it passes onnx.checker (full) and matches torch."""
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        tmp_path = Path(tmp) / path.name
        write(tmp_path)
        onnx.checker.check_model(str(tmp_path), full_check=True)
        err = check_against_torch(lm, tmp_path, shapes)
        os.replace(tmp_path, path)
    print(f"{path.name}: {path.stat().st_size} bytes, max |ORT - torch| {err:.2e}")
    return err


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "exported"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {
        "greedy_prompt": GREEDY_PROMPT,
        "torch_greedy": {"gpt2": torch_greedy(tiny_gpt2()), "llama": torch_greedy(tiny_llama())},
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": ort.__version__,
        "models": {},
    }
    for family, make in (("gpt2", tiny_gpt2), ("llama", tiny_llama)):
        lm = make()
        for exporter, dynamo in (("torchscript", False), ("dynamo", True)):
            path = out / f"{family}_{exporter}.onnx"
            err = write_checked(path, lambda p, lm=lm, dynamo=dynamo: export(lm, p, dynamo), lm, CHECK_SHAPES)
            report["models"][path.name] = {"max_abs_err_vs_torch": err}
    gpt2, llama = tiny_gpt2(), tiny_llama()
    hand_written = (
        ("gpt2_mha_contrib", attention_decoders.gpt2_mha_contrib, gpt2, gpt2_shape, CHECK_SHAPES),
        ("llama_gqa_contrib", attention_decoders.gqa_contrib, llama, llama_shape, GQA_CHECK_SHAPES),
        ("llama_attention23", attention_decoders.attention23, llama, llama_shape, CHECK_SHAPES),
    )
    for name, build, lm, shape_of, shapes in hand_written:
        weights = {k: v.detach().numpy().astype(np.float32) for k, v in lm.state_dict().items()}
        model = build(weights, shape_of(lm.config))
        path = out / f"{name}.onnx"
        err = write_checked(path, lambda p, model=model: onnx.save(model, str(p)), lm, shapes)
        report["models"][path.name] = {"max_abs_err_vs_torch": err}
    tmp_report = out / "export_report.json.tmp"
    tmp_report.write_text(json.dumps(report, indent=1) + "\n")
    os.replace(tmp_report, out / "export_report.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
