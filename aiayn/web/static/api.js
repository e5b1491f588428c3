// Requests to the server (on the static explorer, to the model in the browser: static_mode.js), with every
// failure turned into a sentence a person can read: the server's coded error in the page's language (its
// English message when the page has no words for the code), a summary of a validation error (never echoing
// the input), or a word about the network.
import {has, t} from "./i18n.js";
import {staticApi, staticConfig} from "./static_mode.js";

export class ApiError extends Error {}

function readableError(status, payload) {
  if (payload && typeof payload.code === "string" && has("err." + payload.code)) {
    return t("err." + payload.code, payload.params || {});
  }
  if (payload && typeof payload.error === "string") return payload.error;
  if (status === 422 && payload && Array.isArray(payload.detail)) {
    return payload.detail.map(d => {
      const where = Array.isArray(d.loc) ? d.loc.filter(p => p !== "body").join(".") : "";
      return (where ? where + ": " : "") + String(d.msg || "invalid value");
    }).join("; ");
  }
  return t("err.status", {status});
}

export async function api(path, body) {
  if (staticConfig()) {  // the static explorer: no server, the model runs in the browser (static_mode.js)
    try { return await staticApi(path, body); } catch (e) { throw new ApiError(e.message); }
  }
  let response;
  try {
    response = await fetch(path, body === undefined ? {} : {
      method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
  } catch {
    throw new ApiError(t("err.network"));
  }
  let payload = null;
  try { payload = await response.json(); } catch { payload = null; }
  if (!response.ok) throw new ApiError(readableError(response.status, payload));
  if (payload === null) throw new ApiError(t("err.json"));
  return payload;
}

// --- tokens: SentencePiece pieces shown without "▁"; words come from the server (word_groups) ---
const SPECIAL = new Set(["<s>", "</s>", "<pad>", "<unk>"]);

export function showPiece(piece) {
  if (SPECIAL.has(piece)) return piece;
  if (piece.startsWith("▁")) return piece.slice(1) || "␣";
  return "·" + piece;  // continues the word before it
}

export function esc(text) { const d = document.createElement("div"); d.textContent = text; return d.innerHTML; }

export function fmt(x, digits = 3) { return x === null || x === undefined ? "−∞" : Number(x).toFixed(digits); }
