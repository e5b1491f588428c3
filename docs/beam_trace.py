"""The beam search trace as a picture (how docs/img/beam_trace.png was made):

    python docs/beam_trace.py --model runs/de_en --text "Ein Mann fährt Fahrrad." --beam 4 \
        --out docs/img/beam_trace.png

It decodes one sentence with Translator.trace and draws every step's candidates with
aiayn.inspect.maps.charts.draw_beam_trace (needs matplotlib: pip install 'aiayn[viz]').
"""

import argparse


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--text", required=True)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)

    from aiayn.decoding.translator import Translator
    from aiayn.inspect.maps.charts import draw_beam_trace

    translator = Translator.from_pretrained(args.model)
    trace = translator.trace(args.text, beam=args.beam, n_best=args.beam)
    draw_beam_trace(trace, args.out, title=f"source: {args.text}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
