"""The beam search, shown: a record of every step of a sentence's search (Translator.trace).

At each step the search ranks candidates (a live hypothesis extended by one token) by their raw score, the
sum of log-probs; their normalised score is raw / lp(|Y|), |Y| counting this step's token (aiayn.decoding.
beam). A candidate's status says what became of it:
- "finished": it ends with </s> among the K best of the step (it joins the finished hypotheses);
- "finished_at_limit": a live one at the sentence's length limit, finished as it is (without </s>);
- "kept": one of the K that stay live;
- "pruned": the others (and every live one on the step at which the sentence is done);
- "dropped": it ends with </s> but is not among the K best of the step.
A step is `done` when the search of the sentence ends there: "length_limit", or "finished" (K hypotheses
have finished and, unless early stopping, none of the live ones, ended now, would beat the K-th).

Replay: the finished and finished_at_limit candidates, in the order of the steps and within a step in the
order listed (the order they finished), sorted stably by beam.rank (fewest unmet constraint tokens, then
the highest normalised score), are the search's n-best list: BeamTrace.replay gives them, scores and all.
"""

from dataclasses import asdict, dataclass

from aiayn.decoding.beam import rank

NEG_INF = float("-inf")
FINISHED = ("finished", "finished_at_limit")


@dataclass(frozen=True, kw_only=True)
class TraceCandidate:
    tokens: list[int]  # target ids of the hypothesis after this step, without bos and </s>
    token: int  # this step's token (</s> for a finished one)
    log_prob: float  # raw score: sum of log-probs
    score: float  # log_prob / the step's length penalty
    status: str  # see the module's docstring
    met: int | None = None  # constraint tokens met (None: the sentence has no constraints)
    unmet: int = 0  # constraint tokens a finished_at_limit hypothesis misses
    pieces: list[str] | None = None  # target subwords of `tokens` (filled by the Translator)
    text: str | None = None  # `tokens` as text (filled by the Translator)


@dataclass(frozen=True, kw_only=True)
class TraceStep:
    step: int  # 0-based; the hypotheses have step + 1 tokens, </s> included
    length_penalty: float  # lp(step + 1)
    candidates: list[TraceCandidate]  # finished ones (in the order they finished), kept (best first), the rest
    done: str | None = None  # "length_limit", "finished", or None: the search goes on


@dataclass(frozen=True, kw_only=True)
class BeamTrace:
    steps: list[TraceStep]
    n_best: int  # hypotheses the search returns
    beam: int
    alpha: float
    length_penalty_form: str
    early_stopping: bool

    def finished(self) -> list[TraceCandidate]:
        """Every hypothesis that finished, in the order it finished."""
        return [c for s in self.steps for c in s.candidates if c.status in FINISHED]

    def ranked(self) -> list[tuple[int, int]]:
        """Every finished hypothesis as (step, its index among that step's candidates), ranked by beam.rank
        (a stable sort: ties keep the order they finished in)."""
        places = [(i, j) for i, s in enumerate(self.steps) for j, c in enumerate(s.candidates) if c.status in FINISHED]
        return sorted(places, key=lambda p: rank(self.steps[p[0]].candidates[p[1]]))  # rank reads unmet and score

    def replay(self) -> list[TraceCandidate]:
        """The n-best list, from the trace alone: the finished hypotheses ranked by beam.rank."""
        return [self.steps[i].candidates[j] for i, j in self.ranked()[: self.n_best]]

    def to_dict(self) -> dict:
        """Plain JSON-ready data (a `--trace` file's "trace"; BeamTrace(**...) with its steps rebuilt reads it
        back)."""
        return asdict(self)


class TraceRecorder:
    """What beam_search calls at each step of each sentence (beam._advance); keeps the steps of `sentence`."""

    def __init__(self, *, eos_id: int, sentence: int = 0):
        self.eos_id, self.sentence = eos_id, sentence
        self.steps: list[TraceStep] = []

    def record(self, *, sentence: int, step: int, lp: float, values, rows, tokens, history, ended, live,
               at_limit: bool, done: bool, states) -> None:
        """values, rows, tokens: the step's candidates (raw score, row of the old state, token); ended, live:
        indices of those that finish with </s> and of the K kept live; states: their ConstraintStates or
        None."""
        if sentence != self.sentence:
            return
        listed = [j for j in list(ended) + list(live) if values[j] != NEG_INF]
        rest = set(listed)
        order = listed + [j for j in range(len(values)) if j not in rest and values[j] != NEG_INF]
        finished, kept = set(ended), set(live)
        out = []
        for j in order:
            if j in finished:
                status = "finished"
            elif j in kept:
                status = "finished_at_limit" if at_limit else "pruned" if done else "kept"
            else:
                status = "dropped" if tokens[j] == self.eos_id else "pruned"
            state = None if states is None else states[j]
            ends = status in ("finished", "dropped")
            out.append(TraceCandidate(
                tokens=history[rows[j]] + ([] if ends else [tokens[j]]), token=tokens[j], log_prob=values[j],
                score=values[j] / lp, status=status, met=None if state is None else state.met,
                unmet=state.unmet if status == "finished_at_limit" and state is not None else 0))
        reason = None if not done else "length_limit" if at_limit else "finished"
        self.steps.append(TraceStep(step=step, length_penalty=lp, candidates=out, done=reason))


def trace_search(model, src, params, prefix: list[int], constraints: list[list[int]], tokenizer) -> BeamTrace:
    """One sentence's beam search (src (1, S)), recorded, with each candidate's subwords and text."""
    import torch

    from aiayn.decoding.beam import beam_search

    recorder = TraceRecorder(eos_id=params.eos_id)
    with torch.inference_mode():
        beam_search(model, src, params, [prefix], constraints=[constraints], trace=recorder)
    steps = [TraceStep(step=s.step, length_penalty=s.length_penalty, done=s.done,
                       candidates=[_named(c, tokenizer) for c in s.candidates]) for s in recorder.steps]
    return BeamTrace(steps=steps, n_best=params.n_best, beam=params.beam, alpha=params.alpha,
                     length_penalty_form=params.lp_form, early_stopping=params.early_stopping)


def _named(c: TraceCandidate, tokenizer) -> TraceCandidate:
    return TraceCandidate(tokens=c.tokens, token=c.token, log_prob=c.log_prob, score=c.score, status=c.status,
                          met=c.met, unmet=c.unmet, pieces=tokenizer.id_to_piece(c.tokens),
                          text=tokenizer.decode(c.tokens))
