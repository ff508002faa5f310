// logtrove web console: one page, one view per URL, everything from the JSON API (the
// charts are in charts.js).
// No framework and no build step. Text from the server is only ever set with
// textContent, never as HTML.
"use strict";

const API = "/api/v1";
const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));

// -- small helpers ---------------------------------------------------------------------
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function link(href, text) {
  return el("a", { href, "data-nav": "", text });
}

function fmtTime(ms) {
  if (ms === null || ms === undefined || ms < 0) return "–";
  return new Date(ms).toISOString().replace(".000Z", "Z");
}

function fmtBytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
}

function fmtDuration(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 1000) return ms + " ms";
  const s = ms / 1000;
  if (s < 120) return s.toFixed(1) + " s";
  if (s < 7200) return (s / 60).toFixed(1) + " min";
  if (s < 172800) return (s / 3600).toFixed(1) + " h";
  return (s / 86400).toFixed(1) + " d";
}

function fmtNum(n) {
  return n === null || n === undefined ? "–" : Number(n).toLocaleString("en");
}

function shown(bytesText, b64) {
  if (bytesText !== null && bytesText !== undefined) return bytesText;
  if (b64 !== null && b64 !== undefined) return "base64:" + b64;
  return null;
}

function clip(text, n = 140) {
  if (text === null) return "null";
  return text.length > n ? text.slice(0, n) + "…" : text;
}

class ApiError extends Error {
  constructor(problem) {
    super(problem.detail || problem.title || "request failed");
    this.problem = problem;
  }
}

// -- credentials ---------------------------------------------------------------------------
// A server started with --http-auth wants a bearer token (`logtrove tokens create`). The
// login page keeps it in sessionStorage (this tab only, gone when it closes) and every
// request sends it; the console never sees a password.
const TOKEN_KEY = "logtrove.token";
const token = () => sessionStorage.getItem(TOKEN_KEY);

// X-Requested-With: the server then challenges with Bearer only, not Basic, which would
// make the browser prompt for a password.
function authHeaders(headers = {}) {
  const t = token();
  const all = { ...headers, "X-Requested-With": "logtrove-console" };
  return t ? { ...all, Authorization: "Bearer " + t } : all;
}

// Without HTTP auth on the server there is nothing to log in to: the link is shown only
// when the server asks for credentials (health's features.auth) or a token is held.
function updateAuthLink() {
  const link = $("#auth-link");
  link.textContent = token() ? "Log out" : "Log in";
  link.hidden = !token() && !(health && health.features && health.features.auth);
}

// EventSource cannot send an Authorization header, so with a token the live tail reads
// the same text/event-stream through fetch. It does not reconnect by itself: an ended
// stream is an "error" event with a detail, and Follow resumes from the last cursor.
class FetchEventSource extends EventTarget {
  constructor(url) {
    super();
    this.readyState = 0;
    this.controller = new AbortController();
    this.run(url);
  }

  async run(url) {
    try {
      const response = await fetch(url, {
        signal: this.controller.signal,
        headers: authHeaders({ Accept: "text/event-stream" }),
      });
      if (!response.ok) {
        const body = await response.json().catch(() => ({ detail: response.statusText }));
        return this.fail(body.detail || response.statusText);
      }
      this.readyState = 1;
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          this.dispatch(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
      this.fail("the server ended the tail");
    } catch (err) {
      if (err.name !== "AbortError") this.fail("Connection lost: " + err.message);
    }
  }

  dispatch(block) {
    let type = "message";
    let id = "";
    const data = [];
    for (const line of block.split("\n")) {
      if (!line || line.startsWith(":")) continue;
      const i = line.indexOf(":");
      const field = i < 0 ? line : line.slice(0, i);
      let value = i < 0 ? "" : line.slice(i + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") type = value;
      else if (field === "data") data.push(value);
      else if (field === "id") id = value;
    }
    if (data.length) this.dispatchEvent(new MessageEvent(type, { data: data.join("\n"), lastEventId: id }));
  }

  fail(detail) {
    if (this.readyState === 2) return;
    this.readyState = 2;
    this.dispatchEvent(new MessageEvent("error", { data: JSON.stringify({ detail }) }));
  }

  close() {
    this.readyState = 2;
    this.controller.abort();
  }
}

async function api(path, params) {
  const url = new URL(API + path, location.origin);
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, v);
  }
  const response = await fetch(url, { headers: authHeaders({ Accept: "application/json" }) });
  const body = await response.json().catch(() => ({ detail: response.statusText }));
  if (!response.ok) throw new ApiError({ status: response.status, ...body });
  return body;
}

