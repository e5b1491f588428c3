// One-click lessons for the coreference model (configs/coreference.yaml): the posts' "it -> animal" and
// "it -> street", each a sentence, the pronoun (query word) and its referent (key word) in the encoder's
// self-attention. A click translates the sentence, ranks every encoder head by that weight (the head
// search's own ranking) and opens the best; the note says what one sentence's ranking does and does not show.
import {esc} from "./api.js";
import {t} from "./i18n.js";

export const LESSONS = [
  {name: "exp.it_animal", sentence: "The animal didn't cross the street because it was too tired.",
   query: "it", key: "animal"},
  {name: "exp.wide_street", sentence: "The animal didn't cross the street because it was too wide.",
   query: "it", key: "street"},
];

export function renderLessons(box, info, onLesson) {
  // only a model trained on the coreference task knows these sentences' words
  box.hidden = info.dataset !== "coreference";
  if (box.hidden) { box.replaceChildren(); return; }
  box.innerHTML = `<span>${esc(t("exp.title"))}</span>` + LESSONS.map((lesson, i) =>
    `<button type="button" class="example lesson" data-testid="experiment" data-lesson="${i}">` +
    `${esc(t(lesson.name))}</button>`).join("");
  box.querySelectorAll("button.lesson")
    .forEach(b => b.addEventListener("click", () => onLesson(LESSONS[b.dataset.lesson])));
}

export function wordIndex(labels, word) {
  // the first row or column whose word is `word` (case and surrounding punctuation ignored), or -1
  const plain = s => s.toLowerCase().replace(/^[\p{P}\s]+|[\p{P}\s]+$/gu, "");
  return labels.findIndex(label => plain(label) === word);
}
