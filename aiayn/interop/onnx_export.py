"""Export a Transformer as two ONNX graphs that also return every attention map
(`aiayn export-onnx --model M --out DIR`, optional extra `aiayn[onnx]`), for runtimes without Python
(onnxruntime-web in a browser, onnxruntime in another language).

DIR holds:

    encoder.onnx      src (B, S) int64 -> memory (B, S, D), encoder_self (B, L, H, S, S)
    decoder.onnx      src (B, S) int64, memory (B, S, D), tgt_in (B, T) int64
                      -> logits (B, T, V), decoder_self (B, L, H, T, T), cross (B, L, H, T, S)
    model.json        the facts a runtime needs (special ids, sizes, the length limit, languages)
    tokenizer files   the model's own: tokenizer.model (one joint SentencePiece vocabulary: its ids are
                      the model's) or source.spm, target.spm, vocab.json, ... (an imported Marian model)
    README.md         the same, for a person

The decoder reads the whole prefix at every step, with no cache of keys and values: a greedy or beam loop
in any language is then a plain loop over one graph (aiayn.interop.onnx_greedy is one in numpy), and for
the small models this is meant for the recomputation costs little. `src` is the decoder's input too: its
padding (pad_id) says which memory positions may be attended. Every length axis and the batch are dynamic;
a length may not exceed max_positions. The maps are the softmax weights of §3.2.1, one per layer and head.
"""

import json
from pathlib import Path

import torch
from torch import nn

from aiayn.errors import AiaynError
from aiayn.model.masks import padding_mask

OPSET = 17  # LayerNormalization is one ONNX op from opset 17 on
ENCODER, DECODER, FACTS = "encoder.onnx", "decoder.onnx", "model.json"
FORMAT_VERSION = 1


class EncoderGraph(nn.Module):
    """The encoder of a Transformer, with its maps: src (B, S) -> memory (B, S, D), (B, L, H, S, S)."""

    def __init__(self, *, model):
        super().__init__()
        self.model = model

    def forward(self, src):
        return self.model.encode(src, return_attention=True)


class DecoderGraph(nn.Module):
    """The decoder over a whole prefix, with its maps: src (B, S), memory (B, S, D), tgt_in (B, T) ->
    logits (B, T, V), decoder_self (B, L, H, T, T), cross (B, L, H, T, S). Transformer.decode's sums,
    with the look-ahead mask given as a tensor (see look_ahead_mask); the tests hold the two equal."""

    def __init__(self, *, model):
        super().__init__()
        self.model = model

    def forward(self, src, memory, tgt_in):
        model, src_mask = self.model, padding_mask(src, self.model.pad_id)
        causal = look_ahead_mask(tgt_in)
        x, self_ws, cross_ws = model._embed(model.tgt_embed, tgt_in), [], []
        for layer in model.decoder_layers:
            x, self_w, cross_w = _decoder_layer(layer, x, memory, src_mask, causal)
            self_ws.append(self_w)
            cross_ws.append(cross_w)
        logits = model.generator(model.decoder_norm(x))  # §3.4
        return logits, torch.stack(self_ws, dim=1), torch.stack(cross_ws, dim=1)  # L x (B, H, T, *) -> (B, L, ...)


def _decoder_layer(layer, x, memory, src_mask, causal):
    """DecoderLayer.forward with the look-ahead mask given: x (B, T, D) -> (B, T, D), self weights
    (B, H, T, T), cross (B, H, T, S)."""
    x, self_w = layer.residual(x, layer.self_attn_norm, lambda h: layer.self_attn(h, h, h, causal, True))
    x, cross_w = layer.residual(x, layer.cross_attn_norm, lambda h: layer.cross_attention(h, memory, src_mask, True))
    x, _ = layer.residual(x, layer.ffn_norm, lambda h: (layer.ffn(h), None))
    return x, self_w, cross_w


def look_ahead_mask(tgt_in: torch.Tensor) -> torch.Tensor:
    """tgt_in (B, T) -> (1, 1, T, T) bool, True on and below the diagonal (§3.2.3), computed from the
    tensor: the tracer keeps a mask made from Python sizes (torch.ones(T, T)) at the example's T."""
    position = torch.ones_like(tgt_in[:1]).cumsum(-1)  # (1, T): 1 .. T
    return (position[:, :, None] >= position[:, None, :])[:, None]


def check_exportable(model) -> None:
    """One line for a model the two graphs cannot hold."""
    if not model.multi_head:
        raise AiaynError(f"export-onnx writes Transformers (model.arch: transformer), not model.arch="
                         f"{model.arch!r}: an RNN's decoder state has no ONNX form here")


def _export(graph: nn.Module, example: tuple, path: Path, inputs: dict, outputs: dict) -> None:
    """inputs/outputs: name -> {axis: axis name} (the dynamic axes)."""
    import warnings

    with warnings.catch_warnings():  # the tracer's notes on Python ints taken from sizes: checked by the tests
        warnings.simplefilter("ignore")
        torch.onnx.export(graph, example, str(path), input_names=list(inputs), output_names=list(outputs),
                          dynamic_axes={**inputs, **outputs}, opset_version=OPSET, dynamo=False,
                          do_constant_folding=False)  # folding stores a tied output projection twice