function setStatus(text, kind = "", node = $("#status")) {
  node.textContent = text;
  node.className = "status " + kind;
}

// -- routing -----------------------------------------------------------------------------
function navigate(url, replace = false) {
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  route();
}

document.addEventListener("click", (event) => {
  const a = event.target.closest("a[data-nav]");
  if (!a || event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
  event.preventDefault();
  navigate(a.getAttribute("href"));
});
window.addEventListener("popstate", () => route());

function show(view) {
  for (const section of $$(".view")) section.hidden = section.id !== "view-" + view;
  const tab = { message: "search", topic: "topics" }[view] || view;
  for (const a of $$("nav a[data-view]")) a.classList.toggle("active", a.dataset.view === tab);
}

async function route() {
  const path = location.pathname.replace(/\/+$/, "");
  const params = new URLSearchParams(location.search);
  stopTail(); // a live tail belongs to the topic page it was started on
  try {
    if (path === "/ui" || path === "/ui/search") return await searchView(params);
    if (path === "/ui/message") return await messageView(params);
    if (path === "/ui/topics") return await topicsView(params);
    if (path.startsWith("/ui/topics/")) return await topicView(decodeURIComponent(path.slice(11)), params);
    if (path === "/ui/lag") return await lagView(params);
    if (path === "/ui/login") return loginView(params);
    show("error");
    $("#error-text").textContent = "No such page: " + location.pathname;
  } catch (err) {
    if (err.problem && err.problem.status === 401) {
      return navigate("/ui/login?next=" + encodeURIComponent(location.pathname + location.search), true);
    }
    show("error");
    $("#error-text").textContent = err.message;
  }
}

// -- login -----------------------------------------------------------------------------------
function loginView(params) {
  show("login");
  const form = $("#login-form");
  form.dataset.next = params.get("next") || "/ui/topics";
  form.reset();
  setStatus(token() ? "A token is in use in this tab." : "", "", $("#login-status"));
}

$("#login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target;
  const value = new FormData(form).get("token").trim();
  if (!value) return;
  sessionStorage.setItem(TOKEN_KEY, value);
  try {
    await api("/topics");
  } catch (err) {
    sessionStorage.removeItem(TOKEN_KEY);
    updateAuthLink();
    return setStatus(err.message, "error", $("#login-status"));
  }
  updateAuthLink();
  topicsLoaded = null;
  const next = form.dataset.next;
  navigate(next.startsWith("/ui") ? next : "/ui/topics");
});

$("#auth-link").addEventListener("click", (event) => {
  if (!token()) return; // a link to the login page
  event.preventDefault();
  event.stopPropagation();
  sessionStorage.removeItem(TOKEN_KEY);
  updateAuthLink();
  topicsLoaded = null;
  navigate("/ui/login");
});

// -- search ------------------------------------------------------------------------------
let topicsLoaded = null;
let currentSearch = null; // {controller, cursor, request}

async function loadTopicChoices() {
  if (!topicsLoaded) {
    topicsLoaded = api("/topics", { internal: "true" }).then((topics) => {
      const select = $("#f-topic");
      // the user's topics first: internal ones (__consumer_offsets…) are never the default
      const ordered = [...topics].sort((a, b) => a.name.startsWith("__") - b.name.startsWith("__"));
      select.replaceChildren(...ordered.map((t) => el("option", { value: t.name, text: t.name })));
      return topics;
    });
  }
  return topicsLoaded;
}

function syncFields() {
  const by = $("#f-by").value;
  for (const row of $$("[data-for]", $("#search-form"))) {
    row.hidden = !row.dataset.for.split(" ").includes(by);
  }
}

function formParams() {
  const data = new FormData($("#search-form"));
  const by = data.get("by");
  const keep = new Set(["topic", "by", "limit"]);
  for (const row of $$("[data-for]", $("#search-form"))) {
    if (!row.dataset.for.split(" ").includes(by)) continue;
    for (const input of $$("input, select", row)) keep.add(input.name);
  }
  const params = new URLSearchParams();
  for (const [k, v] of data.entries()) {
    if (keep.has(k) && v !== "") params.set(k, v);
  }
  return params;
}

function fillForm(params) {
  const form = $("#search-form");
  for (const input of $$("input, select", form)) {
    if (input.type === "checkbox") input.checked = params.get(input.name) === "1";
    else if (params.has(input.name)) input.value = params.get(input.name);
    else if (input.name !== "topic" && input.name !== "by" && input.name !== "match") {
      input.value = input.name === "limit" ? "50" : "";
    }
  }
  if (!params.has("match")) form.elements.match.value = "contains";
  syncFields();
}

