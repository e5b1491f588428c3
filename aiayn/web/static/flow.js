// The step view's computation as one flowing line of stages, x -> q, k, v -> q·k ÷ √dₖ -> softmax ->
// Σ softmax·v -> Concat·Wᴼ -> Add & Norm -> FFN -> Add & Norm (-> next token): a click scrolls the step view
// to that stage, and the stage in view is marked as the reader scrolls (the elements carry data-flow).
import {esc} from "./api.js";
import {t} from "./i18n.js";

const STAGES = [["x", () => "x"], ["qkv", () => "q, k, v"], ["score", () => "q·k ÷ √dₖ"], ["softmax", () => "softmax"],
                ["out", () => "Σ softmax · v"], ["concat", () => "Concat · Wᴼ"], ["norm1", () => "Add & Norm"],
                ["ffn", () => "FFN"], ["norm2", () => "Add & Norm"], ["next", () => t("layer.next")]];
let observer = null;  // one step view at a time

export function wireFlow(box) {
  // box: the drawn step of one row (its elements marked data-flow); the line goes before its equations
  if (observer) observer.disconnect();
  // each stage's element, held from here: the panel may be redrawn before a queued observer callback runs,
  // and a fresh query then finds another drawing's elements, or none
  const stage = new Map(STAGES.map(([name]) => [name, box.querySelector(`[data-flow="${name}"]`)]));
  const present = STAGES.filter(([name]) => stage.get(name));
  const anchor = box.querySelector("ol.eq");
  if (!present.length || !anchor) return;
  const nav = document.createElement("nav");
  nav.className = "flow"; nav.dataset.testid = "step-flow"; nav.setAttribute("aria-label", t("flow.label"));
  nav.innerHTML = present.map(([name, label], i) => `${i ? '<span class="arrow" aria-hidden="true">→</span>' : ""}` +
    `<button type="button" data-to="${name}">${esc(label())}</button>`).join("");
  anchor.before(nav);
  const seen = new Map(), mark = name => nav.querySelectorAll("button")
    .forEach(b => b.setAttribute("aria-current", String(name === b.dataset.to)));
  let clicked = 0;  // a click marks its stage; the scroll it causes does not move the mark
  nav.querySelectorAll("button").forEach(b => b.addEventListener("click", () => {
    stage.get(b.dataset.to).scrollIntoView({block: "center"});
    mark(b.dataset.to); clicked = Date.now();
  }));
  observer = new IntersectionObserver(entries => {
    // the stage in view nearest the screen's middle, where the reader's eye is
    for (const e of entries) seen.set(e.target.dataset.flow, e.isIntersecting);
    if (Date.now() - clicked < 500 || !nav.isConnected) return;  // a click's scroll, or a replaced drawing
    const middle = window.innerHeight / 2, distance = name => {
      const r = stage.get(name).getBoundingClientRect();
      return Math.abs((r.top + r.bottom) / 2 - middle);
    };
    const shown = present.map(([name]) => name).filter(name => seen.get(name));
    if (shown.length) mark(shown.reduce((a, b) => (distance(b) < distance(a) ? b : a)));
  }, {threshold: [0, 0.25, 0.5, 0.75, 1]});
  present.forEach(([name]) => observer.observe(stage.get(name)));
}
