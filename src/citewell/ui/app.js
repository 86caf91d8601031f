// citewell in the browser: sign in (or not, on an open server), then add documents, ask and
// search. This module only wires the parts together and keeps track of who is signed in.

import { request, session, SourceCache } from "./api.js";
import { AskTab } from "./ask.js";
import { Library } from "./library.js";
import { SourcePanel } from "./panel.js";
import { SearchTab } from "./search.js";
import { tabs } from "./tabs.js";

const $ = (selector) => document.querySelector(selector);

const sources = new SourceCache();
const panel = new SourcePanel($("#source-panel"), sources);
const library = new Library($("#library"), (count) => askTab.haveDocuments(count > 0));
const scope = () => library.bucket;
const askTab = new AskTab($("#panel-ask"), { scope, panel, sources });
const searchTab = new SearchTab($("#panel-search"), scope);
tabs($('[role="tablist"]'));

$("#sign-in").addEventListener("submit", (event) => {
  event.preventDefault();
  session.signIn($("#key").value.trim());
  $("#key").value = "";
  start();
});

$("#sign-out").addEventListener("click", () => {
  session.signOut();
  start();
});

/** Ask the server who we are (the key of this tab, or nobody on an open server) by listing the
 * agents, which any valid key may do; then show the workspace, or the sign-in form. */
async function start() {
  askTab.clear();
  searchTab.clear();
  sources.clear();
  try {
    const { data: models } = await request("v1/models");
    enter(models);
  } catch (error) {
    leave(error);
  }
}

function enter(models) {
  $("#sign-in").hidden = true;
  $("#sign-in-error").hidden = true;
  $("#account").hidden = false;
  $("#account-text").textContent = session.key
    ? "Signed in with an API key"
    : "Open server: no key needed";
  $("#sign-out").hidden = !session.key;
  $("#workspace").hidden = false;
  askTab.setAgents(models);
  library.load();
}

function leave(error) {
  const refusedKey = error.status === 401 && Boolean(session.key);
  // Without a key, a server that needs one answers 401: the usual start, not an error to show.
  const noKeyYet = error.status === 401 && !refusedKey;
  if (refusedKey) session.signOut();
  $("#workspace").hidden = true;
  $("#account").hidden = true;
  $("#sign-in").hidden = false;
  $("#sign-in-error").textContent = refusedKey
    ? `That key was not accepted: ${error.message}`
    : error.message;
  $("#sign-in-error").hidden = noKeyYet;
  $("#key").focus();
}

start();
