"""What the page says about the loaded model (GET /api/info): its architecture and sizes, its languages
and three example sentences it can handle. Computed once when the app is created; small and bounded."""

import logging

log = logging.getLogger(__name__)

# Sentences the shipped configs' models have seen the like of (the synthetic task is English number
# words -> German; coreference is the posts' "it" example, its noun pair held out of training; Multi30k
# describes images).
EXAMPLES = {
    "synthetic": ["forty five thousand six hundred twenty one", "twenty one", "three hundred seven thousand ninety"],
    "coreference": ["The animal didn't cross the street because it was too tired.",
                    "The animal didn't cross the street because it was too wide.",
                    "The cat did not jump over the ditch because it was too deep."],
    "en": ["A man is riding a bicycle down the street.", "Two dogs are playing in the snow.",
           "A little girl in a pink dress climbs the stairs."],
    "de": ["Ein Mann fährt mit dem Fahrrad die Straße entlang.", "Zwei Hunde spielen im Schnee.",
           "Ein kleines Mädchen in einem rosa Kleid steigt die Treppe hinauf."],
    "fr": ["Un homme fait du vélo dans la rue.", "Deux chiens jouent dans la neige.",
           "Une petite fille en robe rose monte les escaliers."],
    "cs": ["Muž jede na kole po ulici.", "Dva psi si hrají ve sněhu.",
           "Malá holčička v růžových šatech leze po schodech."],
}


def _data_section(translator) -> dict:
    """dataset and languages from the checkpoint's config.yaml ({} when it has none, e.g. an imported model),
    its label smoothing (epsilon_ls, which caps every predicted probability: the page says so), and the weight
    of train.pronoun_probe when the model was trained with that auxiliary loss."""
    if translator.model_dir is None:
        return {}
    info = _read_json(translator.model_dir / "info.json")
    if isinstance(info, dict) and info.get("output") == "import":
        # its config's data section is aiayn's default, not what the model was trained on; the languages are
        # the ones import-hf recorded in info.json (none in an import that named none, or made before it did)
        return {"dataset": f"(imported from {info.get('source', '')})", **_recorded_languages(info)}
    try:
        from aiayn.checkpoint import load_config_file

        cfg = load_config_file(translator.model_dir)
    except Exception:  # the model loaded, so its config did; a missing section only loses the languages
        log.warning("no data section for the page's model panel", exc_info=True)
        return {}
    data, probe = cfg.data, cfg.train.pronoun_probe
    return {"dataset": data.dataset, "src_lang": data.src_lang, "tgt_lang": data.tgt_lang,
            "label_smoothing": cfg.train.label_smoothing, **({"pronoun_probe": probe} if probe else {})}


def _recorded_languages(info: dict) -> dict:
    """{"src_lang", "tgt_lang"} of an import's info.json, or {} when it does not record both."""
    pair = {key: info.get(key) for key in ("src_lang", "tgt_lang")}
    return pair if all(isinstance(code, str) and code for code in pair.values()) else {}


def _sizes(model) -> dict:
    """What the model has, as the page reads it: multi_head (layers of heads, or one attention inside a
    recurrent decoder), the kinds of attention maps, the sizes; positions and d_ff are None where absent."""
    sizes = {"multi_head": model.multi_head, "attention_kinds": list(model.attention_kinds),
             "d_model": model.d_model, "n_heads": model.n_heads, "n_encoder_layers": model.n_encoder_layers,
             "n_decoder_layers": model.n_decoder_layers, "d_ff": model.d_ff, "positions": model.positional_kind}
    if model.multi_head:
        return {**sizes, "d_k": model.d_model // model.n_heads,
                "norm": "pre-LN" if model.norm_first else "post-LN (paper)"}
    from aiayn.inspect.steps.rnn_step import _score_doc

    dec = model.decoder  # the recurrent decoder: its cell, where it attends, its score function
    name, formula = _score_doc(dec.score)
    return {**sizes, "rnn_cell": type(dec.rnn).__name__, "decoder": dec.attention_kind, "score_name": name,
            "score_formula": formula}


def _read_json(path):
    import json

    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value


def _checkpoint_step(model_dir, info: dict) -> int | None:
    """The training step of a checkpoint: its info.json, or for an average the last averaged step_N."""
    if isinstance(info.get("step"), int):
        return info["step"]
    averaged = info.get("averaged") or []
    steps = [int(name.rsplit("_", 1)[1]) for name in (str(a).rsplit("/", 1)[-1] for a in averaged)
             if name.startswith("step_") and name.rsplit("_", 1)[1].isdigit()]
    return max(steps) if steps else None


def _run_bleu(model_dir, step: int | None) -> float | None:
    """The dev BLEU of the run at (or last before) `step`, from the run's metrics.jsonl."""
    run = model_dir.parent.parent if model_dir.parent.name == "checkpoints" else model_dir.parent
    try:
        lines = (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    best = None
    for line in lines:
        record = _parse(line)
        if "bleu" in record and (step is None or record.get("step", 0) <= step):
            best = record["bleu"]
    return best


def _parse(line: str) -> dict:
    import json

    try:
        record = json.loads(line)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def training_facts(model_dir) -> dict:
    """{"imported_from"} for an import-hf model, else {"steps", "dev_bleu"} as far as the checkpoint's
    info.json and its run's metrics.jsonl tell (None where they do not)."""
    if model_dir is None:
        return {"steps": None, "dev_bleu": None}
    info = _read_json(model_dir / "info.json")
    info = info if isinstance(info, dict) else {}
    if info.get("output") == "import":
        return {"imported_from": str(info.get("source", ""))}
    step = _checkpoint_step(model_dir, info)
    bleu = info.get("bleu") if isinstance(info.get("bleu"), (int, float)) else _run_bleu(model_dir, step)
    return {"steps": step, "dev_bleu": bleu}


def decode_settings(translator) -> dict:
    """The model's own decode settings, which the page starts from (as `aiayn translate` does)."""
    options = translator.resolve()
    return {"beam": options.beam, "alpha": options.alpha, "length_penalty_form": options.length_penalty_form}


def model_info(translator, max_source_tokens: int, max_text: int) -> dict:
    data = _data_section(translator)
    key = data.get("dataset") if data.get("dataset") in ("synthetic", "coreference") else data.get("src_lang", "")
    tok = translator.tokenizer
    return {"arch": translator.arch, "name": translator.model_dir.name if translator.model_dir else "",
            **data, **_sizes(translator.model),
            "parameters": sum(p.numel() for p in translator.model.parameters()),
            "src_vocab_size": tok.src_vocab_size, "tgt_vocab_size": tok.tgt_vocab_size,
            "unk_piece": tok.source_id_to_piece([tok.unk_id])[0],
            "max_source_tokens": max_source_tokens, "max_text": max_text, "examples": EXAMPLES.get(key, []),
            **training_facts(translator.model_dir), "decode": decode_settings(translator)}
