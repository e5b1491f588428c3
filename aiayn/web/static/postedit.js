// Post-editing: a click (or tap, or Enter) on a token of the shown translation lists the model's top-k next
// tokens at that position (POST /api/alternatives: p(y_t | y_<t, x), computed on the server); picking one
// re-decodes the rest after it, with the text of the pieces up to it as the target prefix (the server offers
// only the picks whose text encodes back to the same pieces). The state stays in app.js (S); this module
// draws and asks.
import {api, esc, showPiece} from "./api.js";
import {t} from "./i18n.js";

const $ = id => document.getElementById(id);
const K = 10;

// the tokens of the translation answer become buttons (once per render), unless the target was given
export function decoratePostedit(S) {
  $("alternatives").replaceChildren();
  $("alternatives").hidden = true;
  const editable = S.data && !S.data.teacher_forced;
  document.querySelectorAll("#token-probs .tp").forEach((span, i) => {
    if (!editable) return;
    span.dataset.t = String(i);
    span.tabIndex = i === 0 ? 0 : -1;  // one tab stop for the row; the arrow keys move along it
    span.setAttribute("role", "button");
    span.setAttribute("aria-label", t("postedit.token", {token: showPiece(S.data.target_tokens[i])}));
  });
  $("postedit-hint").hidden = !editable;
  $("prefix-note").hidden = !S.prefix;
  $("prefix-text").textContent = S.prefix || "";
}

async function showAlternatives(S, position, pick) {
  const box = $("alternatives"), gen = S.gen;
  box.hidden = false;
  box.textContent = t("computing");
  try {
    const found = await api("/api/alternatives", {source_ids: S.data.source_ids,
      target_input_ids: S.data.target_input_ids.slice(0, position + 1), k: K});
    if (gen !== S.gen) return;
    const title = document.createElement("p");
    title.className = "caption";
    title.textContent = t("postedit.title", {n: position + 1, token: showPiece(S.data.target_tokens[position])});
    const list = document.createElement("ol");
    list.className = "alts";
    for (const alt of found.alternatives) list.appendChild(altItem(S, alt, position, pick));
    box.replaceChildren(title, list);
  } catch (e) {
    if (gen === S.gen) box.textContent = e.message;
  }
}

function altItem(S, alt, position, pick) {
  const li = document.createElement("li"), b = document.createElement("button");
  b.type = "button"; b.className = "alt"; b.dataset.prob = String(alt.prob); b.dataset.id = String(alt.id);
  b.dataset.prefix = alt.prefix;
  b.innerHTML = `${esc(showPiece(alt.piece))} <small>${(100 * alt.prob).toFixed(2)}%</small>`;
  if (alt.piece === S.data.target_tokens[position]) b.classList.add("current");
  b.disabled = !alt.pickable;
  b.title = alt.pickable ? t("postedit.pick", {prefix: alt.prefix})
    : t(alt.piece === "</s>" ? "postedit.end" : "postedit.not_exact");
  b.addEventListener("click", () => pick(alt.prefix));
  li.appendChild(b);
  return li;
}

// roving focus: the focused token holds the row's one tab stop
function moveAlong(e) {
  const span = e.target.closest("#token-probs .tp[data-t]");
  if (!span) return;
  const tokens = [...document.querySelectorAll("#token-probs .tp[data-t]")];
  const next = tokens[Number(span.dataset.t) + (e.key === "ArrowRight" ? 1 : -1)];
  if (!next) return;
  e.preventDefault();
  span.tabIndex = -1;
  next.tabIndex = 0;
  next.focus();
}

export function wirePostedit(S, pick) {
  const open = e => {
    const span = e.target.closest("#token-probs .tp[data-t]");
    if (span && S.data) showAlternatives(S, Number(span.dataset.t), pick);
  };
  $("token-probs").addEventListener("click", open);
  $("token-probs").addEventListener("keydown", e => {
    if (e.key === "Enter" || e.key === " ") { e.preventDefault(); open(e); }
    if (e.key === "ArrowRight" || e.key === "ArrowLeft") moveAlong(e);
  });
  $("prefix-clear").addEventListener("click", () => pick(""));
}
