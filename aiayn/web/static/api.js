"use strict";
// Requests to the server, with every failure turned into a sentence a person can read: the server's
// own {"error": ...} message, a summary of a validation error (never echoing the input), or a word
// about the network.

class ApiError extends Error {}

function readableError(status, payload) {
  if (payload && typeof payload.error === "string") return payload.error;
  if (status === 422 && payload && Array.isArray(payload.detail)) {
    return payload.detail.map(d => {
      const where = Array.isArray(d.loc) ? d.loc.filter(p => p !== "body").join(".") : "";
      return (where ? where + ": " : "") + String(d.msg || "invalid value");
    }).join("; ");
  }
  return t("err.status", {status});
}

async function api(path, body) {
  let response;
  try {
    response = await fetch(path, body === undefined ? {} : {
      method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
  } catch (e) {
    throw new ApiError(t("err.network"));
  }
  let payload = null;
  try { payload = await response.json(); } catch (e) { payload = null; }
  if (!response.ok) throw new ApiError(readableError(response.status, payload));
  if (payload === null) throw new ApiError(t("err.json"));
  return payload;
}

// --- tokens: SentencePiece pieces shown without "▁", words merged as the CLI's --merge-words does ---
const SPECIAL = new Set(["<s>", "</s>", "<pad>", "<unk>"]);

function showPiece(piece) {
  if (SPECIAL.has(piece)) return piece;
  if (piece.startsWith("▁")) return piece.slice(1) || "␣";
  return "·" + piece;  // continues the word before it
}

function wordGroups(tokens) {
  // as aiayn.inspect.capture.word_groups: [words, piece indices of each word]
  const words = [], groups = [];
  tokens.forEach((piece, i) => {
    const special = SPECIAL.has(piece);
    const last = words[words.length - 1];
    if (!groups.length || piece.startsWith("▁") || special || ["<s>", "</s>", "<pad>"].includes(last)) {
      words.push(special ? piece : piece.replace(/^▁/, "")); groups.push([i]);
    } else { words[words.length - 1] += piece; groups[groups.length - 1].push(i); }
  });
  return [words, groups];
}

function esc(text) { const d = document.createElement("div"); d.textContent = text; return d.innerHTML; }
function fmt(x, digits = 3) { return x === null || x === undefined ? "−∞" : Number(x).toFixed(digits); }
