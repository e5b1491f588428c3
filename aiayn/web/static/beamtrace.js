// The beam search of the current sentence, one step at a time (POST /api/translate with "trace": true;
// aiayn.decoding.beam_trace). The panel is closed until opened, and asks for the trace only then: a trace is
// one more search on the server, which most readers of the maps do not need. Each step lists its candidates
// (a kept hypothesis extended by one token) with their log-prob, score and what became of them; under the
// steps, the finished hypotheses ranked as the search ranks them (BeamTrace.replay), the first being the
// translation. The page's state stays in app.js (S); this module keeps only the trace it was answered.
import {api, esc, fmt, showPiece} from "./api.js";
import {t} from "./i18n.js";

const $ = id => document.getElementById(id);

export function createBeamTrace(S) {
  const own = {key: null, trace: null, error: "", step: 0};

  function request() {
    // the model's own search of the sentence (with a post-edit's prefix): a given target is not searched
    const body = {text: S.text, beam: S.beam, attention: false, trace: true};
    return S.prefix ? {...body, target_prefix: S.prefix} : body;
  }

  async function load() {
    const gen = S.gen, key = JSON.stringify(request());
    if (own.key === key) return draw();
    Object.assign(own, {key, trace: null, error: "", step: 0});
    $("beam-body").textContent = t("computing");
    try {
      const answer = await api("/api/translate", JSON.parse(key));
      if (gen !== S.gen || own.key !== key) return;
      own.trace = answer.trace;
    } catch (e) {
      if (gen !== S.gen || own.key !== key) return;
      own.error = e.message;  // one line: the trace is an extra, the maps stay up
    }
    draw();
  }

  function draw() {
    const body = $("beam-body");
    if (own.error) { body.replaceChildren(line("p", "note", own.error)); return; }
    if (!own.trace) return;
    const trace = own.trace, last = trace.steps.length - 1;
    own.step = Math.min(own.step, last);
    const forced = Boolean(S.data && S.data.teacher_forced);
    body.replaceChildren(intro(trace), stepper(last), stepTable(trace.steps[own.step], trace.beam),
                         finishedList(trace, forced));
    if (forced) body.prepend(line("p", "note", t("beam.forced")));
  }

  function stepper(last) {
    const row = document.createElement("div"), range = document.createElement("input");
    row.className = "row beam-steps";
    const move = to => { own.step = Math.max(0, Math.min(last, to)); draw(); $("beam-range")?.focus(); };
    const button = (text, label, to) => {
      const b = document.createElement("button");
      b.type = "button"; b.textContent = text; b.setAttribute("aria-label", label); b.disabled = to < 0 || to > last;
      b.addEventListener("click", () => move(to));
      return b;
    };
    Object.assign(range, {type: "range", id: "beam-range", min: "0", max: String(last), value: String(own.step)});
    range.setAttribute("aria-label", t("beam.slider"));
    range.addEventListener("input", () => move(Number(range.value)));
    row.append(button("◀", t("beam.prev"), own.step - 1), range, button("▶", t("beam.next"), own.step + 1),
               line("span", "caption", t("beam.step_of", {n: own.step + 1, of: last + 1})));
    return row;
  }

  return {
    open: () => { if ($("beam-panel").open && S.data) load(); },  // the panel opened, or a new sentence
    clear: () => { Object.assign(own, {key: null, trace: null, error: ""}); $("beam-body").replaceChildren(); },
    relabel: draw,
  };
}

function line(tag, cls, text) {
  const el = document.createElement(tag);
  el.className = cls; el.textContent = text;
  return el;
}

function intro(trace) {
  const last = trace.steps[trace.steps.length - 1];
  const form = trace.length_penalty_form === "hf" ? "beam.lp_hf" : "beam.lp_gnmt";
  const ended = last.done ? t("beam.ended", {n: trace.steps.length, why: whyEnded(trace, last.done)})
    : "";  // every search's last step says why it ended; nothing is said of one that did not
  return line("p", "explain", [t("beam.explain", {k: trace.beam}), t("beam.listed", {"2k": 2 * trace.beam}),
                               t(form, {alpha: trace.alpha}), ended].join(" "));
}

