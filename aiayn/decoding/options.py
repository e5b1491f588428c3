"""DecodeOptions: every option of a translation call, in one frozen object, checked in one place.

The Python API, the CLI, the web server and its batching all build a DecodeOptions and hand it to
Translator.translate. Its checks run twice and only here:
- when it is made (`__post_init__`): types, ranges and combinations that hold for any model;
- against the model and engine that will decode (`for_model`): the model's defaults filled in
  (beam, length penalty, its form, early stopping), the beam against the target vocabulary, lengths
  against the model's positions, and what the engine can do (its Capabilities).
Every message names the option as the Python API spells it (beam, n_best, ...); the CLI's spelling is
the same with dashes.
"""

from dataclasses import dataclass, fields, replace

from aiayn.decoding.beam import LP_FORMS
from aiayn.decoding.sampling import SamplingOptions
from aiayn.errors import AiaynError

MAX_ALPHA = 10.0  # ((5 + |Y|) / 6) ** alpha overflows a float for large alpha; useful values are below 2
# options that only beam search has: with sampling, each must keep its default
BEAM_ONLY = ("beam", "n_best", "alpha", "length_penalty_form", "early_stopping", "min_length",
             "no_repeat_ngram_size", "return_attention")


def check_int(name: str, value, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise AiaynError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise AiaynError(f"{name}={value} must be {bound}")


def _check_number(name: str, value, low: float, high: float, low_open: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            (low < value if low_open else low <= value) and value <= high):
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}]"
        raise AiaynError(f"{name} must be a number in {interval}, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class DecodeOptions:
    """How to translate. None means "the model's own setting" (its config's decode section).

    Search: beam (K), n_best (hypotheses returned, 1..K), alpha (length penalty, >= 0) and its form
    ("gnmt": ((5 + |Y|) / 6)^alpha, "hf": |Y|^alpha), early_stopping (end a sentence at K finished
    hypotheses). Or sampling (temperature, top-k, top-p, seed) instead of beam search: one translation
    per sentence, none of the beam-only options.
    Controls: min_length (output tokens before </s> may end it; at least the model's decode.min_length),
    no_repeat_ngram_size (0: the model's decode.no_repeat_ngram_size, itself 0 (off) unless its config sets
    it), max_output_len (tokens, at most the model's positions).
    Results: return_attention (every attention map of the best hypothesis; native engine).
    Batching: batch_size (sentences), max_tokens (source tokens of a batch, padding included), spread
    (with several workers, batches of equal size so that all end together; the server passes False),
    time_limit (seconds for the whole call; past it, BudgetExceeded)."""

    beam: int | None = None
    n_best: int = 1
    alpha: float | None = None
    length_penalty_form: str | None = None
    early_stopping: bool | None = None
    sampling: SamplingOptions | None = None
    min_length: int = 0
    no_repeat_ngram_size: int = 0
    max_output_len: int | None = None
    return_attention: bool = False
    batch_size: int = 64
    max_tokens: int | None = None
    spread: bool = True
    time_limit: float | None = None

    def __post_init__(self):
        if self.beam is not None:
            check_int("beam", self.beam, 1)
        self._check_n_best(self.beam)
        if self.alpha is not None:
            _check_number("alpha (length penalty)", self.alpha, 0, MAX_ALPHA)
        if self.length_penalty_form is not None and self.length_penalty_form not in LP_FORMS:
            raise AiaynError(f"length_penalty_form must be one of {', '.join(LP_FORMS)}, "
                             f"got {self.length_penalty_form!r}")
        for name in ("early_stopping", "return_attention", "spread"):
            value = getattr(self, name)
            if not (isinstance(value, bool) or (value is None and name == "early_stopping")):
                raise AiaynError(f"{name} must be true or false, got {value!r}")
        check_int("min_length", self.min_length, 0)
        check_int("no_repeat_ngram_size", self.no_repeat_ngram_size, 0)
        for name, value in (("max_output_len", self.max_output_len), ("max_tokens", self.max_tokens)):
            if value is not None:
                check_int(name, value, 1)
        check_int("batch_size", self.batch_size, 1)
        if self.time_limit is not None:
            _check_number("time_limit (seconds)", self.time_limit, 0, 1e9)
        if self.sampling is not None:
            self._check_sampling()

    def _check_n_best(self, beam: int | None) -> None:
        check_int("n_best", self.n_best, 1)
        if beam is not None and self.n_best > beam:
            raise AiaynError(f"n_best={self.n_best} must be at most the beam ({beam})")

    def _check_sampling(self) -> None:
        if not isinstance(self.sampling, SamplingOptions):
            raise AiaynError(f"sampling must be a SamplingOptions, got {type(self.sampling).__name__}")
        self.sampling.check()
        defaults = DecodeOptions()
        clashes = [name for name in BEAM_ONLY if getattr(self, name) != getattr(defaults, name)]
        if clashes:
            raise AiaynError(f"sampling draws one translation per sentence: drop {', '.join(clashes)}")

    def overridden(self, **overrides) -> "DecodeOptions":
        """A copy with some options changed (checked again); an unknown name is refused, naming it."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise AiaynError(f"unknown decoding option {', '.join(unknown)}; the options are "
                             f"{', '.join(sorted(known))}")
        return replace(self, **overrides) if overrides else self

    def for_model(self, decode_cfg, *, vocab_size: int, max_positions: int, capabilities) -> "DecodeOptions":
        """The options a search runs with: the model's defaults filled in, checked against the model (its
        target vocabulary, its positions) and against what the engine can do (its Capabilities,
        aiayn.decoding.engines): the one place where an option an engine cannot serve is refused
        (check_engine, which the command line also calls before it loads a model)."""
        self.check_engine(capabilities)
        beam = decode_cfg.beam if self.beam is None else self.beam
        if 2 * beam > vocab_size:
            raise AiaynError(f"beam={beam}: each step keeps the 2 x beam best of the model's {vocab_size} target "
                             f"pieces per hypothesis; give a beam of at most {vocab_size // 2}")
        self._check_n_best(beam)
        cap = min(self.max_output_len or max_positions, max_positions)  # step t reads position t
        min_length = self.min_length
        if self.sampling is None:  # the model's own controls (e.g. an imported generation config's)
            min_length = max(min_length, getattr(decode_cfg, "min_length", 0))
        if min_length >= cap:
            raise AiaynError(f"min_length={min_length}: outputs of this model are at most {cap} tokens with "
                             f"</s>; give at most {cap - 1}")
        if self.sampling is not None:
            return replace(self, max_output_len=cap)
        alpha = decode_cfg.length_penalty if self.alpha is None else self.alpha
        form = self.length_penalty_form or decode_cfg.length_penalty_form
        early = decode_cfg.early_stopping if self.early_stopping is None else self.early_stopping
        form, early = self._engine_search(capabilities, form, alpha, early)
        no_repeat = self.no_repeat_ngram_size or getattr(decode_cfg, "no_repeat_ngram_size", 0)
        return replace(self, beam=beam, alpha=alpha, length_penalty_form=form, early_stopping=early,
                       max_output_len=cap, min_length=min_length, no_repeat_ngram_size=no_repeat)

    def check_engine(self, capabilities) -> None:
        """Refuses what the engine cannot do whatever the model: sampling, attention maps, searching on past K
        finished hypotheses (an explicit early_stopping false). Needs no model, so a command calls it before
        loading one; for_model calls it too."""
        name = capabilities.name
        if self.sampling is not None and not capabilities.sampling:
            raise AiaynError("sampling needs the native engine (--engine native)")
        if self.return_attention and not capabilities.attention_maps:
            raise AiaynError(f"attention maps need the native engine (--engine native): the {name} engine returns "
                             f"at most one averaged cross-attention matrix, not aiayn's maps of every layer and head")
        if not capabilities.late_stopping and self.early_stopping is False and self.sampling is None:
            raise AiaynError(f"early_stopping false (--no-early-stopping: search on while a live hypothesis "
                             f"could still win): the {name} engine ends a sentence at beam-size finished "
                             f"hypotheses; drop it, or use --engine native")

    def _engine_search(self, capabilities, form: str, alpha: float, early: bool) -> tuple[str, bool]:
        """The length penalty's form and early stopping the engine can search with. CTranslate2 scores with
        |Y|^alpha (the hf form) and ends a sentence at K finished hypotheses: its defaults become those, an
        explicit other form is refused (with a non-zero alpha, which may be the model's)."""
        name, forms = capabilities.name, capabilities.length_penalty_forms
        if form not in forms:
            if self.length_penalty_form == form and alpha != 0:
                raise AiaynError(f"--length-penalty-form {form}: the {name} engine scores with "
                                 f"{', '.join(forms)} only; use --length-penalty-form {forms[0]} (the default with "
                                 f"--engine {name}), or --engine native")
            form = forms[0]
        if not capabilities.late_stopping:  # an explicit false was refused by check_engine
            early = True
        return form, early


def options_from_args(args) -> DecodeOptions:
    """The decoding options of `aiayn translate` / `evaluate` / `attention` (absent flags: defaults)."""
    sampling = None
    names = ("temperature", "top_k", "top_p", "seed")
    given = [f"--{n.replace('_', '-')}" for n in names if getattr(args, n, None) is not None]
    if getattr(args, "sample", False):
        defaults = SamplingOptions()
        sampling = SamplingOptions(**{n: getattr(defaults, n) if getattr(args, n) is None else getattr(args, n)
                                      for n in names})
    elif given:
        raise AiaynError(f"{', '.join(given)} only with --sample (beam search does not sample)")
    values = {"beam": args.beam, "n_best": getattr(args, "n_best", 1), "alpha": getattr(args, "alpha", None),
              "length_penalty_form": getattr(args, "length_penalty_form", None),
              "early_stopping": getattr(args, "early_stopping", None),
              "min_length": getattr(args, "min_length", 0),
              "no_repeat_ngram_size": getattr(args, "no_repeat_ngram_size", 0),
              "return_attention": getattr(args, "alignment", False),
              "batch_size": getattr(args, "batch_size", 64), "max_tokens": getattr(args, "max_tokens", None)}
    if sampling is not None:
        clashes = [_flag(name) for name, value in values.items()
                   if name in BEAM_ONLY and value != getattr(DecodeOptions(), name)]
        if clashes:
            raise AiaynError(f"--sample draws one translation per sentence: drop {', '.join(clashes)}")
    return DecodeOptions(sampling=sampling, **values)


def _flag(name: str) -> str:
    return "--alignment" if name == "return_attention" else f"--{name.replace('_', '-')}"
