"""The explorer's timeline (GET /api/timeline, GET /api/timeline/STEP?sentence=I): the attention maps a run
kept at each validation (train.attention_timeline, aiayn.training.timeline), found beside the served model
directory: RUN/average, RUN/best and RUN/checkpoints/step_N all belong to RUN, whose timeline/ holds them.
The maps are sent as stored (float32 values, every layer and head), with the sentences' subwords."""

from pathlib import Path

import numpy as np

from aiayn.errors import AiaynError
from aiayn.run_dir import TIMELINE_DIR, snapshot_name, snapshot_steps

KINDS = ("encoder_self", "decoder_self", "cross")


def find_timeline(model_dir) -> Path | None:
    """RUN/timeline for a model directory inside RUN (average/, best/, checkpoints/step_N), else None."""
    if not model_dir:
        return None
    model_dir = Path(model_dir).resolve()
    for run in (model_dir.parent, model_dir.parent.parent):
        if snapshot_steps(run / TIMELINE_DIR):
            return run / TIMELINE_DIR
    return None


def _sentence_count(snap) -> int:
    return sum(1 for name in snap.files if name.startswith("src_"))


def timeline_index(directory: Path | None, tokenizer) -> dict:
    """{"steps": [...], "sentences": [{"source_tokens", "target_input_tokens"}]} ({"steps": []} without one)."""
    steps = snapshot_steps(directory) if directory is not None else []
    if not steps:
        return {"steps": [], "sentences": []}
    with np.load(directory / snapshot_name(steps[-1])) as snap:
        sentences = [{"source_tokens": tokenizer.source_id_to_piece(snap[f"src_{i}"].tolist()),
                      "target_input_tokens": tokenizer.id_to_piece(snap[f"tgt_{i}"].tolist())}
                     for i in range(_sentence_count(snap))]
    return {"steps": steps, "sentences": sentences}


def timeline_snapshot(directory: Path | None, step: int, sentence: int) -> dict:
    """One stored snapshot's maps of one sentence: {"step", "sentence", "maps": {kind: (L, H, Q, K) lists}}."""
    if directory is None or step not in snapshot_steps(directory):
        raise AiaynError(f"no timeline snapshot at step {step}: GET /api/timeline lists the steps there are")
    with np.load(directory / snapshot_name(step)) as snap:
        if not 0 <= sentence < _sentence_count(snap):
            raise AiaynError(f"sentence {sentence} is not in the timeline: it has {_sentence_count(snap)} "
                             f"(0..{_sentence_count(snap) - 1})")
        maps = {kind: snap[f"{kind}_{sentence}"].tolist() for kind in KINDS if f"{kind}_{sentence}" in snap.files}
    return {"step": step, "sentence": sentence, "maps": maps}