def write_graphs(model, out: Path) -> None:
    """encoder.onnx and decoder.onnx of the float32, eval-mode `model` into the directory `out`."""
    src = torch.tensor([[5, 6, 7, 8, model.pad_id], [5, 6, 7, 8, 9]])  # padding in the example: traced masks
    tgt_in = torch.tensor([[1, 5, 6], [1, 7, 8]])
    with torch.no_grad():
        memory, _ = model.encode(src)
    batch, s, t = {0: "batch"}, {1: "src_len"}, {1: "tgt_len"}
    _export(EncoderGraph(model=model), (src,), out / ENCODER, {"src": {**batch, **s}},
            {"memory": {**batch, **s}, "encoder_self": {0: "batch", 3: "src_len", 4: "src_len"}})
    _export(DecoderGraph(model=model), (src, memory, tgt_in), out / DECODER,
            {"src": {**batch, **s}, "memory": {**batch, **s}, "tgt_in": {**batch, **t}},
            {"logits": {**batch, **t}, "decoder_self": {0: "batch", 3: "tgt_len", 4: "tgt_len"},
             "cross": {0: "batch", 3: "tgt_len", 4: "src_len"}})


def model_facts(model, cfg, tokenizer) -> dict:
    """What a runtime needs besides the graphs (written as model.json)."""
    joint = "tokenizer.model" in tokenizer.files()
    return {
        "format": "aiayn-onnx", "version": FORMAT_VERSION,
        "encoder": ENCODER, "decoder": DECODER, "decoder_reads": "prefix",
        "src_lang": cfg.data.src_lang, "tgt_lang": cfg.data.tgt_lang,
        "pad_id": tokenizer.pad_id, "unk_id": tokenizer.unk_id, "bos_id": tokenizer.bos_id,
        "eos_id": tokenizer.eos_id, "forbidden_outputs": sorted({tokenizer.pad_id, tokenizer.bos_id}),
        "src_vocab_size": tokenizer.src_vocab_size, "tgt_vocab_size": tokenizer.tgt_vocab_size,
        "tokenizer": {"kind": "sentencepiece" if joint else "marian", "files": sorted(tokenizer.files())},
        "source_ends_with_eos": True,
        "n_encoder_layers": model.n_encoder_layers, "n_decoder_layers": model.n_decoder_layers,
        "n_heads": model.n_heads, "d_model": model.d_model, "d_ff": model.d_ff,
        "max_positions": model.max_positions, "norm_first": model.norm_first,
        "positional": model.positional_kind,
        "max_len_a": cfg.decode.max_len_a, "max_len_b": cfg.decode.max_len_b,
        "max_output_len": "min(floor(max_len_a * |src| + max_len_b), max_positions), at least 1; "
                          "|src| counts the source's tokens with its </s>, without padding",
    }


def readme(facts: dict) -> str:
    return f"""# ONNX export of an aiayn Transformer ({facts['src_lang']} -> {facts['tgt_lang']})

Written by `aiayn export-onnx`. Shapes: B batch, S source length, T target prefix length, D d_model
({facts['d_model']}), V target vocabulary ({facts['tgt_vocab_size']}), H heads ({facts['n_heads']}),
L layers (encoder {facts['n_encoder_layers']}, decoder {facts['n_decoder_layers']}). Lengths at most
{facts['max_positions']}.

## {ENCODER}

- input `src` int64 (B, S): source ids, the source's tokens then </s> (id {facts['eos_id']}), padded with
  pad_id {facts['pad_id']} on the right
- output `memory` float32 (B, S, D)
- output `encoder_self` float32 (B, L, H, S, S): encoder self-attention, per layer and head

## {DECODER}

Reads the whole target prefix at every step (no cache).

- input `src` int64 (B, S): the encoder's input (its padding masks the memory)
- input `memory` float32 (B, S, D): the encoder's output
- input `tgt_in` int64 (B, T): <s> (id {facts['bos_id']}) then the tokens chosen so far
- output `logits` float32 (B, T, V): row t scores the token after tgt_in[:, :t+1]
- output `decoder_self` float32 (B, L, H, T, T): masked decoder self-attention
- output `cross` float32 (B, L, H, T, S): encoder-decoder attention

## Greedy translation

Encode once; then, from tgt_in = [<s>], take the argmax of the last row of `logits` with the ids
{facts['forbidden_outputs']} (<pad>, <s>) excluded, append it, and stop at </s> or after
{facts['max_output_len']} tokens (here max_len_a = {facts['max_len_a']}, max_len_b = {facts['max_len_b']}).

## Files

`{FACTS}` holds these facts; the tokenizer files are {', '.join(facts['tokenizer']['files'])}.
"""


def export_onnx(model_dir: str | Path, out: str | Path, force: bool = False) -> Path:
    """Write DIR (new or empty, or with force an earlier export-onnx: nothing else is ever replaced)."""
    from aiayn.checkpoint import EXPORT_MARKER, check_output_dir, load_checkpoint
    from aiayn.io import atomic_dir
    from aiayn.run_dir import resolve_model_dir

    try:
        import onnx  # noqa: F401 (here: the error before any work; torch.onnx.export needs it)
    except ImportError as err:
        raise AiaynError(f"export-onnx needs onnx: pip install 'aiayn[onnx]' ({err})") from None
    source = resolve_model_dir(model_dir)
    check_output_dir(out, "export-onnx", force, inputs=[model_dir, source])
    model, cfg, tokenizer = load_checkpoint(source)
    check_exportable(model)
    model = model.float().eval()
    facts = model_facts(model, cfg, tokenizer)
    with atomic_dir(out) as tmp:
        write_graphs(model, tmp)
        for name, data in tokenizer.files().items():
            (tmp / name).write_bytes(data)
        (tmp / FACTS).write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
        (tmp / "README.md").write_text(readme(facts), encoding="utf-8")
        marker = {"output": "export-onnx", "model": str(source.resolve()),
                  "files": sorted(p.name for p in tmp.iterdir())}
        (tmp / EXPORT_MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")
    return Path(out)
