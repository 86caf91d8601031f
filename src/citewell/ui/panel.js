// The source panel: what one citation cites. The cited range highlighted within its passage,
// and for sources with pages (PDFs, scans, images) each page it lies on, as a picture with the
// cited lines boxed, and a link that opens the original at that page.

import { pageName } from "./answer.js";
import { element, reflowed } from "./dom.js";
import { utf16Indices } from "./text.js";

const CONTEXT = 320; // code points of the source shown on each side of the cited range

export class SourcePanel {
  /** `sources` is the SourceCache the panel reads texts and languages from. */
  constructor(root, sources) {
    this.root = root;
    this.sources = sources;
    this.title = root.querySelector("#source-title");
    this.where = root.querySelector("#source-where");
    this.conflict = root.querySelector("#source-conflict");
    this.passage = root.querySelector("#source-passage");
    this.pages = root.querySelector("#source-pages");
    this.original = root.querySelector("#source-original");
    this.opener = null;
    this.shown = null; // the annotation on show: a late passage must not land on another one
    root.querySelector("#close-source").addEventListener("click", () => this.close());
    // Escape closes it wherever the focus is: the panel sits beside the answer, not over it.
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape") this.close();
    });
  }

  get isOpen() {
    return !this.root.hidden;
  }

  /** Show `annotation`; `accessUrl` opens the original (none when unknown); `conflictSide`
   * says which side of a disagreement between sources it is on (none when it is on none).
   * Focus moves into the panel, and goes back to `opener` when it closes. */
  open(annotation, { opener, accessUrl, conflictSide }) {
    this.shown = annotation;
    this.opener = opener;
    this.title.textContent = `Source ${annotation.source_index}: ${annotation.filename}`;
    this.conflict.replaceChildren(...(conflictSide ? [conflictBadge(conflictSide)] : []));
    this.conflict.hidden = !conflictSide;
    const page = pageName(annotation);
    this.where.textContent = page ? `Cited on ${page}` : "";
    this.where.hidden = !page;
    this.showPassage(annotation);
    const pictured = annotation.regions.filter((region) => region.image_url);
    this.pages.replaceChildren(
      ...pictured.map((region) => pageFigure(region, annotation.filename)),
    );
    this.showOriginal(annotation, accessUrl);
    this.root.hidden = false;
    this.title.focus();
  }

  close() {
    if (!this.isOpen) return;
    this.root.hidden = true;
    this.shown = null;
    this.opener?.focus();
    this.opener = null;
  }

  /** The cited text at once, then within its passage once the source's text is in (a key
   * without the 'search' permission cannot read it: the cited text alone stays). */
  async showPassage(annotation) {
    this.passage.lang = "";
    const paged = annotation.page_number !== null;
    this.passage.classList.toggle("reflow", paged);
    this.passage.replaceChildren(element("mark", {}, annotation.cited_text));
    const [text, source] = await Promise.all([
      this.sources.text(annotation.file_id).catch(() => null),
      this.sources.source(annotation.file_id).catch(() => null),
    ]);
    if (this.shown !== annotation) return;
    if (source?.language) this.passage.lang = source.language;
    if (text !== null) this.passage.replaceChildren(...passageAround(text, annotation, paged));
  }

  showOriginal(annotation, accessUrl) {
    this.original.hidden = !accessUrl;
    if (!accessUrl) return;
    const page = annotation.page_number;
    // PDF viewers open a PDF at the page named in the fragment; other files ignore it.
    this.original.href = page ? `${accessUrl}#page=${page}` : accessUrl;
    this.original.textContent = page ? `Open original at page ${page}` : "Open original";
  }
}

/** The cited range in a <mark>, with the text around it: up to CONTEXT code points each side,
 * cut at a paragraph break when there is one, else marked as cut with an ellipsis. The text of
 * a page (`paged`) reflows: its line breaks are where the page's lines ended. */
function passageAround(text, annotation, paged) {
  const start = annotation.cited_start_index;
  const end = annotation.cited_end_index;
  const [from, markFrom, markTo, to] = utf16Indices(text, [
    Math.max(0, start - CONTEXT),
    start,
    end,
    end + CONTEXT,
  ]);
  let before = text.slice(from, markFrom);
  let after = text.slice(markTo, to);
  const paragraphStart = before.lastIndexOf("\n\n");
  if (paragraphStart >= 0) before = before.slice(paragraphStart + 2);
  else if (from > 0) before = `…${before}`;
  const paragraphEnd = after.indexOf("\n\n");
  if (paragraphEnd >= 0) after = after.slice(0, paragraphEnd);
  else if (to < text.length) after = `${after}…`;
  const lay = paged ? reflowed : (piece) => [piece];
  return [...lay(before), element("mark", {}, ...lay(text.slice(markFrom, markTo))), ...lay(after)];
}

/** A picture of one page with a box over each cited line. The boxes are placed in percent of
 * the picture from the normalised coordinates (0–1 of the page), so they stay on their lines at
 * any width. The picture's width and height attributes give it the page's proportions before
 * it loads, so nothing jumps when it does. */
function pageFigure(region, filename) {
  const page = capitalised(pageName(region));
  const picture = element("img", {
    src: region.image_url,
    alt: `${page} of ${filename}`,
    width: Math.round(region.page_width),
    height: Math.round(region.page_height),
  });
  const frame = element("div", { class: "page-frame" }, picture);
  for (const box of region.boxes) {
    const mark = element("div", { class: "page-box", "aria-hidden": "true" });
    Object.assign(mark.style, {
      left: percent(box.nx0),
      top: percent(box.ny0),
      width: percent(box.nx1 - box.nx0),
      height: percent(box.ny1 - box.ny0),
    });
    frame.append(mark);
  }
  const caption = element("figcaption", {}, `${page}, cited lines boxed`);
  return element("figure", { class: "page", "data-page": region.page_number }, frame, caption);
}

function percent(fraction) {
  return `${(fraction * 100).toFixed(4)}%`;
}

function capitalised(text) {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

const CONFLICT_SIDES = {
  current: "Sources disagree: this one is current",
  older: "Sources disagree: a later source says otherwise",
  undated: "Sources disagree: neither is dated later",
};

/** The badge of a source on one side of a disagreement between sources. */
export function conflictBadge(side) {
  return element(
    "span",
    { class: `conflict-badge ${side}`, "data-conflict": side },
    CONFLICT_SIDES[side] ?? "Sources disagree",
  );
}
