// Offsets on the wire are Unicode code points (Python str indices). JavaScript strings index
// UTF-16 units instead, and the two part ways at the first character outside the Basic
// Multilingual Plane (𠮷, 𝑥, emoji): every offset must be converted before slicing.

/** The UTF-16 index of each code-point offset into `text` (offsets past the end give
 * `text.length`), in one pass over the text whatever the order of the offsets. */
export function utf16Indices(text, offsets) {
  const order = offsets.map((offset, position) => [offset, position]).sort((a, b) => a[0] - b[0]);
  const indices = new Array(offsets.length);
  let unit = 0;
  let point = 0;
  for (const [offset, position] of order) {
    while (point < offset && unit < text.length) {
      unit += text.codePointAt(unit) > 0xffff ? 2 : 1;
      point += 1;
    }
    indices[position] = unit;
  }
  return indices;
}

/** `text[start:end]` as Python reads it: start and end in code points. */
export function sliceCodePoints(text, start, end) {
  const [from, to] = utf16Indices(text, [start, end]);
  return text.slice(from, to);
}

/** "1 page", "5 pages". */
export function plural(count, noun) {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}