// why a search ended "finished" (aiayn.decoding.beam): with early stopping, as soon as K hypotheses had
// finished; without it (the default), once at least K had and no live one, ended now, could beat the K-th best
export function whyEnded(trace, done) {
  if (done !== "finished") return t("beam.done." + done);
  const n = trace.ranked.length, k = trace.beam;  // every finished hypothesis
  const key = (trace.early_stopping ? "beam.done.early" : "beam.done.finished") + (k === 1 ? "_one" : "");
  return t(key, {n, k, kth: ordinal(k)});
}

function ordinal(k) {
  // 1st, 2nd, 3rd, 4th, 11th, 22nd: the English ordinal (the Korean text says "{k}등")
  const suffix = {one: "st", two: "nd", few: "rd", other: "th"};
  return k + suffix[new Intl.PluralRules("en", {type: "ordinal"}).select(k)];
}

function stepTable(step, beam) {
  const box = document.createElement("div"), table = document.createElement("table");
  box.className = "table-box";
  table.className = "step beam-table"; table.dataset.step = String(step.step);
  // on the step where the search ends nothing goes on: its caption says so
  const caption = t(step.done ? "beam.caption_end" : "beam.caption", {n: step.step + 1, lp: fmt(step.length_penalty),
                                                                       k: beam});
  table.innerHTML = `<caption>${esc(caption)}</caption><thead><tr><th>${esc(t("beam.status"))}</th>` +
    `<th class="hyp-col">${esc(t("beam.hypothesis"))}</th><th>${esc(t("beam.token"))}</th>` +
    `<th>log P</th><th>${esc(t("beam.score"))}</th></tr></thead>`;
  const rows = document.createElement("tbody");
  for (const c of step.candidates) rows.appendChild(candidateRow(c, Boolean(step.done)));
  table.appendChild(rows);
  box.appendChild(table);
  return box;
}

function candidateRow(c, last) {
  // a finished (or dropped) candidate's new token is </s>, which its tokens leave out. On the last step the
  // live candidates (the trace's "pruned", the K best among them too) neither go on nor finish: the search
  // ended there (at the length limit the K best finish as they are: "finished_at_limit")
  const tr = document.createElement("tr"), ended = c.status === "finished" || c.status === "dropped";
  const shown = last && c.status === "pruned" ? "ended" : c.status;
  tr.className = "beam-" + shown;
  Object.assign(tr.dataset, {status: c.status, shown, text: c.text, logProb: String(c.log_prob),
                             score: String(c.score)});
  const token = ended ? "</s>" : showPiece(c.pieces[c.pieces.length - 1] ?? "");
  // data-label: the column's name, written before the cell where a phone stacks the row (style.css)
  tr.innerHTML = `<td class="status">${esc(t("beam.s." + shown))}</td><td class="hyp-col">${esc(c.text)}</td>` +
    `<td class="tok" data-label="${esc(t("beam.token"))}"><mark>${esc(token)}</mark></td>` +
    `<td class="lp" data-label="log P">${fmt(c.log_prob)}</td>` +
    `<td class="sc" data-label="${esc(t("beam.score"))}">${fmt(c.score)}</td>`;
  return tr;
}

// every finished hypothesis in the search's own n-best order: the answer's "ranked" holds each one's
// [step, index] (aiayn.decoding.beam_trace.BeamTrace.ranked)
export function replay(trace) {
  return trace.ranked.map(([step, i]) => trace.steps[step].candidates[i]);
}

function finishedList(trace, forced) {
  // with a target given, the translation shown is that target: the first here is the model's own
  const box = document.createElement("div"), list = document.createElement("ol"), ranked = replay(trace);
  box.appendChild(line("p", "caption", t("beam.finished", {n: ranked.length})));
  list.className = "beam-finished";
  ranked.forEach((c, i) => {
    const li = line("li", i === 0 ? "best" : "", t("beam.item", {text: c.text, score: fmt(c.score)}));
    li.dataset.text = c.text;
    if (i === 0) {
      li.dataset.testid = "beam-best";
      li.append(" ", line("strong", "", t(forced ? "beam.best_forced" : "beam.best")));
    }
    list.appendChild(li);
  });
  box.appendChild(list);
  return box;
}
