"""Honest evaluation with sacreBLEU: BLEU (cased and lowercased) with its signature, chrF, TER, and
paired bootstrap confidence intervals / significance."""

import sacrebleu


def corpus_bleu(hyps: list[str], refs: list[str], lowercase: bool = False):
    metric = sacrebleu.metrics.BLEU(lowercase=lowercase)
    return metric.corpus_score(hyps, [refs])
