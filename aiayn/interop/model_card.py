"""The model card (README.md) of an `aiayn export-hf` directory, so that the folder is ready to publish on the
Hugging Face hub: YAML front matter the hub reads (license, languages, library, tags), then what the
model is, the data it was trained on, its config, the BLEU recorded for it with sacreBLEU's signature (or
"not evaluated"), how it was trained (steps, time, the command to train it again) and how to run it with
transformers and CTranslate2, with the length limit it decodes with.
"""

import json
from pathlib import Path

from aiayn.config_text import config_yaml


def _read_json(file: Path) -> dict:
    try:
        value = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def run_dir(model_dir: Path) -> Path | None:
    """The training output directory the model came from (RUN/average, RUN/best, RUN/checkpoints/step_N):
    the nearest directory above it, or itself, that holds metrics.jsonl; None for an import or a copy."""
    for candidate in (model_dir, model_dir.parent, model_dir.parent.parent):
        if (candidate / "metrics.jsonl").is_file():
            return candidate
    return None


def training_summary(model_dir: Path) -> dict:
    """{"steps": last logged step, "minutes": its elapsed time} from the run's metrics.jsonl; {} without it."""
    run = run_dir(model_dir)
    last = {}
    if run is not None:
        for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and "step" in record:
                last = record
    if not last:
        return {}
    return {"steps": last["step"], "minutes": round(float(last.get("elapsed_s", 0.0)) / 60, 1)}


def bleu_record(model_dir: Path, cfg) -> str:
    """The BLEU recorded in the model's info.json (dev BLEU of training, greedy) with its signature, or
    "not evaluated"."""
    info = _read_json(model_dir / "info.json")
    bleu = info.get("bleu")
    if not isinstance(bleu, (int, float)):
        return ("not evaluated (no BLEU is recorded with this model): score it with `aiayn evaluate --model "
                "MODEL`, which prints BLEU, chrF and TER with their sacreBLEU signatures")
    import sacrebleu

    metric = sacrebleu.BLEU(lowercase=cfg.data.lowercase)  # as training's dev BLEU (aiayn.evaluation.corpus_bleu)
    metric.corpus_score(["x"], [["x"]])  # sacreBLEU signs a metric once it has scored: one reference, as dev BLEU
    signature = metric.get_signature()
    return (f"dev BLEU {bleu:.2f} at step {info.get('step', '?')} (greedy search on the first "
            f"{cfg.train.bleu_sentences} pairs of the validation data; sacreBLEU signature `{signature}`); not "
            f"a test-set score: `aiayn evaluate --model MODEL` gives one")


def _data_line(data) -> str:
    pair = f"{data.src_lang} → {data.tgt_lang}"
    if data.dataset == "multi30k":
        return f"Multi30k ({pair}), the training split; validation on {data.valid_split}"
    if data.train_src or data.train:
        return f"{pair}, from the files {data.train_src or data.train} (training) and {data.valid_src or data.valid}"
    return f"{data.dataset} ({pair})"


def model_card(*, model_dir: Path, cfg, license: str, max_length: int, joint: bool) -> str:
    """README.md of the export of the model in `model_dir` (config `cfg`); `max_length` is generate()'s."""
    from huggingface_hub import ModelCardData

    data, decode = cfg.data, cfg.decode
    languages = [lang for lang in (data.src_lang, data.tgt_lang) if lang]
    front = ModelCardData(license=license, language=languages or None, library_name="transformers",
                          pipeline_tag="translation", tags=["translation", "marian", "aiayn", "ctranslate2"])
    trained = training_summary(model_dir)
    how = (f"{trained['steps']} steps in {trained['minutes']} minutes" if trained else
           "not recorded with this model (it was not exported from a training run directory)")
    m = cfg.model
    ct2 = ("CTranslate2: `ct2-transformers-converter --model DIR --output_dir DIR-ct2`, then "
           "`ctranslate2.Translator` with the source pieces of `source.spm` and `</s>` appended"
           if joint else
           "CTranslate2: this model has separate vocabularies, which `ct2-transformers-converter` does not "
           "convert; `aiayn export --model MODEL --out DIR` writes a CTranslate2 model directly")
    return f"""---
{front.to_yaml()}
---

# {data.src_lang or 'source'}→{data.tgt_lang or 'target'} Transformer (aiayn)

A Transformer ("Attention Is All You Need") trained with [aiayn](https://pypi.org/project/aiayn/) and
exported as a Marian model (`aiayn export-hf`): `MarianMTModel` and `MarianTokenizer` load it, and
`generate()` with this folder's generation_config.json searches as aiayn does.

- **Architecture**: {m.n_encoder_layers}+{m.n_decoder_layers} layers, d_model {m.d_model}, {m.n_heads} heads,
  d_ff {m.d_ff}, activation {m.activation}, vocabulary {m.tgt_vocab_size} pieces
  ({'one SentencePiece model for both sides' if joint else 'separate source and target vocabularies'})
- **Data**: {_data_line(data)}
- **BLEU**: {bleu_record(model_dir, cfg)}
- **Training**: {how}; to train it again, save the config below as config.yaml and run
  `aiayn train config.yaml --out RUN`
- **Licence**: `{license}` (set it in the front matter above before publishing; the training data's own
  terms apply)

## Decoding

Beam {decode.beam}, length penalty {decode.length_penalty:g}, early stopping {str(decode.early_stopping).lower()}.
aiayn stops an output at {decode.max_len_a:g} × source length + {decode.max_len_b} tokens; generate() has no
limit that grows with the source, so generation_config.json sets `max_length` {max_length}: aiayn's limit
for the longest source the model was trained on ({data.max_len} tokens and `</s>`), plus the start token.
For aiayn's limit exactly, pass `max_new_tokens` per sentence.

- transformers: `MarianMTModel.from_pretrained(DIR).generate(**MarianTokenizer.from_pretrained(DIR)(texts,
  return_tensors="pt", padding=True))`
- {ct2}

## Config

```yaml
{config_yaml(cfg).rstrip()}
```
"""
