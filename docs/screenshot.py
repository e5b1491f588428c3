"""Screenshot of the web page for a given model (how docs/img/web_page.png was made).

    python docs/screenshot.py --model runs/demo/average --text "forty five thousand six hundred twenty one" \
        --kind cross --layer 1 --head 1 --query 2 --out docs/img/web_page.png

Layers and heads count from 1, as the page shows them (or "mean"); the query row counts from 0.
"""

import argparse


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--text", required=True)
    p.add_argument("--kind", default="cross")
    p.add_argument("--layer", default="mean", help="a layer number from 1, or mean")
    p.add_argument("--head", default="1", help="a head number from 1: the step view shows one head")
    p.add_argument("--query", type=int, default=0, help="query row (from 0) to hover and open step by step")
    p.add_argument("--out", required=True)
    args = p.parse_args()

    from playwright.sync_api import sync_playwright
    from screenshots import served  # docs/screenshots.py: the page for a model on a free local port

    with served(args.model) as address, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(address)
        page.fill("#text", args.text)
        page.click("#translate")
        page.wait_for_selector("#heatmap td.cell")
        page.select_option("#kind", args.kind)
        page.select_option("#layer", args.layer)
        page.select_option("#head", args.head)
        page.hover(f"#heatmap th.query >> nth={args.query}")
        page.click(f"#heatmap th.query >> nth={args.query}")
        page.wait_for_selector("#step-table")
        page.mouse.move(0, 0)
        page.evaluate("document.getElementById('matrix-panel').scrollIntoView()")  # matrix beside the step view
        page.screenshot(path=args.out)
        browser.close()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