// What to call for a search, from the URL's parameters.
function searchRequest(p) {
  const topic = encodeURIComponent(p.get("topic"));
  const base = `/topics/${topic}`;
  const limit = p.get("limit") || "50";
  const span = { from: p.get("from"), to: p.get("to") };
  switch (p.get("by")) {
    case "key":
      return { path: `${base}/messages/by-key`, params: { key: p.get("key") ?? "", limit, ...span } };
    case "id":
      return { path: `${base}/messages/by-id`, params: { id: p.get("id") ?? "", limit } };
    case "header":
      return {
        path: `${base}/messages/by-header`,
        params: { name: p.get("header_name") ?? "", value: p.get("header_value") ?? "", limit, ...span },
      };
    case "content": {
      const match = p.get("match") || "contains";
      return {
        path: `${base}/messages/search`,
        params: { [match]: p.get("text") ?? "", limit, ...span },
        stream: true,
      };
    }
    case "offset": {
      const partition = p.get("partition") || "0";
      const offset = p.get("offset") || "0";
      if (p.get("neighbours") === "1") {
        return { path: `${base}/partitions/${partition}/offsets/${offset}/neighbours`, params: {}, focus: Number(offset) };
      }
      return { path: `${base}/partitions/${partition}/messages`, params: { offset, limit }, browse: true };
    }
    case "time":
      return { path: `${base}/messages/at`, params: { time: p.get("time") ?? "" } };
    case "range":
      return { path: `${base}/messages/range`, params: { from: p.get("from") ?? "", to: p.get("to") ?? "", limit } };
    default:
      throw new Error("unknown search type " + p.get("by"));
  }
}

async function searchView(params) {
  show("search");
  await loadTopicChoices();
  if (!params.has("by")) params.set("by", "key");
  fillForm(params);
  if (params.has("topic")) {
    await runSearch(params);
  } else {
    clearResults();
    setStatus("Pick a topic and what to find.");
  }
}

function clearResults() {
  clearSearchHistogram();
  if (currentSearch && currentSearch.controller) currentSearch.controller.abort();
  currentSearch = null;
  $("#results tbody").replaceChildren();
  $("#results").hidden = true;
  $("#more").hidden = true;
  $("#cli").hidden = true;
}

function resultRow(m, focus) {
  const value = shown(m.value, m.value_b64);
  const key = shown(m.key, m.key_b64);
  const href = `/ui/message?topic=${encodeURIComponent(m.topic)}&partition=${m.partition}&offset=${m.offset}`;
  const row = el(
    "tr",
    { class: m.offset === focus ? "focus" : null, "data-partition": m.partition, "data-offset": m.offset, "data-timestamp": m.timestamp },
    el("td", { text: m.partition }),
    el("td", {}, link(href, String(m.offset))),
    el("td", { text: fmtTime(m.timestamp) }),
    el("td", { class: "mono", text: clip(key, 60) }),
    el("td", { class: "mono value", text: clip(value) }),
    el("td", { text: m.headers.map((h) => h.name + "=" + clip(shown(h.value, h.value_b64), 30)).join(", ") }),
  );
  row.addEventListener("click", (event) => {
    if (!event.target.closest("a")) navigate(href);
  });
  return row;
}

function showCli(command) {
  if (!command) return;
  $("#cli-text").textContent = command;
  $("#cli").hidden = false;
}

function summary(count, page) {
  const parts = [`${count} message${count === 1 ? "" : "s"}`];
  if (page.reason) parts.push(page.reason);
  const s = page.stats;
  if (s && (s.bytes_scanned || s.segments_skipped)) {
    parts.push(`${fmtBytes(s.bytes_scanned)} scanned, ${s.segments_scanned} segment(s) read, ${s.segments_skipped} skipped`);
  }
  return parts.join(" · ");
}

