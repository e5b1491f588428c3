"""An export-onnx directory run as a browser page would run it: onnxruntime-web's WebAssembly backend and
SentencePiece compiled to WebAssembly, in Node (tests/interop/onnx_web_greedy.mjs). Its greedy translations
equal aiayn's, token for token, and its logits and maps equal aiayn's within 1e-4. Needs node and the npm
packages onnxruntime-web and @agnai/sentencepiece-js in the repository's node_modules (or the directory
AIAYN_NODE_MODULES names); skipped without them."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from aiayn.checkpoint import load_checkpoint
from aiayn.decoding.batches import encode_sources
from aiayn.decoding.translator import Translator
from aiayn.interop.onnx_export import export_onnx
from tests.model_helpers import model_dir
from tests.paths import REPO

SCRIPT = Path(__file__).with_name("onnx_web_greedy.mjs")
PACKAGES = ("onnxruntime-web", "@agnai/sentencepiece-js")
SENTENCES = ["forty five", "three hundred twelve", "nine thousand one", "seven hundred eighty six"]
TOL = 1e-4


def _node_modules() -> Path:
    found = Path(os.environ.get("AIAYN_NODE_MODULES", REPO / "node_modules"))
    if shutil.which("node") is None or not all((found / name / "package.json").is_file() for name in PACKAGES):
        pytest.skip(f"needs node and the npm packages {', '.join(PACKAGES)} in {found}")
    return found


@pytest.mark.slow
@torch.no_grad()
def test_onnxruntime_web_translates_as_aiayn(tokenizer, tmp_path):
    node_modules = _node_modules()
    model_path = model_dir(tmp_path / "model", tokenizer, "tiny")
    onnx_dir = export_onnx(model_path, tmp_path / "onnx")
    work = tmp_path / "web"  # the script beside a node_modules, where its imports resolve
    work.mkdir()
    shutil.copy(SCRIPT, work / SCRIPT.name)
    (work / "node_modules").symlink_to(node_modules)
    subprocess.run(["node", str(work / SCRIPT.name), str(onnx_dir), str(work / "out.json"), *SENTENCES],
                   check=True, timeout=300)
    results = json.loads((work / "out.json").read_text())
    model = load_checkpoint(model_path)[0].eval()
    expected = Translator.from_pretrained(model_path).translate(SENTENCES, beam=1, return_attention=True)
    for web, ours, source in zip(results, expected, encode_sources(tokenizer, SENTENCES)):
        assert web["source"] == source, web["sentence"]  # SentencePiece in WebAssembly: the same ids
        assert tokenizer.id_to_piece(web["ids"]) == ours.tokens and web["text"] == ours.text
        for name in ("encoder_self", "decoder_self", "cross"):
            got = np.asarray(web[name], dtype=np.float32).reshape(ours.attention[name].shape)
            assert np.abs(got - ours.attention[name]).max() < TOL, (web["sentence"], name)
        steps = ours.attention["cross"].shape[-2]
        tgt_in = torch.tensor([[tokenizer.bos_id, *web["ids"], tokenizer.eos_id][:steps]])
        logits = model(torch.tensor([source]), tgt_in)[0].numpy()
        assert np.abs(np.asarray(web["logits"], dtype=np.float32).reshape(logits.shape) - logits).max() < TOL
