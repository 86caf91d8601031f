// The documents side: pick or create a bucket, drop files into it (each with its upload, then
// its reading, shown as it goes), and see what the bucket holds.

import { request, uploadFile } from "./api.js";
import { element } from "./dom.js";
import { plural } from "./text.js";

const POLL_MS = 1000; // how often a file being read by OCR is asked about

export class Library {
  /** `onBuckets(count)` hears how many buckets there are, each time they are listed. */
  constructor(root, onBuckets) {
    this.onBuckets = onBuckets;
    this.picker = root.querySelector("#bucket");
    this.creator = root.querySelector("#new-bucket");
    this.slug = root.querySelector("#bucket-slug");
    this.drop = root.querySelector("#drop");
    this.chooser = root.querySelector("#files");
    this.uploads = root.querySelector("#uploads");
    this.sources = root.querySelector("#sources");
    this.empty = root.querySelector("#library-empty");
    this.error = root.querySelector("#library-error");
    this.picker.addEventListener("change", () => this.showSources());
    this.creator.addEventListener("submit", (event) => {
      event.preventDefault();
      this.create(this.slug.value.trim());
    });
    this.chooser.addEventListener("change", () => {
      this.addFiles([...this.chooser.files]);
      this.chooser.value = ""; // choosing the same file again is a new upload
    });
    this.listenForDrops();
  }

  /** The slug of the chosen bucket; "" when there is none. */
  get bucket() {
    return this.picker.value;
  }

  /** List the buckets, keeping `chosen` (or the current one) chosen. */
  async load(chosen = this.bucket) {
    this.say("");
    const listed = await this.attempt(request("v1/buckets"));
    const buckets = listed?.data ?? [];
    const options = buckets.map((bucket) => element("option", { value: bucket.slug }, bucket.name));
    this.picker.replaceChildren(
      ...(options.length ? options : [element("option", { value: "" }, "No buckets yet")]),
    );
    if (buckets.some((bucket) => bucket.slug === chosen)) this.picker.value = chosen;
    this.picker.disabled = buckets.length === 0;
    this.chooser.disabled = buckets.length === 0;
    this.drop.classList.toggle("disabled", buckets.length === 0);
    this.onBuckets(buckets.length);
    await this.showSources();
  }

  async create(slug) {
    if (!slug) return;
    if (await this.attempt(request("v1/buckets", { method: "POST", body: { slug } }))) {
      this.slug.value = "";
      await this.load(slug);
    }
  }

  /** The chosen bucket's sources; the uploads shown were into the bucket chosen before. */
  async showSources() {
    this.uploads.replaceChildren();
    await this.listSources();
  }

  async listSources() {
    if (!this.bucket) {
      this.sources.replaceChildren();
      this.empty.textContent = "No buckets yet. Create one, then drop files into it.";
      this.empty.hidden = false;
      return;
    }
    const listed = await this.attempt(
      request(`v1/buckets/${encodeURIComponent(this.bucket)}/sources`),
    );
    const sources = listed?.data ?? [];
    this.sources.replaceChildren(...sources.map(sourceItem));
    this.empty.textContent = "Nothing in this bucket yet. Drop files here to add them.";
    this.empty.hidden = sources.length > 0;
  }

  /** Upload each file, one after the other (the server reads them one at a time anyway). */
  async addFiles(files) {
    const bucket = this.bucket;
    if (!bucket) return this.say("Create a bucket first, then add files to it.");
    const rows = files.map((file) => new UploadRow(file));
    this.uploads.append(...rows.map((row) => row.item));
    for (const row of rows) await row.send(bucket);
    if (this.bucket === bucket) await this.listSources();
  }

  listenForDrops() {
    for (const type of ["dragenter", "dragover"]) {
      this.drop.addEventListener(type, (event) => {
        event.preventDefault(); // lets the drop happen here rather than open the file
        this.drop.classList.add("over");
      });
    }
    this.drop.addEventListener("dragleave", () => this.drop.classList.remove("over"));
    this.drop.addEventListener("drop", (event) => {
      event.preventDefault();
      this.drop.classList.remove("over");
      this.addFiles([...event.dataTransfer.files]);
    });
  }

  /** `pending`'s result; null when it fails, with the server's message shown. */
  async attempt(pending) {
    try {
      return await pending;
    } catch (error) {
      this.say(error.message);
      return null;
    }
  }

  say(message) {
    this.error.textContent = message;
    this.error.hidden = !message;
  }
}

function sourceItem(source) {
  const details = source.page_count ? plural(source.page_count, "page") : source.mime_type;
  return element(
    "li",
    { "data-source": source.id },
    element("span", { class: "name" }, source.filename),
    element("span", { class: "details" }, details),
  );
}

/** One file on its way in: its upload (bytes sent), then its reading (pages done, for files
 * read by OCR in the background), then how it ended. `data-state` says where it is. */
class UploadRow {
  constructor(file) {
    this.file = file;
    this.progress = element("progress", {
      max: "1",
      value: "0",
      "aria-label": `Upload of ${file.name}`,
    });
    this.status = element("span", { class: "status" }, "Waiting…");
    this.item = element(
      "li",
      { "data-state": "waiting" },
      element("span", { class: "name" }, file.name),
      this.progress,
      this.status,
    );
  }

  async send(bucket) {
    this.show("uploading", "Uploading…", 0);
    try {
      const answer = await uploadFile(bucket, this.file, (share) => this.uploaded(share));
      await this.follow(answer);
    } catch (error) {
      this.show("failed", error.message, null);
    }
  }

  uploaded(share) {
    if (share < 1) this.show("uploading", `Uploading… ${Math.round(share * 100)}%`, share);
    // The server reads the file before it answers: no measure of that, so no value.
    else this.show("reading", "Reading…", null);
  }

  /** Follow the file until it is read: at once for most files, page by page for scans. */
  async follow(answer) {
    let source = answer.source;
    while (source.status === "processing") {
      const { pages_done: done, pages_total: total } = source.progress;
      this.show("reading", `Reading pages: ${done} of ${total} done`, total ? done / total : null);
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      source = await request(`v1/sources/${encodeURIComponent(source.id)}`);
    }
    if (source.status === "failed") {
      return this.show("failed", `Could not be read: ${source.error}`, null);
    }
    if (answer.outcome === "unchanged") return this.show("ready", "Already in this bucket", 1);
    const pages = source.page_count ? `, ${plural(source.page_count, "page")}` : "";
    this.show("ready", `Ready${pages}`, 1);
  }

  /** `share` 0–1, or null for an unknown share (an indeterminate bar, or none once done). */
  show(state, text, share) {
    this.item.dataset.state = state;
    this.status.textContent = text;
    if (share === null) this.progress.removeAttribute("value");
    else this.progress.value = share;
    this.progress.hidden = state === "failed" || state === "ready";
  }
}
