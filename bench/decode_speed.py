"""Decoding speed of a trained model on a test set: sentences/s and target tokens/s, beam search with
the KV cache, at several batch sizes; with --ct2, CTranslate2 on the same weights (aiayn export) as the
peer, same beam size, batch sizes and threads. (CTranslate2 normalizes scores by length^alpha, not
GNMT's ((5+|Y|)/6)^alpha, so the two may pick different hypotheses for a few sentences.)

    python bench/decode_speed.py --model runs/multi30k_de_en --pair de-en --data-dir ../shared/data/multi30k \
        [--split test_2016_flickr] [--beam 4] [--batch-sizes 1 64] [--limit N] [--threads 2]
"""

import argparse
import time

import torch

from aiayn.data import multi30k
from aiayn.data.corpus import read_parallel
from aiayn.decoding.translator import Translator


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--pair", default="de-en")
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--data-dir")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 64])
    p.add_argument("--limit", type=int, default=0, help="only the first N sentences (0 = all)")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--ct2", action="store_true", help="also time CTranslate2 with the same weights")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    src_lang, _, tgt_lang = args.pair.partition("-")
    pairs = read_parallel(*multi30k.pair_paths(args.split, src_lang, tgt_lang, args.data_dir))
    sources = [s for s, _ in pairs][: args.limit or None]
    translator = Translator.from_pretrained(args.model)
    translator.translate(sources[:8], beam=args.beam)  # warm-up
    print(f"{translator.model_dir}: {len(sources)} sentences of {args.split} ({args.pair}), beam {args.beam}, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}")
    for batch_size in args.batch_sizes:
        start = time.perf_counter()
        results = translator.translate(sources, beam=args.beam, batch_size=batch_size)
        seconds = time.perf_counter() - start
        tokens = sum(len(r.tokens) + 1 for r in results)  # + </s>
        print(f"aiayn        batch {batch_size:3d}: {len(sources) / seconds:7.1f} sentences/s  "
              f"{tokens / seconds:8.0f} target tokens/s  ({seconds:.1f} s)")
        if args.ct2:
            ct2_run(translator, sources, args, batch_size)


def ct2_run(translator, sources, args, batch_size):
    import tempfile

    import ctranslate2

    from aiayn.decoding.translate_batch import encode_sources
    from aiayn.export import to_ctranslate2

    if not hasattr(ct2_run, "model"):
        ct2_run.model = to_ctranslate2(translator.model_dir, tempfile.mkdtemp(prefix="aiayn-ct2-"))
    tok = translator.tokenizer
    ct = ctranslate2.Translator(str(ct2_run.model), device="cpu", intra_threads=torch.get_num_threads())
    pieces = [tok.id_to_piece(s) for s in encode_sources(tok, sources)]
    cfg = translator.decode_cfg
    ct.translate_batch(pieces[:8], beam_size=args.beam)  # warm-up
    start = time.perf_counter()
    limit = int(max(map(len, pieces)) * cfg.max_len_a + cfg.max_len_b)
    results = ct.translate_batch(pieces, beam_size=args.beam, max_batch_size=batch_size,
                                 length_penalty=cfg.length_penalty, max_decoding_length=limit,
                                 suppress_sequences=[["<pad>"], ["<s>"]])  # as aiayn (never outputs them)
    seconds = time.perf_counter() - start
    tokens = sum(len(r.hypotheses[0]) + 1 for r in results)
    print(f"CTranslate2  batch {batch_size:3d}: {len(sources) / seconds:7.1f} sentences/s  "
          f"{tokens / seconds:8.0f} target tokens/s  ({seconds:.1f} s)")


if __name__ == "__main__":
    main()
