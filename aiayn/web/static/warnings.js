// The server's warnings about the input and the output (codes and numbers) in the page's language; a
// diagnostic signal's warning brings its English words, for a language that has none of its own.
import {languageName, t} from "./i18n.js";

export function warningText(warnings, info) {
  return (warnings || []).map(w => t("warn." + w.code, {
    ...w, lang: w.lang ? languageName(w.lang) : "", src: info && info.src_lang ? languageName(info.src_lang) : "",
    data: (info && info.dataset) || t("f.unknown"), max: info ? info.max_source_tokens : ""},
  w.words)).join(" ");
}
