// The HTTP side of the UI: the API key, JSON requests, uploads with progress, readable errors.
//
// Paths are relative ("v1/buckets"): they resolve against the page, so the UI works wherever the
// server is mounted, and always talks to the server that served it.

const KEY_ITEM = "citewell.key";

/** The API key of this browser tab. sessionStorage, never localStorage: the key goes away
 * with the tab and is never left on disk for the next person at this computer. */
export const session = {
  get key() {
    return sessionStorage.getItem(KEY_ITEM) ?? "";
  },
  signIn(key) {
    sessionStorage.setItem(KEY_ITEM, key);
  },
  signOut() {
    sessionStorage.removeItem(KEY_ITEM);
  },
};

/** A request the server refused, with the server's own message (OpenAI's error shape). */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** `headers` with the key added, when there is one (an open server needs none). */
export function withKey(headers = {}) {
  return session.key ? { ...headers, Authorization: `Bearer ${session.key}` } : headers;
}

/** One JSON request: the parsed answer, or an ApiError. */
export async function request(path, { method = "GET", body, signal } = {}) {
  const init = { method, signal, headers: withKey() };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetchOrExplain(path, init);
  if (!response.ok) throw await errorOf(response);
  return response.json();
}

/** fetch(), with a readable error when the server cannot be reached at all. */
export async function fetchOrExplain(path, init) {
  try {
    return await fetch(path, init);
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "The server could not be reached. Is citewell still running?");
  }
}

/** The ApiError a refused response stands for: its JSON error message, else its status line. */
export async function errorOf(response) {
  const body = await response.json().catch(() => null);
  return refusal(response.status, body);
}

function refusal(status, body) {
  const error = body?.error;
  if (error?.message) return new ApiError(status, error.message);
  return new ApiError(status, `The server answered with status ${status}.`);
}

/** Upload one file to a bucket. XMLHttpRequest rather than fetch(): only it reports upload
 * progress. `onProgress` receives the share sent, 0 to 1. Resolves to the upload's answer
 * (`{outcome, source}`). */
export function uploadFile(bucket, file, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", `v1/buckets/${encodeURIComponent(bucket)}/sources`);
    xhr.responseType = "json";
    for (const [name, value] of Object.entries(withKey())) xhr.setRequestHeader(name, value);
    xhr.upload.onprogress = (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    };
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) resolve(xhr.response);
      else reject(refusal(xhr.status, xhr.response));
    };
    xhr.onerror = () =>
      reject(new ApiError(0, "The upload broke off: the server could not be reached."));
    const form = new FormData();
    form.append("file", file);
    xhr.send(form);
  });
}

/** What the UI reads of sources, fetched once each: a source never changes (new bytes make a
 * new source). A failed lookup is forgotten, so the next one tries again. */
export class SourceCache {
  constructor() {
    this.lookups = new Map();
  }

  /** Forget everything: another key may see other sources. */
  clear() {
    this.lookups.clear();
  }

  /** The canonical text every offset indexes (needs the 'search' permission). */
  text(id) {
    return this.once(`v1/sources/${encodeURIComponent(id)}/text`).then((body) => body.text);
  }

  /** The source itself: file name, language, pages. */
  source(id) {
    return this.once(`v1/sources/${encodeURIComponent(id)}`);
  }

  once(path) {
    if (!this.lookups.has(path)) {
      const lookup = request(path);
      lookup.catch(() => this.lookups.delete(path));
      this.lookups.set(path, lookup);
    }
    return this.lookups.get(path);
  }
}
