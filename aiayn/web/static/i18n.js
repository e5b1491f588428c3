// The page's own words in English and Korean (for readers of the Korean posts on attention, in their
// terms). The model's languages are not affected. t(key, {name: value}) fills {name}; applyLanguage()
// rewrites every [data-i18n] element. The language is this module's one piece of state.
import {TEXT_EN} from "./i18n_en.js";
import {TEXT_KO} from "./i18n_ko.js";

export const TEXT = {en: TEXT_EN, ko: TEXT_KO};
const current = {lang: localStorage.getItem("aiayn-lang") === "ko" ? "ko" : "en"};

export function lang() { return current.lang; }

// fallback: the server's own English for a key the page has no words for (a diagnostic signal's warning)
export function t(key, vars = {}, fallback = key) {
  const text = TEXT[current.lang][key] ?? TEXT.en[key] ?? fallback;
  return text.replace(/\{(\w+)\}/g, (_, name) => String(vars[name] ?? ""));
}

export function has(key) { return key in TEXT.en; }

export function applyLanguage() {
  document.documentElement.lang = current.lang;
  document.title = t("title");
  for (const el of document.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
  for (const el of document.querySelectorAll("[data-i18n-placeholder]")) {
    el.placeholder = t(el.dataset.i18nPlaceholder);
  }
  for (const el of document.querySelectorAll("[data-i18n-label]")) {
    el.setAttribute("aria-label", t(el.dataset.i18nLabel));
  }
}

export function setLanguage(name) {
  current.lang = name === "ko" ? "ko" : "en";
  localStorage.setItem("aiayn-lang", current.lang);
  applyLanguage();
}

export function toggleLanguage() { setLanguage(current.lang === "en" ? "ko" : "en"); }

// the model's languages, in the page's language
export function languageName(code) { return t("lang." + code) === "lang." + code ? code : t("lang." + code); }

// 1-based layer and head numbers wherever the user reads them
export function nth(index) { return index === "mean" ? t("mean") : String(Number(index) + 1); }

// "layer 2" / "2층": the word order is the language's
export function layerName(index) { return index === "mean" ? t("layer.mean") : t("layer.n", {n: nth(index)}); }
