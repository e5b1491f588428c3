"""translate's --trace: each sentence's beam search step by step (Translator.trace, aiayn.decoding.beam_trace),
as a table on stderr beside the translations on stdout, or as JSON lines in a file. Wiring and printing only."""

import json
import sys

STATUS_MARK = {"finished": "✓ finished", "finished_at_limit": "✓ at limit", "kept": "  kept", "pruned": "  pruned",
               "dropped": "  dropped"}


def add_trace(p) -> None:
    p.add_argument("--trace", nargs="?", const="-", metavar="FILE", help="also show each sentence's beam search "
                   "step by step: every candidate with its log-prob, normalised score and what became of it (kept, "
                   "pruned, finished, dropped); a table on stderr, or JSON lines written to FILE (one object per "
                   "input line: line, source, trace). Searches each sentence once more, in this process, with the "
                   "native engine (default: off)")


def check_trace(args, engine) -> None:
    """--trace against the other flags and --engine, before a model is loaded."""
    from aiayn.errors import AiaynError
    from aiayn.io import check_output_file

    if args.trace is None:
        return
    if args.sample:
        raise AiaynError("--trace shows a beam search and --sample draws one translation: drop one of them")
    if not engine.traces:
        raise AiaynError(f"--trace shows aiayn's own beam search; the {args.engine} engine's is not shown: use "
                         f"--engine native")
    if args.trace != "-":
        check_output_file(args.trace, inputs=[args.input, args.target_prefix, args.constraints],
                          model_dirs=args.model)


def trace_table(trace, source: str) -> str:
    """One sentence's trace as text: a block per step, its candidates best first within their status."""
    out = [f"source: {source}",
           f"beam {trace.beam}, n-best {trace.n_best}, length penalty {trace.length_penalty_form} "
           f"alpha {trace.alpha:g}; score = log-prob / lp(|Y|)",
           f"  {'status':<12} {'log-prob':>8} {'score':>8}  hypothesis"]
    for step in trace.steps:
        done = f"  -> search ends ({step.done.replace('_', ' ')})" if step.done else ""
        out.append(f"step {step.step + 1}  lp {step.length_penalty:.3f}{done}")
        for c in step.candidates:
            out.append(f"  {STATUS_MARK[c.status]:<12} {c.log_prob:8.3f} {c.score:8.3f}  {c.text or ''}"
                       f"{' </s>' if c.status in ('finished', 'dropped') else ''}")
    best = trace.replay()
    out.append("n-best: " + " | ".join(f"{c.text} ({c.score:.3f})" for c in best))
    return "\n".join(out)


class TraceWriter:
    """Traces the lines as translate decodes them: each table to stderr at once, or JSON lines kept and
    written to the file at the end (atomically, like --output)."""

    def __init__(self, *, args, translator, options):
        self.args, self.translator, self.options = args, translator, options
        self.records: list[str] = []

    def add(self, lines: list[str], first_line: int, prefixes, constraints) -> None:
        for number, line in enumerate(lines, start=first_line):
            if not line.strip():
                continue  # a blank line translates to a blank line; it has no search to show
            trace = self.translator.trace(line, self.options,
                                          target_prefix=None if prefixes is None else prefixes[number] or None,
                                          constraints=None if constraints is None else constraints[number])
            if self.args.trace == "-":
                print(trace_table(trace, line) + "\n", file=sys.stderr, flush=True)
            else:
                self.records.append(json.dumps({"line": number + 1, "source": line, "trace": trace.to_dict()},
                                               ensure_ascii=False))

    def close(self) -> None:
        if self.args.trace not in (None, "-"):
            from aiayn.io import write_output_file

            write_output_file(self.args.trace, "".join(r + "\n" for r in self.records),
                              inputs=[self.args.input, self.args.target_prefix, self.args.constraints],
                              model_dirs=[*self.args.model, self.translator.model_dir])