async function runSearch(params, cursor = null) {
  let request;
  try {
    request = searchRequest(params);
  } catch (err) {
    setStatus(err.message, "error");
    return;
  }
  if (!cursor) clearResults();
  const controller = new AbortController();
  currentSearch = { controller, request, params, count: cursor ? currentSearch.count : 0 };
  const tbody = $("#results tbody");
  $("#results").hidden = false;
  $("#more").hidden = true;
  setStatus("Searching…", "busy");
  const reqParams = { ...request.params };
  if (cursor) {
    if (request.browse) reqParams.offset = cursor;
    else reqParams.cursor = cursor;
  }
  try {
    let page;
    if (request.stream) {
      page = await streamSearch(request.path, reqParams, controller, (m) => {
        tbody.append(resultRow(m));
        currentSearch.count += 1;
        setStatus(`${currentSearch.count} found so far…`, "busy");
      });
    } else {
      page = await api(request.path, reqParams);
      if (page.messages === undefined) page = { messages: [page], cli: null };
      for (const m of page.messages) tbody.append(resultRow(m, request.focus));
      currentSearch.count += page.messages.length;
    }
    showCli(page.cli);
    setStatus(summary(currentSearch.count, page), currentSearch.count ? "ok" : "empty");
    drawSearchHistogram(params);
    if (page.next_cursor) {
      currentSearch.cursor = page.next_cursor;
      $("#more").hidden = false;
    }
  } catch (err) {
    if (err.name === "AbortError") return;
    setStatus(err.message, "error");
  }
}

// Content search answers with NDJSON: one message per line, then {"completion": …}.
async function streamSearch(path, params, controller, onMessage) {
  const url = new URL(API + path, location.origin);
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, v);
  url.searchParams.set("stream", "true");
  const response = await fetch(url, { signal: controller.signal, headers: authHeaders({ Accept: "application/x-ndjson" }) });
  if (!response.ok) throw new ApiError(await response.json().catch(() => ({ detail: response.statusText })));
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let completion = null;
  const handle = (line) => {
    if (!line.trim()) return;
    const item = JSON.parse(line);
    if (item.completion) completion = item.completion;
    else if (item.error) throw new ApiError(item.error);
    else onMessage(item);
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let nl;
    while ((nl = buffer.indexOf("\n")) >= 0) {
      handle(buffer.slice(0, nl));
      buffer = buffer.slice(nl + 1);
    }
  }
  handle(buffer);
  return completion || { reason: "stream ended" };
}

$("#search-form").addEventListener("submit", (event) => {
  event.preventDefault();
  navigate("/ui/search?" + formParams().toString());
});
$("#f-by").addEventListener("change", syncFields);
$("#more").addEventListener("click", () => {
  if (currentSearch && currentSearch.cursor) runSearch(currentSearch.params, currentSearch.cursor);
});
$("#cli-copy").addEventListener("click", async () => {
  const text = $("#cli-text").textContent;
  try {
    await navigator.clipboard.writeText(text);
    $("#cli-copy").textContent = "Copied";
  } catch {
    const range = document.createRange();
    range.selectNodeContents($("#cli-text"));
    getSelection().removeAllRanges();
    getSelection().addRange(range);
    $("#cli-copy").textContent = "Selected — press Ctrl+C";
  }
  setTimeout(() => ($("#cli-copy").textContent = "Copy CLI"), 1500);
});

// -- one message -----------------------------------------------------------------------
function pretty(text) {
  if (text === null) return { kind: "null", text: "null (tombstone)" };
  try {
    const parsed = JSON.parse(text);
    if (typeof parsed === "object" && parsed !== null) return { kind: "json", text: JSON.stringify(parsed, null, 2) };
  } catch {
    /* not JSON */
  }
  return { kind: "text", text };
}

