// deltamem tree viewer: draws both trees of one bank; a query highlights the matched chain.
// Talks to the service that served this page: GET /v1/banks/{bank}/tree and
// POST /v1/banks/{bank}/explain. The bank comes from ?bank=NAME (default "local").
// When the tree says the caller may write (`writable`), the node pane edits the node
// (text, hide, relabel, delete) and the Edits pane lists the audit rows with Undo:
// POST nodes/{id}/edit|hide|relabel, DELETE nodes/{id}, POST edits/{id}/undo, GET edits.
"use strict";

const params = new URLSearchParams(location.search);
const bank = params.get("bank") || "local";
const api = `/v1/banks/${encodeURIComponent(bank)}`;
const byId = new Map();
const $ = (sel) => document.querySelector(sel);
let writable = false;
let selected = null;

// `deltamem view --edit` hands its one-time key in the fragment: keep it for this tab only
const fragKey = new URLSearchParams(location.hash.slice(1)).get("key");
if (fragKey) {
  sessionStorage.setItem("deltamem-key", fragKey);
  history.replaceState(null, "", location.pathname + location.search);
}

function status(text, error = false) {
  const el = $("#status");
  el.textContent = text;
  el.classList.toggle("error", error);
}

async function call(path, body, method) {
  const headers = { "Accept": "application/json" };
  const key = sessionStorage.getItem("deltamem-key");
  if (key) headers["Authorization"] = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(api + path, {
    method: method || (body === undefined ? "GET" : "POST"),
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status === 401) {
    $("#key-form").hidden = false;
    throw new Error("this service needs an API key: type it above");
  }
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(`${res.status}: ${JSON.stringify(data.detail ?? data)}`);
  return data;
}

function short(text, n) {
  const t = text.replace(/\s+/g, " ").trim();
  return t.length <= n ? t : t.slice(0, n - 1) + "…";
}

function nodeElement(n) {
  const span = document.createElement("span");
  span.className = `node ${n.kind.toLowerCase()} ${n.label.toLowerCase()}` +
    (n.hidden ? " hidden" : "");
  span.dataset.id = n.id;
  span.title = n.trigger;
  const marks = [];
  if (n.consolidated) marks.push('<span class="mark cons" title="consolidated">★</span>');
  if (n.origin === "consolidated") marks.push('<span class="mark rstar">R*</span>');
  span.innerHTML =
    `<b>${n.kind === "ROOT" ? "ROOT" : "Δ"}</b> ${marks.join(" ")}` +
    `<span class="meta">d=${n.depth} hits=${n.success_hits}</span> ` +
    `<span class="trigger"></span><span class="score"></span>`;
  span.querySelector(".trigger").textContent = short(n.trigger, 60);
  span.addEventListener("click", () => select(n.id));
  return span;
}

function render(nodes) {
  byId.clear();
  for (const tree of ["task", "env"]) {
    const root = document.querySelector(`#tree-${tree} ul.roots`);
    root.replaceChildren();
    const lists = new Map([[null, root]]);
    for (const n of nodes.filter((x) => x.tree === tree).sort((a, b) => a.seq - b.seq)) {
      byId.set(n.id, n);
      const li = document.createElement("li");
      li.appendChild(nodeElement(n));
      const children = document.createElement("ul");
      li.appendChild(children);
      lists.set(n.id, children);
      (lists.get(n.parent) || root).appendChild(li);
    }
    const count = nodes.filter((x) => x.tree === tree).length;
    document.querySelector(`#tree-${tree} h2`).textContent =
      `${tree === "task" ? "Task-Tree (skills)" : "Env-Tree (knowledge)"} — ${count} nodes`;
  }
  document.body.dataset.renderedNodes = String(document.querySelectorAll(".tree .node").length);
}

function select(id) {
  const n = byId.get(id);
  if (!n) { selected = null; return; }
  selected = id;
  document.querySelectorAll(".node.selected").forEach((e) => e.classList.remove("selected"));
  document.querySelectorAll(`.tree .node[data-id="${id}"]`)
    .forEach((e) => e.classList.add("selected"));
  const rows = [
    ["id", n.id], ["tree", n.tree], ["kind", n.kind], ["label", n.label],
    ["depth", n.depth], ["success hits", n.success_hits],
    ["consolidated", n.consolidated ? "yes" : "no"], ["hidden", n.hidden ? "yes" : "no"],
    ["origin", n.origin],
    ["source", n.source ?? "—"], ["parent", n.parent ?? "— (virtual root)"],
    ["trigger", n.trigger], ["when (activation)", n.payload.activation],
    ["what (procedure)", n.payload.procedure], ["until (termination)", n.payload.termination],
    ["episode", n.episode_id], ["seq", n.seq],
    ["created", new Date(n.created_at * 1000).toISOString()],
  ];
  const dl = document.createElement("dl");
  dl.id = "node-details";
  dl.dataset.id = n.id;
  for (const [k, v] of rows) {
    const dt = document.createElement("dt");
    dt.textContent = k;
    const dd = document.createElement("dd");
    dd.textContent = String(v);
    dd.dataset.field = k;
    dl.append(dt, dd);
  }
  $("#details").replaceChildren(Object.assign(document.createElement("h2"),
                                              { textContent: "Node" }), dl);
  if (writable) $("#details").appendChild(editor(n));
}

// -- the inspector: edit the selected node, list the edits, undo -----------------------------
function field(form, name, label, value, rows) {
  const l = document.createElement("label");
  l.textContent = label;
  const t = document.createElement(rows ? "textarea" : "input");
  if (rows) t.rows = rows; else t.type = "text";
  t.name = name;
  t.value = value;
  l.appendChild(t);
  form.appendChild(l);
}

function button(parent, id, text, onClick, cls) {
  const b = Object.assign(document.createElement("button"), { type: "button", id, textContent: text });
  if (cls) b.className = cls;
  b.addEventListener("click", () => onClick().catch((e) => status(e.message, true)));
  parent.appendChild(b);
}

function editor(n) {
  const form = document.createElement("form");
  form.id = "editor";
  form.dataset.id = n.id;
  form.appendChild(Object.assign(document.createElement("h2"), { textContent: "Edit" }));
  field(form, "trigger", "trigger (embedded again when changed)", n.trigger, 2);
  field(form, "activation", "when (activation)", n.payload.activation, 3);
  field(form, "procedure", "what (procedure)", n.payload.procedure, 6);
  field(form, "termination", "until (termination)", n.payload.termination, 2);
  field(form, "reason", "reason (kept in the audit row)", "", 0);
  const row = document.createElement("div");
  row.className = "buttons";
  const reason = () => form.elements.reason.value;
  button(row, "save", "Save text", async () => {
    const body = { reason: reason() };
    for (const k of ["trigger", "activation", "procedure", "termination"]) {
      const was = k === "trigger" ? n.trigger : n.payload[k];
      if (form.elements[k].value !== was) body[k] = form.elements[k].value;
    }
    await edit(`/nodes/${n.id}/edit`, body);
  });
  button(row, "hide", n.hidden ? "Unhide" : "Hide",
         () => edit(`/nodes/${n.id}/hide`, { hidden: !n.hidden, reason: reason() }));
  const other = n.label === "SUCCESS" ? "FAILURE" : "SUCCESS";
  button(row, "relabel", `Mark ${other}`,
         () => edit(`/nodes/${n.id}/relabel`, { label: other, reason: reason() }));
  const sub = Object.assign(document.createElement("label"), { textContent: " with subtree" });
  const box = Object.assign(document.createElement("input"), { type: "checkbox", id: "subtree" });
  sub.prepend(box);
  button(row, "delete", "Delete", () => {
    const q = `?subtree=${box.checked}&reason=${encodeURIComponent(reason())}`;
    return edit(`/nodes/${n.id}${q}`, undefined, "DELETE");
  }, "danger");
  row.appendChild(sub);
  form.appendChild(row);
  form.addEventListener("submit", (ev) => ev.preventDefault());
  return form;
}

async function edit(path, body, method) {
  const e = await call(path, body, method);
  status(`${e.op} ${short(e.node_id, 12)}: done (edit ${e.id}, by ${e.who})`);
  document.body.dataset.lastEdit = e.id;
  await refresh();
  return e;
}

async function refresh() {
  const keep = selected;
  const data = await call("/tree");
  writable = !!data.writable;
  render(data.nodes);
  if (keep && byId.has(keep)) select(keep);
  else $("#details").replaceChildren(Object.assign(document.createElement("h2"),
                                                   { textContent: "Node" }));
  await loadEdits();
}

async function loadEdits() {
  $("#edits").hidden = !writable;
  if (!writable) return;
  const data = await call("/edits");
  const undone = new Set(data.edits.filter((e) => e.undoes).map((e) => e.undoes));
  const list = $("#edit-list");
  list.replaceChildren();
  for (const e of data.edits.slice(-50).reverse()) {
    const li = document.createElement("li");
    li.dataset.edit = e.id;
    li.classList.toggle("undone", undone.has(e.id));
    const what = e.op === "undo" ? `undo of ${e.undoes}` : `${e.op} ${short(e.node_id, 10)}`;
    li.textContent = `${what} · ${e.who} · ${new Date(e.at * 1000).toISOString().slice(0, 19)}` +
      (e.reason ? ` · “${e.reason}”` : "");
    const b = Object.assign(document.createElement("button"),
                            { type: "button", textContent: "Undo", className: "undo" });
    b.addEventListener("click", () => edit(`/edits/${e.id}/undo`, { reason: "" })
      .catch((err) => status(err.message, true)));
    li.appendChild(b);
    list.appendChild(li);
  }
}

function clearMatch() {
  document.querySelectorAll(".tree .node").forEach((e) => {
    e.classList.remove("in-chain", "matched", "dim");
    e.querySelector(".score").textContent = "";
  });
}

async function match(query) {
  clearMatch();
  const data = await call("/explain", { query });
  const parts = [];
  for (const [tree, ex] of Object.entries(data.trees)) {
    const chain = new Set(ex.chain.map((c) => c.id));
    document.querySelectorAll(`#tree-${tree} .node`)
      .forEach((e) => e.classList.toggle("dim", ex.match.accepted && !chain.has(e.dataset.id)));
    for (const c of ex.chain) {
      const el = document.querySelector(`.tree .node[data-id="${c.id}"]`);
      if (!el) continue;
      el.classList.add("in-chain");
      el.querySelector(".score").textContent = c.score.toFixed(3);
    }
    if (ex.match.node_id) {
      const el = document.querySelector(`.tree .node[data-id="${ex.match.node_id}"]`);
      if (el) el.classList.add("matched");
    }
    const s = ex.match.score === null ? "empty tree" : ex.match.score.toFixed(3);
    parts.push(`${tree}: best ${s} ${ex.match.accepted ? "≥" : "<"} τ ${ex.match.tau}` +
               (ex.match.accepted ? ` → chain of ${ex.chain.length}` : " → nothing recalled"));
  }
  status(parts.join(" · "));
}

async function load() {
  $("#bank-name").textContent = `· bank ${bank}`;
  try {
    const data = await call("/tree");
    writable = !!data.writable;
    render(data.nodes);
    await loadEdits();
    status(`${data.nodes.length} nodes · embedder ${data.embedder ?? "?"}` +
           (writable ? " · editable (every change is audited and can be undone)" : " · read-only"));
    document.body.dataset.writable = writable ? "1" : "0";
    document.body.dataset.ready = "1";
  } catch (e) {
    status(e.message, true);
    document.body.dataset.ready = "error";
  }
}

$("#key-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem("deltamem-key", $("#key").value.trim());
  $("#key-form").hidden = true;
  load();
});
$("#query-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const q = $("#query").value.trim();
  if (q) match(q).catch((e) => status(e.message, true));
});
$("#clear").addEventListener("click", () => { clearMatch(); $("#query").value = ""; });
load();
