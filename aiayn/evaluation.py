"""Honest evaluation with sacreBLEU: BLEU (cased, and lowercased as the Multi30k papers report it) with
its signature, chrF and TER, 95% confidence intervals by paired bootstrap resampling, and a paired
significance test between two systems. Hypotheses are detokenized text, references are raw text."""

from dataclasses import asdict, dataclass

import sacrebleu
from sacrebleu.metrics import BLEU, CHRF, TER

from aiayn.errors import AiaynError

# A 95% interval reads the 2.5th and 97.5th percentiles of the resampled scores: with fewer than 100
# samples each end rests on one or two resampled scores and the interval is noise (with 1 sample it is
# one point, which may exclude the score itself). Past 10,000 the interval hardly changes; only the
# time and memory (samples x sentences indices) grow.
MIN_BOOTSTRAP = 100
MAX_BOOTSTRAP = 10_000


class EvaluationError(AiaynError):
    """Inputs that cannot be scored: misaligned or empty, or a bootstrap too small to mean anything."""


def check_bootstrap(n_samples: int, option: str = "--bootstrap") -> None:
    """0 = no interval; else MIN_BOOTSTRAP..MAX_BOOTSTRAP samples. Callers check before translating."""
    if n_samples != 0 and not MIN_BOOTSTRAP <= n_samples <= MAX_BOOTSTRAP:
        raise EvaluationError(f"{option} {n_samples}: a 95% confidence interval needs {MIN_BOOTSTRAP} to "
                              f"{MAX_BOOTSTRAP:,} bootstrap samples (1000 is usual); 0 turns it off")


def check_test_set(hyps: list[str], refs: list[str]) -> None:
    if len(hyps) != len(refs):
        raise EvaluationError(f"{len(hyps)} hypotheses but {len(refs)} references; they must be aligned")
    if not hyps:
        raise EvaluationError("no sentences to score; give a test set with at least one line")


def corpus_bleu(hyps: list[str], refs: list[str], lowercase: bool = False):
    return BLEU(lowercase=lowercase).corpus_score(hyps, [refs])


@dataclass
class Score:
    name: str
    score: float
    ci_low: float | None
    ci_high: float | None
    signature: str


def _metrics():
    return {"BLEU": BLEU(), "BLEU-lc": BLEU(lowercase=True), "chrF": CHRF(), "TER": TER()}


def evaluate_corpus(hyps: list[str], refs: list[str], bootstrap: int = 1000, seed: int = 12345) -> list[Score]:
    """Each metric's corpus score, its signature, and a bootstrap 95% CI (sacreBLEU's paired bootstrap
    machinery with one system: the spread of the score over resampled test sets)."""
    check_test_set(hyps, refs)
    check_bootstrap(bootstrap)
    results = []
    for name, metric in _metrics().items():
        score = metric.corpus_score(hyps, [refs])
        low = high = None
        if bootstrap > 0:
            low, high = _bootstrap_interval(metric, hyps, refs, bootstrap, seed)
        results.append(Score(name, round(score.score, 2), low, high, str(metric.get_signature())))
    return results


def _bootstrap_interval(metric, hyps, refs, n_samples, seed):
    import numpy as np

    stats = metric._extract_corpus_statistics(hyps, [refs])  # sufficient statistics per sentence
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(hyps), size=(n_samples, len(hyps)))
    stats = np.asarray(stats)
    scores = sorted(metric._compute_score_from_stats(stats[row].sum(0).tolist()).score for row in idx)
    return round(scores[int(0.025 * n_samples)], 2), round(scores[int(0.975 * n_samples) - 1], 2)