async function messageView(params) {
  show("message");
  const topic = params.get("topic");
  const partition = params.get("partition");
  const offset = params.get("offset");
  const box = $("#message-detail");
  box.replaceChildren(el("p", { class: "muted", text: "Loading…" }));
  const m = await api(`/topics/${encodeURIComponent(topic)}/partitions/${partition}/offsets/${offset}`);
  const value = pretty(shown(m.value, m.value_b64));
  const neighbours = `/ui/search?topic=${encodeURIComponent(m.topic)}&by=offset&partition=${m.partition}&offset=${m.offset}&neighbours=1`;
  const cli = `logtrove query ${m.topic} --partition ${m.partition} --offset ${m.offset}`;
  const facts = el(
    "dl",
    { class: "facts" },
    el("dt", { text: "topic" }), el("dd", {}, link(`/ui/topics/${encodeURIComponent(m.topic)}`, m.topic)),
    el("dt", { text: "partition / offset" }), el("dd", { text: `${m.partition} / ${m.offset}` }),
    el("dt", { text: "timestamp" }), el("dd", { text: `${fmtTime(m.timestamp)} (${m.timestamp})` }),
    el("dt", { text: "key" }), el("dd", { class: "mono", text: shown(m.key, m.key_b64) ?? "null" }),
    el("dt", { text: "message ID" }), el("dd", { class: "mono", text: m.client_id ?? "–" }),
    el("dt", { text: "position ID" }), el("dd", { class: "mono", text: m.id ?? "–" }),
  );
  const headers = el(
    "table",
    { class: "grid" },
    el("thead", {}, el("tr", {}, el("th", { text: "header" }), el("th", { text: "value" }))),
    el("tbody", {}, ...m.headers.map((h) => el("tr", {}, el("td", { text: h.name }), el("td", { class: "mono", text: shown(h.value, h.value_b64) ?? "null" })))),
  );
  box.replaceChildren(
    el("h2", { text: `${m.topic} · partition ${m.partition} · offset ${m.offset}` }),
    facts,
    el("p", {}, link(neighbours, "Show neighbours"), " ", el("code", { class: "cli-inline", text: cli })),
    el("h3", { text: `Value (${value.kind})` }),
    el("pre", { class: "value-box " + value.kind, id: "message-value", text: value.text }),
    el("h3", { text: "Headers" }),
    m.headers.length ? headers : el("p", { class: "muted", text: "none" }),
  );
  $("#msg-back").setAttribute("href", `/ui/search?topic=${encodeURIComponent(m.topic)}&by=offset&partition=${m.partition}&offset=${m.offset}&neighbours=1`);
}

// -- topics ------------------------------------------------------------------------------
async function topicsView(params) {
  show("topics");
  const internal = params.get("internal") === "1";
  $("#show-internal").checked = internal;
  const topics = await api("/topics", { internal: internal ? "true" : "false" });
  $("#topics-table tbody").replaceChildren(
    ...topics.map((t) =>
      el(
        "tr",
        {},
        el("td", {}, link(`/ui/topics/${encodeURIComponent(t.name)}`, t.name)),
        el("td", { text: t.partitions }),
        el("td", { text: fmtNum(t.messages) }),
        el("td", { text: fmtBytes(t.size_bytes) }),
        el("td", { text: t.cleanup_policy }),
      ),
    ),
  );
}
$("#show-internal").addEventListener("change", (e) => navigate(e.target.checked ? "/ui/topics?internal=1" : "/ui/topics"));

async function topicView(name, params = new URLSearchParams()) {
  show("topic");
  drawHistogram(name, params);
  setupTail(name);
  setupProduce(name);
  const [t, compaction, consumers] = await Promise.all([
    api(`/topics/${encodeURIComponent(name)}`),
    api(`/topics/${encodeURIComponent(name)}/compaction`),
    api(`/topics/${encodeURIComponent(name)}/groups`),
  ]);
  $("#topic-groups tbody").replaceChildren(
    ...consumers.map((g) =>
      el(
        "tr",
        {},
        el("td", {}, link(`/ui/lag?group=${encodeURIComponent(g.group)}`, g.group)),
        el("td", { text: g.state }),
        el("td", { text: fmtNum(g.lag) }),
        el("td", { text: fmtNum(g.tag_lag) }),
        el("td", { text: fmtDuration(g.time_lag_ms) }),
        el("td", { text: g.never_committed_partitions }),
      ),
    ),
  );
  if (!consumers.length) {
    $("#topic-groups tbody").append(el("tr", {}, el("td", { colspan: 6, class: "muted", text: "No group has committed offsets on this topic." })));
  }
  $("#topic-title").textContent = t.name;
  const retention = t.retention_ms < 0 ? "forever" : fmtDuration(t.retention_ms);
  const search = `/ui/search?topic=${encodeURIComponent(t.name)}&by=offset&partition=0&offset=0`;
  $("#topic-facts").replaceChildren(
    el("span", { text: `${t.partitions} partition(s)` }),
    el("span", { text: `${fmtNum(t.messages)} messages` }),
    el("span", { text: fmtBytes(t.size_bytes) }),
    el("span", { text: `cleanup.policy=${t.cleanup_policy}` }),
    el("span", { text: `retention ${retention}${t.retention_bytes >= 0 ? " / " + fmtBytes(t.retention_bytes) : ""}` }),
    link(search, "Browse messages"),
  );
  $("#partitions-table tbody").replaceChildren(
    ...t.partition_list.map((p) =>
      el(
        "tr",
        {},
        el("td", {}, link(`/ui/search?topic=${encodeURIComponent(t.name)}&by=offset&partition=${p.partition}&offset=${p.log_start_offset}`, String(p.partition))),
        el("td", { text: fmtNum(p.log_start_offset) }),
        el("td", { text: fmtNum(p.log_end_offset) }),
        el("td", { text: p.indexed_offset === null ? "–" : fmtNum(p.indexed_offset) }),
        el("td", { text: fmtNum(p.messages) }),
        el("td", { text: fmtBytes(p.size_bytes) }),
        el("td", { text: p.segments }),
        el("td", { text: fmtTime(p.max_timestamp) }),
      ),
    ),
  );
  const box = $("#compaction");
  if (!compaction.compacted) {
    box.replaceChildren(el("p", { class: "muted", text: "Not compacted (cleanup.policy=" + compaction.cleanup_policy + ")." }));
  } else {
    box.replaceChildren(
      el(
        "table",
        { class: "grid" },
        el("thead", {}, el("tr", {}, ...["partition", "dirty ratio", "threshold", "first dirty", "log end", "last clean", "uncleanable"].map((h) => el("th", { text: h })))),
        el(
          "tbody",
          {},
          ...compaction.partitions.map((c) =>
            el(
              "tr",
              {},
              el("td", { text: c.partition }),
              el("td", { text: (c.dirty_ratio * 100).toFixed(1) + " %" }),
              el("td", { text: (c.min_cleanable_dirty_ratio * 100).toFixed(0) + " %" }),
              el("td", { text: fmtNum(c.first_dirty_offset) }),
              el("td", { text: fmtNum(c.log_end_offset) }),
              el("td", { text: c.last_clean_ms ? fmtTime(c.last_clean_ms) : "never" }),
              el("td", { class: c.uncleanable_reason ? "error" : "", text: c.uncleanable_reason || "–" }),
            ),
          ),
        ),
      ),
    );
  }
  $("#configs-table tbody").replaceChildren(
    ...t.configs.map((c) =>
      el(
        "tr",
        { class: c.source === "topic" ? "override" : "" },
        el("td", { class: "mono", text: c.name }),
        el("td", { class: "mono", text: c.value }),
        el("td", { text: c.source }),
        el("td", { class: "muted", text: c.doc }),
      ),
    ),
  );
}

