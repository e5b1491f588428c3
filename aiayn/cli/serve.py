"""The serve command: the web page and the JSON API. Wiring only."""

from aiayn.cli.common import COMPILE_HELP, COMPUTE_HELP, MODEL_HELP


def _port(text: str) -> int:
    import argparse

    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535)")
    return int(text)


def add_parsers(sub) -> None:
    p = sub.add_parser("serve", help="web page and JSON API (needs aiayn[web])")
    p.add_argument("--model", required=True, help=MODEL_HELP)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, local connections "
                   "only)")
    p.add_argument("--port", type=_port, default=8000, help="port, 1-65535 (default: 8000)")
    p.add_argument("--threads", type=int, default=1, help="torch threads for decoding; 0 = torch's default, one "
                   "per core (default: 1, which leaves a core to the server: BENCHMARKS.md measured 2.5x the "
                   "requests per second on 2 cores; --engine ct2 decodes on 1 CTranslate2 thread whatever this says)")
    p.add_argument("--engine", default="native",
                   help="native: the page, attention maps and the JSON API; ct2: CTranslate2 (an export cached in "
                        "MODEL/ct2/, needs aiayn[export]) for the plain JSON API only (/api/translate with "
                        "\"attention\": false, /api/translate_batch): no page, no maps (default: native)")
    p.add_argument("--compute-type", default=None, help=COMPUTE_HELP)
    p.add_argument("--workers", type=int, default=1, help="worker processes of one torch thread (forked on Linux: "
                   "they share the model's memory), each decoding a batch of concurrent plain requests of its own; "
                   "attention maps and sampling stay in the server's process; with --engine ct2, CTranslate2's "
                   "inter_threads (default: 1, the server's process alone)")
    p.add_argument("--compile", action="store_true", help=COMPILE_HELP)
    p.add_argument("--alignment-head", metavar="L:H", help="the cross-attention the page's word-alignment overlay "
                   "comes from, as translate's --alignment-head: L:H (decoder layer L, head H, counted from 1), L:mean "
                   "(layer L's mean over heads), best (the best head on the built-in task's gold, for a model trained "
                   "on it) or a file of `aiayn heads --json` (its best head) (default: the last layer's mean, as "
                   "translate --alignment)")
    p.add_argument("--max-client-connections", type=int, default=None, help="connections one client address may "
                   "hold at once; 0 for no cap, e.g. behind a reverse proxy, where every client has the proxy's "
                   "address (default: 64)")


def cmd_serve(args) -> int:
    from aiayn.errors import AiaynError

    try:
        from aiayn.web.app import create_app
        from aiayn.web.server import MAX_CLIENT_CONNECTIONS, ConnectionLimits, guarded_server
    except ImportError as err:
        raise AiaynError(f"aiayn serve needs the web extra: pip install 'aiayn[web]' ({err})") from err
    import torch

    from aiayn.decoding.translator import Translator

    if not 0 <= args.threads <= 1024:
        raise AiaynError(f"--threads {args.threads}: give 0 (torch's default) or 1 to 1024")
    per_client = MAX_CLIENT_CONNECTIONS if args.max_client_connections is None else args.max_client_connections
    if per_client < 0:
        raise AiaynError(f"--max-client-connections {per_client}: give 0 (no cap) or more")
    if args.alignment_head:  # against the model's config before the model loads (or compiles)
        from aiayn.cli.common import model_configs
        from aiayn.cli.heads import check_alignment_head

        check_alignment_head(args, model_configs([args.model])[0])
    if args.threads:
        torch.set_num_threads(args.threads)
    translator = Translator.from_pretrained(args.model, engine=args.engine, compute_type=args.compute_type,
                                            workers=args.workers, compile=args.compile)
    server = guarded_server(create_app(translator, alignment=args.alignment_head), host=args.host, port=args.port,
                            limits=ConnectionLimits(per_client=per_client))
    server.run()
    return 0 if server.started else 1  # why not: uvicorn's error line above (e.g. the port is in use)


COMMANDS = {"serve": cmd_serve}