def compare_systems(baseline: list[str], candidate: list[str], refs: list[str], n_samples: int = 1000) -> dict:
    """Paired bootstrap resampling (Koehn 2004) via sacreBLEU: is `candidate` significantly different?
    -> {"identical": whether the outputs are, metric: {"baseline", "candidate", "p_value"}}.

    sacreBLEU's p is (1 + the resamples whose centred |difference| is strictly above the observed one) /
    (n + 1). Where a metric cannot tell the systems apart (identical outputs, or outputs that differ only in
    what the metric ignores), every resampled difference is 0, none is above 0, and p is 1 / (n + 1) =
    0.0010: "significant" for no difference at all. Such a metric's p is 1.0 here."""
    from sacrebleu.significance import PairedTest

    check_test_set(candidate, refs)
    check_test_set(baseline, refs)
    if n_samples == 0:
        raise EvaluationError("compare_systems: n_samples=0; a significance test needs bootstrap samples")
    check_bootstrap(n_samples, "n_samples")
    metrics = {"BLEU": BLEU(), "chrF": CHRF()}
    out: dict = {"identical": baseline == candidate}
    if out["identical"]:
        for metric in metrics.values():
            score = metric.corpus_score(candidate, [refs])  # keyed by its name, as sacreBLEU's test keys it
            out[score.name] = {"baseline": round(score.score, 2), "candidate": round(score.score, 2), "p_value": 1.0}
        return out
    named = [("baseline", baseline), ("candidate", candidate)]
    _, scores = PairedTest(named, metrics, references=[refs], test_type="bs", n_samples=n_samples)()
    for metric, name in zip(metrics.values(), [k for k in scores if k != "System"], strict=True):
        base, cand = scores[name]
        same = base.score == cand.score and _indistinguishable(metric, baseline, candidate, refs)
        out[name] = {"baseline": round(base.score, 2), "candidate": round(cand.score, 2),
                     "p_value": 1.0 if same else cand.p_value}
    return out


def _indistinguishable(metric, a: list[str], b: list[str], refs: list[str]) -> bool:
    """Whether `metric` sees the same sufficient statistics in every sentence of `a` and `b`."""
    return metric._extract_corpus_statistics(a, [refs]) == metric._extract_corpus_statistics(b, [refs])


def as_dicts(scores: list[Score]) -> list[dict]:
    return [asdict(s) for s in scores]


__all__ = ["EvaluationError", "Score", "as_dicts", "check_bootstrap", "compare_systems", "corpus_bleu",
           "evaluate_corpus", "sacrebleu"]


def load_test_set(*, src: str | None = None, ref: str | None = None, dataset: str | None = None,
                  pair: str = "de-en", split: str = "test_2016_flickr",
                  data_dir: str | None = None) -> tuple[list[str], list[str]]:
    """Sources and references: two aligned files, or a split of a named dataset (multi30k)."""
    from aiayn.data import multi30k
    from aiayn.data.corpus import read_lines, read_parallel

    if dataset:
        src_lang, _, tgt_lang = pair.partition("-")
        pairs = read_parallel(*multi30k.pair_paths(split, src_lang, tgt_lang, data_dir))
        return [s for s, _ in pairs], [t for _, t in pairs]
    if not (src and ref):
        raise EvaluationError("give --src FILE --ref FILE, or --dataset multi30k --pair de-en --split NAME")
    sources, refs = read_lines(src, allow_empty=True), read_lines(ref, allow_empty=True)
    for path, lines in ((src, sources), (ref, refs)):
        if not lines:  # translate accepts an empty input; a score of nothing means nothing
            raise EvaluationError(f"{path} is empty: there is nothing to translate and score; give a test set "
                                  f"with one sentence per line")
        if not any(line.strip() for line in lines):  # BLEU 0 and TER 0 of nothing, with a CI of [0, 0]
            raise EvaluationError(f"{path} has only blank lines ({len(lines)}): there is nothing to translate and "
                                  f"score; give a test set with one sentence per line")
    if len(sources) != len(refs):
        raise EvaluationError(f"{src} has {len(sources)} lines but {ref} has {len(refs)}; they must be aligned")
    return sources, refs


def dev_bleu_factory(tokenizer, valid_pairs, cfg):
    """Dev BLEU by greedy decoding: the callback the trainer calls at validation (training never imports
    decoding; the caller hands this in)."""
    from aiayn.decoding.greedy import greedy_translate

    pairs = valid_pairs[: cfg.train.bleu_sentences]
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]

    def dev_bleu(model) -> float:
        hyps = greedy_translate(model, tokenizer, sources, cfg.decode)
        return corpus_bleu(hyps, refs, lowercase=cfg.data.lowercase).score  # a lowercasing model: scored as -lc

    return dev_bleu
