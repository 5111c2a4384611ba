"""Export tiny random-weight speech models to ONNX with optimum, as a user deploying them would.

Needs torch, transformers and optimum-onnx, which the project does not depend on: run it with a
separate venv (see models/exported/README.md), never in CI. optimum-onnx 0.1 pins transformers
below 5, so its venv is not export_decoders.py's. The outputs are committed under models/exported/.

    /work/venv-optimum/bin/python models/export_speech.py [--out models/exported]

Writes, from seeded random-weight configs (2 layers, hidden 64):
  whisper_encoder.onnx             Whisper encoder over 80 log-mel bins x 128 frames (optimum's encoder_model)
  whisper_decoder.onnx             the decoder's first step: no past, cross-attention keys/values made
  whisper_decoder_with_past.onnx   a step with past: self-attention past concatenated, cross-attention past read
  whisper_decoder_merged.onnx      both in one graph, an If on use_cache_branch (optimum's merged decoder)
  wav2vec2_ctc.onnx                a wav2vec2 CTC encoder: conv feature extractor + transformer + CTC head
and checks every file's outputs against the torch model on onnxruntime before keeping it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import optimum.version
import torch
import transformers
from optimum.exporters.onnx import main_export
from transformers import Wav2Vec2Config, Wav2Vec2ForCTC, WhisperConfig, WhisperForConditionalGeneration
from transformers.cache_utils import EncoderDecoderCache

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from models import exported  # noqa: E402
from models.export_decoders import randomised_norms  # noqa: E402

SEED = 0
LAYERS = 2
HIDDEN = 64
HEADS = 4
MELS = 80
FRAMES = 128  # 2 x max_source_positions: Whisper's encoder takes exactly this many
VOCAB = 512
SAMPLES = 16000  # one second of 16 kHz audio for wav2vec2's checks
ATOL = 1e-4
# optimum's file -> the committed name
WHISPER_FILES = {
    "encoder_model.onnx": "whisper_encoder.onnx",
    "decoder_model.onnx": "whisper_decoder.onnx",
    "decoder_with_past_model.onnx": "whisper_decoder_with_past.onnx",
    "decoder_model_merged.onnx": "whisper_decoder_merged.onnx",
}


def tiny_whisper() -> WhisperForConditionalGeneration:
    torch.manual_seed(SEED)
    cfg = WhisperConfig(
        vocab_size=VOCAB,
        num_mel_bins=MELS,
        encoder_layers=LAYERS,
        decoder_layers=LAYERS,
        d_model=HIDDEN,
        encoder_attention_heads=HEADS,
        decoder_attention_heads=HEADS,
        encoder_ffn_dim=2 * HIDDEN,
        decoder_ffn_dim=2 * HIDDEN,
        max_source_positions=FRAMES // 2,
        max_target_positions=64,
        init_std=0.2,  # as the decoders': logits of scale ~1
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
    )
    cfg._attn_implementation = "eager"
    return randomised_norms(WhisperForConditionalGeneration(cfg).eval())


def tiny_wav2vec2() -> Wav2Vec2ForCTC:
    torch.manual_seed(SEED)
    cfg = Wav2Vec2Config(
        vocab_size=32,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=2 * HIDDEN,
        conv_dim=(32, 32, 32),
        conv_stride=(5, 2, 2),
        conv_kernel=(10, 3, 3),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4,
        feat_extract_norm="group",  # wav2vec2-base's: GroupNorm after the first conv, post-norm transformer
        do_stable_layer_norm=False,
        initializer_range=0.2,
        pad_token_id=0,
    )
    cfg._attn_implementation = "eager"
    return randomised_norms(Wav2Vec2ForCTC(cfg).eval())


def optimum_export(model: torch.nn.Module, task: str, out: Path, **shapes: int) -> None:
    """optimum's own export (post-processing on: it writes the merged decoder) of `model` into `out`."""
    with tempfile.TemporaryDirectory() as saved:
        model.save_pretrained(saved)
        main_export(saved, output=str(out), task=task, local_files_only=True, **shapes)


