// The page's address restores a view: the sentence, the target (teacher forcing), the beam, the kind,
// layer, head and query row (1-based, as the page shows them: q=2 is "row 2"), the word view, the
// word-alignment overlay, the measure the maps show (measure=contributions), a post-edit's prefix (the start
// of the translation a click on an alternative fixed), the page's language (lang=ko) and the open part of the
// Transformer's map (open=pe or open=ffn); the hash names the panel in view (#search-panel) and is kept.
import {lang} from "./i18n.js";

export function readUrl() {
  const p = new URLSearchParams(window.location.search);
  const int = (name, base = 0) => (p.has(name) && /^\d+$/.test(p.get(name)) && Number(p.get(name)) >= base
    ? Number(p.get(name)) - base : null);
  const index = name => (p.get(name) === "mean" ? "mean" : int(name, 1));
  return {text: p.get("text") || "", target: p.get("target") || "", beam: int("beam"), kind: p.get("kind"),
          layer: index("layer"), head: index("head"), query: int("q", 1), words: p.get("words") === "1",
          align: p.get("align") === "1", prefix: p.get("prefix") || "", lang: p.get("lang"), open: p.get("open"),
          measure: p.get("measure") === "contributions" ? "contributions" : "weights"};
}

export function writeUrl(S, text, target) {
  // no maps up: only the language changes (a sentence that failed to translate stays in the address)
  const p = S.data ? sentenceParams(S, text, target) : new URLSearchParams(text ? window.location.search : "");
  p.set("lang", lang());
  const model = new URLSearchParams(window.location.search).get("model");  // a static site's choice, kept
  if (model !== null) p.set("model", model);
  if (S.data && S.open) p.set("open", S.open);
  const url = `${window.location.pathname}?${p.toString()}${window.location.hash}`;
  if (url !== window.location.pathname + window.location.search + window.location.hash) {
    window.history.replaceState(null, "", url);
  }
}

function sentenceParams(S, text, target) {
  const p = new URLSearchParams();
  p.set("text", text);
  if (target) p.set("target", target);
  else if (S.prefix) p.set("prefix", S.prefix);
  if (S.beam) p.set("beam", String(S.beam));
  p.set("kind", S.kind);
  const one = v => (v === "mean" ? "mean" : String(Number(v) + 1));
  p.set("layer", one(S.layer)); p.set("head", one(S.head));
  if (S.words) p.set("words", "1");
  if (S.align) p.set("align", "1");
  if (S.measure === "contributions") p.set("measure", "contributions");
  if (S.query !== null) p.set("q", String(S.query + 1));
  return p;
}
