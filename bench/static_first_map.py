"""The static explorer's first map: a built docs site served by a plain file server, opened in Chromium with
an empty cache (a new browser context each round) at the demo's "forty five", timed from navigation to the
first cell of the attention matrix; then the same page again in the same context (cached). Also the site's
size. Needs the site (`make docs`) and Playwright with a Chromium.

    python bench/static_first_map.py --site site --rounds 5
"""

import argparse
import functools
import http.server
import shutil
import statistics
import threading
import time
from pathlib import Path

QUERY = "explorer/?model=demo&text=forty+five&lang=en"


def site_bytes(site: Path) -> int:
    return sum(p.stat().st_size for p in site.rglob("*") if p.is_file())


def serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def first_map_ms(context, url: str) -> float:
    page = context.new_page()
    start = time.perf_counter()
    page.goto(url)
    page.wait_for_selector("#heatmap td.cell", timeout=120000)
    elapsed = (time.perf_counter() - start) * 1000
    page.close()
    return elapsed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--site", default="site", help="the built site (make docs)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    args = p.parse_args()
    from playwright.sync_api import sync_playwright

    site = Path(args.site)
    explorers = {name: site_bytes(site / name) for name in ("explorer", "ko/explorer") if (site / name).is_dir()}
    print(f"site {site_bytes(site) / 1e6:.1f} MB; " + ", ".join(f"{n}/ {b / 1e6:.1f} MB" for n, b in explorers.items()))
    server, root = serve(site)
    cold, warm = [], []
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, args=["--headless", "--no-sandbox",
                                                                              "--disable-gpu"])
            for _ in range(args.rounds):
                context = browser.new_context(viewport={"width": 1280, "height": 800})
                cold.append(first_map_ms(context, root + QUERY))
                warm.append(first_map_ms(context, root + QUERY))
                context.close()
            browser.close()
    finally:
        server.shutdown()
    for name, values in (("empty cache", cold), ("cached", warm)):
        print(f"first map, {name}: median {statistics.median(values):.0f} ms [{min(values):.0f}-{max(values):.0f}] "
              f"over {len(values)} loads")


if __name__ == "__main__":
    main()