// -- live tail ---------------------------------------------------------------------------
// New records as server-sent events (GET /topics/{t}/tail), filtered by the server. Rows
// go on top; at most "keep" rows stay on the page. Pause closes the stream and keeps the
// last event's cursor, so Follow resumes exactly where the page stopped.
let tail = null; // {source, topic, cursor, shown, dropped}

function stopTail(keepCursor = false) {
  if (tail && tail.source) tail.source.close();
  if (tail) tail.source = null;
  if (!keepCursor) tail = null;
  const pause = $("#tail-pause");
  if (pause) pause.disabled = true;
  const follow = $("#tail-follow");
  if (follow) follow.disabled = false;
}

function setupTail(name) {
  stopTail();
  $("#tail-table tbody").replaceChildren();
  $("#tail-table").hidden = true;
  setStatus("Follow new records as they arrive.", "", $("#tail-status"));
  $("#tail-follow").textContent = "Follow";
  $("#tail-form").dataset.topic = name;
}

function startTail() {
  const form = $("#tail-form");
  const topic = form.dataset.topic;
  const data = new FormData(form);
  const resume = tail && tail.topic === topic ? tail : null;
  const state = resume || { topic, cursor: null, shown: 0, dropped: 0 };
  const params = new URLSearchParams();
  for (const name of ["key", "tag", "contains"]) if (data.get(name)) params.set(name, data.get(name));
  if (state.cursor) params.set("cursor", state.cursor);
  const keep = Math.max(1, Math.min(5000, Number(data.get("keep")) || 200));
  const tailUrl = `${API}/topics/${encodeURIComponent(topic)}/tail?${params}`;
  const source = token() ? new FetchEventSource(tailUrl) : new EventSource(tailUrl);
  state.source = source;
  tail = state;
  const status = $("#tail-status");
  const tbody = $("#tail-table tbody");
  $("#tail-table").hidden = false;
  $("#tail-pause").disabled = false;
  $("#tail-follow").textContent = "Follow";
  $("#tail-follow").disabled = true; // following already; a changed filter enables it again
  const describe = () => `${fmtNum(state.shown)} shown${state.dropped ? `, ${fmtNum(state.dropped)} older dropped (keeping ${keep})` : ""}`;
  source.addEventListener("ready", (event) => {
    state.cursor = JSON.parse(event.data).cursor;
    setStatus(`Following ${topic}… ${describe()}`, "ok", status);
  });
  source.addEventListener("message", (event) => {
    state.cursor = event.lastEventId || state.cursor;
    const row = resultRow(JSON.parse(event.data));
    row.classList.add("new");
    tbody.prepend(row);
    state.shown += 1;
    while (tbody.rows.length > keep) {
      tbody.lastElementChild.remove();
      state.dropped += 1;
    }
    setStatus(`Following ${topic}… ${describe()}`, "ok", status);
  });
  source.addEventListener("skipped", (event) => {
    const s = JSON.parse(event.data);
    setStatus(`Fell behind on partition ${s.partition}: skipped offsets ${s.from}–${s.to - 1}. ${describe()}`, "ok", status);
  });
  source.addEventListener("error", (event) => {
    if (event.data) {
      setStatus(JSON.parse(event.data).detail, "error", status); // the server's own error event
      stopTail(true);
    } else if (source.readyState === EventSource.CONNECTING) {
      setStatus("Connection lost, reconnecting…", "busy", status);
    }
  });
}

