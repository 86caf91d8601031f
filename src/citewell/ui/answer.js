// An answer as it streams in. Each cited claim is wrapped in a span and followed by one numbered
// badge per citation, placed from the annotation's offsets (code points), never by looking for
// "[n]" in the text: an answer may hold brackets of its own, and a marker says nothing of where
// the claim it closes begins. Claims the sources do not support are marked as such.

import { element } from "./dom.js";
import { utf16Indices } from "./text.js";

const UNSUPPORTED = "Not supported by your documents";

export class AnswerView {
  /** `onBadge(annotation, badge)` is called when a badge is clicked. */
  constructor(container, onBadge) {
    this.container = container;
    this.onBadge = onBadge;
    this.clear();
  }

  clear() {
    this.text = "";
    this.annotations = [];
    this.unsupported = [];
    this.render();
  }

  /** More answer text: a `response.output_text.delta`. */
  append(delta) {
    this.text += delta;
    this.render();
  }

  /** A citation of a claim already streamed: a `response.output_text.annotation.added`. */
  cite(annotation) {
    this.annotations.push(annotation);
    this.render();
  }

  /** The `output_text` part of `response.completed`: the final word on the text, its
   * citations and the claims flagged as unsupported (only known at the end). */
  complete(part) {
    this.text = part.text;
    this.annotations = part.annotations.filter((annotation) => annotation.type === "file_citation");
    this.unsupported = part.unsupported_claims ?? [];
    this.render();
  }

  /** Redraw from the state. The badge that had the focus keeps it. */
  render() {
    const active = document.activeElement;
    const focused = this.container.contains(active) ? active.dataset.citation : undefined;
    this.container.replaceChildren(...this.nodes());
    if (focused !== undefined) {
      this.container.querySelector(`[data-citation="${focused}"]`)?.focus();
    }
  }

  /** The text cut at claim boundaries: plain text, claim spans, badges and flags. */
  nodes() {
    const claims = this.claims();
    const bounds = utf16Indices(
      this.text,
      claims.flatMap((claim) => [claim.start, claim.end]),
    );
    const nodes = [];
    let written = 0; // UTF-16 index up to which the text is placed
    claims.forEach((claim, position) => {
      const from = bounds[2 * position];
      const to = bounds[2 * position + 1];
      if (from < written || to <= from) return; // not streamed yet, or overlapping another claim
      nodes.push(
        this.text.slice(written, from),
        ...this.claimNodes(claim, this.text.slice(from, to)),
      );
      written = to;
    });
    nodes.push(this.text.slice(written));
    return nodes.filter((node) => node !== "");
  }

  /** Claims in text order: each cited range with its annotations, and each unsupported one. */
  claims() {
    const byRange = new Map();
    this.annotations.forEach((annotation, index) => {
      const key = `${annotation.start_index}:${annotation.end_index}`;
      if (!byRange.has(key)) {
        byRange.set(key, {
          start: annotation.start_index,
          end: annotation.end_index,
          citations: [],
        });
      }
      byRange.get(key).citations.push({ annotation, index });
    });
    const unsupported = this.unsupported.map((range) => ({
      start: range.start_index,
      end: range.end_index,
      citations: [],
      unsupported: true,
    }));
    return [...byRange.values(), ...unsupported].sort((a, b) => a.start - b.start);
  }

  claimNodes(claim, text) {
    const span = element(
      "span",
      { class: "claim", "data-start": claim.start, "data-end": claim.end },
      text,
    );
    if (!claim.unsupported) {
      return [
        span,
        ...claim.citations.map(({ annotation, index }) => this.badge(annotation, index)),
      ];
    }
    span.classList.add("unsupported");
    span.title = UNSUPPORTED;
    // The flag is an empty element (its mark is drawn by CSS), so the answer's text stays the
    // answer's text; screen readers read its label.
    return [
      span,
      element("span", {
        class: "flag",
        role: "img",
        "aria-label": UNSUPPORTED,
        title: UNSUPPORTED,
      }),
    ];
  }

  badge(annotation, index) {
    const label = badgeLabel(annotation);
    const badge = element(
      "button",
      { type: "button", class: "badge", "data-citation": index, "aria-label": label, title: label },
      String(annotation.source_index),
    );
    badge.addEventListener("click", () => this.onBadge(annotation, badge));
    return badge;
  }
}

/** "Source 2: report.pdf, page 3": what a badge says to a screen reader and in its tooltip. */
function badgeLabel(annotation) {
  const page = pageName(annotation);
  return `Source ${annotation.source_index}: ${annotation.filename}${page ? `, ${page}` : ""}`;
}

/** "page 3", or the document's own name for it ("page iv"); "" for sources without pages. */
export function pageName({ page_number: number, page_label: label }) {
  if (number === null || number === undefined) return "";
  return label && label !== String(number)
    ? `page ${label} (page ${number} of the file)`
    : `page ${number}`;
}
