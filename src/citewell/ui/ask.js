// The ask tab: a question goes to POST /v1/responses as a stream; the answer is drawn as its
// events arrive, and `response.completed` settles it. The grounding state decides what is shown:
// citations and the source panel ("available"), the answer alone ("hidden"), or a plain notice
// that the documents do not answer ("missing").

import { errorOf, fetchOrExplain, withKey } from "./api.js";
import { AnswerView, pageName } from "./answer.js";
import { element } from "./dom.js";
import { conflictBadge } from "./panel.js";
import { sseJson } from "./stream.js";
import { plural } from "./text.js";

const GROUNDING_NOTES = {
  hidden: "This agent does not show its sources, so the answer comes without citations.",
  missing: "Your documents do not answer this question.",
  none: "Nothing was looked up for this answer.",
};

export class AskTab {
  /** `scope()` names the bucket to ask about ("" for every bucket the agent sees); `panel` is
   * the SourcePanel; `sources` the SourceCache. */
  constructor(root, { scope, panel, sources }) {
    this.scope = scope;
    this.panel = panel;
    this.sources = sources;
    this.question = root.querySelector("#question");
    this.agent = root.querySelector("#agent");
    this.intro = root.querySelector("#ask-intro");
    this.answer = root.querySelector("#answer");
    this.status = root.querySelector("#answer-status");
    this.note = root.querySelector("#grounding");
    this.cited = root.querySelector("#answer-sources");
    this.error = root.querySelector("#answer-error");
    this.answerText = root.querySelector("#answer-text");
    this.view = new AnswerView(this.answerText, (annotation, badge) =>
      this.openSource(annotation, badge),
    );
    this.running = null; // the AbortController of the answer being streamed
    this.accessUrls = new Map(); // file_id -> signed link to the original, from the results
    this.conflictSides = new Map(); // file_id -> "current", "older" or "undated", from the results
    root.querySelector("#ask-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.ask(this.question.value.trim());
    });
    // Enter asks, Shift+Enter starts a new line, as in a chat box.
    this.question.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        event.target.form.requestSubmit();
      }
    });
  }

  /** Fill the agent picker from GET /v1/models (the default agent comes first). */
  setAgents(models) {
    const options = models.map((model) => {
      const option = new Option(model.id, model.id);
      option.title = model.description;
      return option;
    });
    this.agent.replaceChildren(...options);
  }

  /** Without any bucket, the intro starts with the first steps. */
  haveDocuments(some) {
    this.intro.querySelector("#first-steps").hidden = some;
  }

  clear() {
    this.running?.abort();
    this.panel.close();
    this.view.clear();
    this.accessUrls.clear();
    this.conflictSides.clear();
    this.answer.hidden = true;
    this.intro.hidden = false;
    this.error.hidden = true;
    this.note.hidden = true;
    this.cited.hidden = true;
    this.status.textContent = "";
  }

  async ask(question) {
    if (!question) return;
    this.clear();
    const running = new AbortController();
    this.running = running;
    this.intro.hidden = true;
    this.answer.hidden = false;
    this.answer.setAttribute("aria-busy", "true");
    this.answerText.lang = "";
    this.status.textContent = "Looking through your documents…";
    try {
      await this.stream(question, running.signal);
    } catch (error) {
      if (error.name !== "AbortError") this.fail(error.message);
    } finally {
      if (this.running === running) this.answer.setAttribute("aria-busy", "false");
    }
  }

  async stream(question, signal) {
    const response = await fetchOrExplain("v1/responses", {
      method: "POST",
      headers: withKey({ "Content-Type": "application/json" }),
      body: JSON.stringify(this.request(question)),
      signal,
    });
    if (!response.ok) throw await errorOf(response);
    for await (const event of sseJson(response.body)) this.handle(event);
  }

  request(question) {
    const body = {
      model: this.agent.value || undefined,
      input: question,
      stream: true,
      include: ["file_search_call.results"],
    };
    const bucket = this.scope();
    if (bucket) body.tools = [{ type: "file_search", vector_store_ids: [bucket] }];
    return body;
  }

  handle(event) {
    switch (event.type) {
      case "response.output_item.done":
        if (event.item.type === "file_search_call") this.remember(event.item.results);
        break;
      case "response.output_text.delta":
        this.status.textContent = "Writing the answer…";
        this.view.append(event.delta);
        break;
      case "response.output_text.annotation.added":
        this.view.cite(event.annotation);
        break;
      case "response.completed":
        this.complete(event.response);
        break;
      case "response.failed":
        this.fail(event.response.error?.message ?? "The answer broke off.");
        break;
    }
  }

  /** Links to the originals, and which side of a disagreement a source is on, come with the
   * search results, not with the citations. */
  remember(results) {
    for (const result of results ?? []) {
      const link = result.attributes?.access_url;
      if (link) this.accessUrls.set(result.file_id, link);
      const side = result.attributes?.conflict_side;
      if (side) this.conflictSides.set(result.file_id, side);
    }
  }

  complete(response) {
    const part = response.output
      .find((item) => item.type === "message")
      ?.content.find((content) => content.type === "output_text");
    const state = response.metadata?.grounded_sources_state;
    if (part) this.view.complete(part); // a hidden answer comes without annotations
    const note = GROUNDING_NOTES[state];
    this.note.textContent = note ?? "";
    this.note.hidden = !note;
    this.note.dataset.state = state ?? "";
    const cited = this.listSources();
    this.status.textContent = cited.length
      ? `Answered from ${plural(cited.length, "source")}.`
      : "Answered.";
    this.labelLanguage(cited[0]?.file_id);
  }

  /** Under the answer, each cited source once, in its number's order, with the pages cited;
   * choosing one opens its first citation. Returns the first citation of each. */
  listSources() {
    const first = new Map();
    const pages = new Map();
    for (const annotation of this.view.annotations) {
      const number = annotation.source_index;
      if (!first.has(number)) first.set(number, annotation);
      if (!pages.has(number)) pages.set(number, new Set());
      if (annotation.page_number !== null) pages.get(number).add(pageName(annotation));
    }
    const numbers = [...first.keys()].sort((a, b) => a - b);
    const items = numbers.map((number) => {
      const annotation = first.get(number);
      const where = [...pages.get(number)].join(", ");
      const button = element(
        "button",
        { type: "button", class: "source-link" },
        where ? `${annotation.filename}, ${where}` : annotation.filename,
      );
      button.addEventListener("click", () => this.openSource(annotation, button));
      const side = this.conflictSides.get(annotation.file_id);
      return element("li", { value: number }, button, ...(side ? [conflictBadge(side)] : []));
    });
    this.cited.querySelector("ol").replaceChildren(...items);
    this.cited.hidden = items.length === 0;
    return numbers.map((number) => first.get(number));
  }

  /** The answer quotes its first source: it is in that source's language. */
  async labelLanguage(sourceId) {
    if (!sourceId) return;
    const running = this.running;
    const source = await this.sources.source(sourceId).catch(() => null);
    if (source?.language && this.running === running) this.answerText.lang = source.language;
  }

  openSource(annotation, badge) {
    this.panel.open(annotation, {
      opener: badge,
      accessUrl: this.accessUrls.get(annotation.file_id),
      conflictSide: this.conflictSides.get(annotation.file_id),
    });
  }

  fail(message) {
    this.status.textContent = "";
    this.answer.hidden = !this.view.text;
    this.error.textContent = message;
    this.error.hidden = false;
  }
}