$("#tail-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const topic = $("#tail-form").dataset.topic;
  if (tail && tail.source) stopTail(); // new filters: start again from now
  else if (tail && tail.topic !== topic) tail = null;
  if (!tail) {
    $("#tail-table tbody").replaceChildren();
  }
  startTail();
});
$("#tail-form").addEventListener("input", () => {
  if (tail && tail.source) $("#tail-follow").disabled = false; // Follow again: with the new filters
});
$("#tail-pause").addEventListener("click", () => {
  stopTail(true);
  setStatus(`Paused; ${fmtNum(tail.shown)} shown. Follow resumes where it stopped.`, "", $("#tail-status"));
  $("#tail-follow").textContent = "Resume";
});

// -- produce -------------------------------------------------------------------------------
function setupProduce(name) {
  $("#produce-box").hidden = !(health && !health.read_only);
  $("#produce-form").dataset.topic = name;
  setStatus("", "", $("#produce-status"));
}

function parseHeaders(text) {
  const headers = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    const eq = line.indexOf("=");
    if (eq <= 0) throw new Error(`header "${line}" is not name=value`);
    headers.push([line.slice(0, eq).trim(), line.slice(eq + 1)]);
  }
  return headers;
}

$("#produce-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target;
  const topic = form.dataset.topic;
  const data = new FormData(form);
  const status = $("#produce-status");
  try {
    const record = { value: data.get("value"), headers: parseHeaders(data.get("headers")) };
    if (data.get("key")) record.key = data.get("key");
    if (data.get("partition") !== "") record.partition = Number(data.get("partition"));
    setStatus("Sending…", "busy", status);
    const response = await fetch(`${API}/topics/${encodeURIComponent(topic)}/messages`, {
      method: "POST",
      headers: authHeaders({ "Content-Type": "application/json", Accept: "application/json" }),
      body: JSON.stringify({ records: [record] }),
    });
    const body = await response.json().catch(() => ({ detail: response.statusText }));
    if (!response.ok) throw new ApiError(body);
    const { partition, offset } = body.offsets[0];
    const href = `/ui/message?topic=${encodeURIComponent(topic)}&partition=${partition}&offset=${offset}`;
    status.replaceChildren("Written to partition " + partition + " at offset " + offset + " · ", link(href, "open it"));
    status.className = "status ok";
    status.dataset.partition = partition;
    status.dataset.offset = offset;
  } catch (err) {
    setStatus(err.message, "error", status);
  }
});

// -- lag ---------------------------------------------------------------------------------
let health = null;

function groupRow(g, focus) {
  return el(
    "tr",
    { class: g.group === focus ? "focus" : "", "data-group": g.group },
    el("td", {}, link(`/ui/lag?group=${encodeURIComponent(g.group)}`, g.group)),
    el("td", { text: g.state + (g.members !== null ? ` (${g.members} members)` : "") }),
    el("td", { text: g.topics.join(", ") }),
    el("td", { text: fmtNum(g.lag) }),
    el("td", { text: fmtNum(g.tag_lag) }),
    el("td", { text: fmtDuration(g.time_lag_ms) }),
    el("td", { text: g.never_committed_partitions }),
  );
}

// Each lagView call bumps this; an older call still awaiting the API returns
// instead of drawing stale figures over a newer call's (e.g. after a subscription).
let lagGeneration = 0;

