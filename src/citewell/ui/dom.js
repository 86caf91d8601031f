// The one DOM helper the modules share. Text always goes in as text nodes, never as HTML:
// answers and documents are the user's data, not markup.

/** `document.createElement`, with attributes and children (strings become text nodes). */
export function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value !== null && value !== undefined) node.setAttribute(name, value);
  }
  node.append(...children);
  return node;
}

/** Text of a page (PDF, scan) as nodes for a block whose lines reflow (CSS `white-space:
 * normal`): a single line break is only where the page's line ended, and folds into a space;
 * a blank line still parts paragraphs, by a <br> added beside it, so the text stays the text. */
export function reflowed(text) {
  return text
    .split(/(\n\s*\n)/)
    .flatMap((piece, index) => (index % 2 ? [piece, element("br")] : [piece]));
}
