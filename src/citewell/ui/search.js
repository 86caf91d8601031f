// The search tab: ranked passages, without an answer written from them. Each shows where it is
// (file and page), its score, and its text with its best sentence marked.

import { request } from "./api.js";
import { element, reflowed } from "./dom.js";
import { plural, utf16Indices } from "./text.js";

const MAX_RESULTS = 10;

export class SearchTab {
  /** `scope()` names the bucket to search ("" for none chosen). */
  constructor(root, scope) {
    this.scope = scope;
    this.query = root.querySelector("#query");
    this.status = root.querySelector("#search-status");
    this.error = root.querySelector("#search-error");
    this.results = root.querySelector("#results");
    root.querySelector("#search-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.run(this.query.value.trim());
    });
  }

  clear() {
    this.results.replaceChildren();
    this.status.textContent = "";
    this.error.hidden = true;
  }

  async run(query) {
    this.clear();
    if (!query) return;
    const bucket = this.scope();
    if (!bucket) return this.fail("Create a bucket and add documents to it before searching.");
    this.status.textContent = "Searching…";
    try {
      const body = { query, buckets: [bucket], max_results: MAX_RESULTS };
      const { data } = await request("v1/search", { method: "POST", body });
      this.results.replaceChildren(...data.map(resultItem));
      this.status.textContent = data.length
        ? `${plural(data.length, "passage")}, best first.`
        : "No passage matches.";
    } catch (error) {
      this.status.textContent = "";
      this.fail(error.message);
    }
  }

  fail(message) {
    this.error.textContent = message;
    this.error.hidden = false;
  }
}

function resultItem(result) {
  const score = element(
    "span",
    { class: "score", title: "How well it matches, 0 to 1" },
    `score ${result.score.toFixed(2)}`,
  );
  const head = element(
    "p",
    { class: "result-head" },
    element("span", { class: "label" }, result.label),
    score,
  );
  const paged = result.page_number !== null;
  const passage = element(
    "p",
    { class: paged ? "passage reflow" : "passage", lang: result.source.language ?? "" },
    ...markBest(result, paged),
  );
  const item = element("li", { class: "result", "data-source": result.source_id }, head, passage);
  if (result.access_url) {
    const page = result.page_number;
    const href = page ? `${result.access_url}#page=${page}` : result.access_url;
    const text = page ? `Open original at page ${page}` : "Open original";
    item.append(element("a", { href, target: "_blank", rel: "noopener" }, text));
  }
  return item;
}

/** The passage's text with its best sentence in a <mark>. A sentence's range is in the
 * source's text (code points), the passage's too: the difference places it in the passage.
 * The text of a page (`paged`) reflows: its line breaks are where the page's lines ended. */
function markBest(result, paged) {
  const lay = paged ? reflowed : (piece) => [piece];
  const best = result.sentences[0];
  if (!best) return lay(result.text);
  const offset = result.span.start;
  const [from, to] = utf16Indices(result.text, [best.start - offset, best.end - offset]);
  const text = result.text;
  return [
    ...lay(text.slice(0, from)),
    element("mark", {}, ...lay(text.slice(from, to))),
    ...lay(text.slice(to)),
  ];
}