async function lagView(params) {
  show("lag");
  const generation = ++lagGeneration;
  const group = params.get("group");
  const groups = await api("/groups");
  if (generation !== lagGeneration) return;
  $("#groups-table tbody").replaceChildren(...groups.map((g) => groupRow(g, group)));
  if (!groups.length) {
    $("#groups-table tbody").append(el("tr", {}, el("td", { colspan: 7, class: "muted", text: "No consumer group has committed offsets." })));
  }
  const detail = $("#group-detail");
  if (!group) {
    detail.hidden = true;
    return;
  }
  const g = await api(`/groups/${encodeURIComponent(group)}`);
  if (generation !== lagGeneration) return;
  detail.hidden = false;
  drawLagHistory(group, generation);
  $("#group-title").textContent = `Group ${g.group}`;
  $("#group-members").textContent = g.member_list.length
    ? "Members: " + g.member_list.map((m) => `${m.client_id || m.member_id} (${m.client_host || "?"})`).join(", ")
    : "";
  const writable = health && !health.read_only;
  $("#group-topics tbody").replaceChildren(
    ...g.topic_lags.map((t) =>
      el(
        "tr",
        { "data-topic": t.topic },
        el("td", {}, link(`/ui/topics/${encodeURIComponent(t.topic)}`, t.topic)),
        el("td", { class: "mono", text: t.tags ?? "–" }),
        el("td", { text: fmtNum(t.lag) }),
        el("td", { text: fmtNum(t.tag_lag) }),
        el("td", { text: fmtDuration(t.time_lag_ms) }),
        el("td", { text: fmtDuration(t.tag_time_lag_ms) }),
        el("td", { text: t.never_committed_partitions }),
        el("td", {}, t.tags && writable ? el("button", { type: "button", class: "small", onclick: () => unsubscribe(g.group, t.topic), text: "Remove tags" }) : null),
      ),
    ),
  );
  const form = $("#subscribe-form");
  form.hidden = !writable;
  form.dataset.group = g.group;
  if (writable) {
    const topics = await loadTopicChoices();
    if (generation !== lagGeneration) return;
    $("#topic-names").replaceChildren(...topics.map((t) => el("option", { value: t.name })));
  }
  $("#group-partitions tbody").replaceChildren(
    ...g.partitions.map((p) =>
      el(
        "tr",
        { class: p.never_committed ? "muted" : "" },
        el("td", { text: p.topic }),
        el("td", { text: p.partition }),
        el("td", { text: fmtNum(p.log_end_offset) }),
        el("td", { text: p.never_committed ? "never committed" : fmtNum(p.committed_offset) }),
        el("td", { text: fmtNum(p.lag) }),
        el("td", { text: fmtNum(p.tag_lag) }),
        el("td", { text: fmtDuration(p.time_lag_ms) }),
        el("td", { text: fmtDuration(p.tag_time_lag_ms) }),
      ),
    ),
  );
}

function setSubscribeStatus(text, kind = "") {
  setStatus(text, kind, $("#subscribe-status"));
}

async function writeSubscription(method, group, topic, body) {
  const url = `${API}/groups/${encodeURIComponent(group)}/subscriptions/${encodeURIComponent(topic)}`;
  const response = await fetch(url, {
    method,
    headers: authHeaders({ "Content-Type": "application/json", Accept: "application/json" }),
    body: body ? JSON.stringify(body) : undefined,
  });
  if (!response.ok) throw new ApiError(await response.json().catch(() => ({ detail: response.statusText })));
}

async function unsubscribe(group, topic) {
  try {
    setSubscribeStatus("Removing…");
    await writeSubscription("DELETE", group, topic);
    // Refresh first: "ok" means the tables below already show the change.
    await lagView(new URLSearchParams(location.search));
    setSubscribeStatus(`Removed the tag subscription on ${topic}.`, "ok");
  } catch (err) {
    setSubscribeStatus(err.message, "error");
  }
}

$("#subscribe-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target;
  const data = new FormData(form);
  try {
    setSubscribeStatus("Saving…");
    await writeSubscription("PUT", form.dataset.group, data.get("topic"), { tags: data.get("tags") });
    form.reset();
    await lagView(new URLSearchParams(location.search));
    setSubscribeStatus(`Subscribed to ${data.get("tags")} on ${data.get("topic")}.`, "ok");
  } catch (err) {
    setSubscribeStatus(err.message, "error");
  }
});

// -- start -------------------------------------------------------------------------------
updateAuthLink();
api("/health")
  .then((h) => {
    health = h;
    updateAuthLink();
    $("#server").textContent = `${h.data_dir}${h.read_only ? " · read-only" : ""} · v${h.version}`;
  })
  .catch(() => ($("#server").textContent = "server unreachable"))
  .finally(() => route());