def session(path: Path) -> ort.InferenceSession:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def run(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    sess = session(path)
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def present_names(layers: int, cross: bool) -> list[str]:
    parts = ("decoder", "encoder") if cross else ("decoder",)
    return [f"present.{i}.{p}.{kv}" for i in range(layers) for p in parts for kv in ("key", "value")]


def torch_step(model, ehs: torch.Tensor, ids: torch.Tensor, past: tuple | None) -> dict[str, np.ndarray]:
    """Logits and the cache as optimum names them, from one decoder step in torch."""
    cache = EncoderDecoderCache.from_legacy_cache(past) if past else None
    with torch.no_grad():
        out = model(encoder_outputs=(ehs,), decoder_input_ids=ids, past_key_values=cache, use_cache=True)
    legacy = out.past_key_values.to_legacy_cache()
    flat = [t for layer in legacy for t in layer]
    return {"logits": out.logits.numpy(), **dict(zip(present_names(len(legacy), True), (t.numpy() for t in flat)))}


def worst(got: dict[str, np.ndarray], want: dict[str, np.ndarray], what: str) -> float:
    err = 0.0
    for name, g in got.items():
        if g.shape != want[name].shape:
            raise SystemExit(f"{what}: {name} shape {g.shape} != torch {want[name].shape}")
        err = max(err, float(np.abs(g - want[name]).max()))
    if err > ATOL:
        raise SystemExit(f"{what}: differs from torch by {err:.2e} (> {ATOL})")
    return err


def past_feeds(present: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k.replace("present.", "past_key_values.", 1): v for k, v in present.items() if k.startswith("present.")}


def check_whisper(model, folder: Path) -> dict[str, float]:
    """Every file against torch, on one request per (batch, prompt tokens): the encoder over seeded mels,
    the first decoder step on the prompt, then a one-token step with past, separately and merged."""
    errs = dict.fromkeys(WHISPER_FILES.values(), 0.0)

    def check(name: str, feeds: dict[str, np.ndarray], want: dict[str, np.ndarray], self_only: bool = False) -> None:
        got = run(folder / name, feeds)
        if self_only:  # the merged decoder passes the cross-attention past through: torch has it too
            got = {k: v for k, v in got.items() if k in want}
        errs[name] = max(errs[name], worst(got, want, name))

    for batch, prompt in ((1, 4), (2, 3), (3, 1)):
        g = torch.Generator().manual_seed(10 * batch + prompt)
        mels = torch.randn(batch, MELS, FRAMES, generator=g)
        ids = torch.randint(0, VOCAB, (batch, prompt), generator=g).numpy()
        nxt = torch.randint(0, VOCAB, (batch, 1), generator=g).numpy()
        with torch.no_grad():
            ehs = model.model.encoder(mels).last_hidden_state
        check("whisper_encoder.onnx", {"input_features": mels.numpy()}, {"last_hidden_state": ehs.numpy()})
        first = torch_step(model, ehs, torch.from_numpy(ids), None)
        check("whisper_decoder.onnx", {"input_ids": ids, "encoder_hidden_states": ehs.numpy()}, first)
        step = torch_step(model, ehs, torch.from_numpy(nxt), legacy_cache(first))
        step = {k: v for k, v in step.items() if ".encoder." not in k}  # with past, only the self-attention grows
        check("whisper_decoder_with_past.onnx", {"input_ids": nxt, **past_feeds(first)}, step)
        empty = {k: np.zeros((batch, HEADS, 0, HIDDEN // HEADS), np.float32) for k in past_feeds(first)}
        merged = {"encoder_hidden_states": ehs.numpy()}
        no_cache = {"input_ids": ids, **empty, "use_cache_branch": np.array([False])}
        check("whisper_decoder_merged.onnx", merged | no_cache, first)
        cache = {"input_ids": nxt, **past_feeds(first), "use_cache_branch": np.array([True])}
        check("whisper_decoder_merged.onnx", merged | cache, step, self_only=True)
    return errs


def legacy_cache(present: dict[str, np.ndarray]) -> tuple:
    """optimum's present.* as transformers' legacy cache: per layer (self k, self v, cross k, cross v)."""
    names = present_names(LAYERS, True)
    return tuple(tuple(torch.from_numpy(present[n]) for n in names[4 * i : 4 * i + 4]) for i in range(LAYERS))


GREEDY_SEED, GREEDY_STEPS = 0, 8


def torch_greedy(model) -> list[int]:
    """Greedy tokens after decoder_start_token_id over `exported.log_mels(seed 0)`, with transformers'
    cache, for the tests to compare ORT's against (transformers' Whisper generate adds language and
    task logic that a tiny random model has no tokens for)."""
    mels = torch.from_numpy(exported.log_mels(np.random.default_rng(GREEDY_SEED)))
    with torch.no_grad():
        ehs = model.model.encoder(mels).last_hidden_state
        ids = torch.tensor([[model.config.decoder_start_token_id]])
        cache, out = None, []
        for _ in range(GREEDY_STEPS):
            step = model(encoder_outputs=(ehs,), decoder_input_ids=ids, past_key_values=cache, use_cache=True)
            cache = step.past_key_values
            ids = step.logits[:, -1:].argmax(-1)
            out.append(int(ids))
    return out


def check_wav2vec2(model, path: Path) -> float:
    err = 0.0
    for batch, samples in ((1, SAMPLES), (2, SAMPLES // 2 + 123)):
        audio = torch.randn(batch, samples, generator=torch.Generator().manual_seed(samples)) * 0.1
        with torch.no_grad():
            want = model(audio).logits.numpy()
        err = max(err, worst(run(path, {"input_values": audio.numpy()}), {"logits": want}, "wav2vec2"))
    return err


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "exported"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "optimum": optimum.version.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": ort.__version__,
        "greedy_seed": GREEDY_SEED,
        "torch_greedy": torch_greedy(tiny_whisper()),
        "models": {},
    }
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        staged = Path(tmp)
        whisper = tiny_whisper()
        optimum_export(whisper, "automatic-speech-recognition-with-past", staged / "whisper", nb_max_frames=FRAMES)
        for src, dst in WHISPER_FILES.items():
            shutil.move(staged / "whisper" / src, staged / dst)
        wav2vec2 = tiny_wav2vec2()
        optimum_export(wav2vec2, "automatic-speech-recognition", staged / "wav2vec2")
        shutil.move(staged / "wav2vec2" / "model.onnx", staged / "wav2vec2_ctc.onnx")
        errs = check_whisper(whisper, staged)
        errs["wav2vec2_ctc.onnx"] = check_wav2vec2(wav2vec2, staged / "wav2vec2_ctc.onnx")
        for name, err in errs.items():
            onnx.checker.check_model(str(staged / name), full_check=True)
            os.replace(staged / name, out / name)
            print(f"{name}: {(out / name).stat().st_size} bytes, max |ORT - torch| {err:.2e}")
            report["models"][name] = {"max_abs_err_vs_torch": err}
    (out / "export_speech_report.json").write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
