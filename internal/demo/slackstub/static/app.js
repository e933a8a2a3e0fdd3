// app.js runs the page: it reads the stand-in's state in a loop (each read
// waits for the next change), renders the open channel and thread, sends
// what is typed as a slash command and button clicks as block_actions
// (after the button's confirm dialog, when it has one).
"use strict";

const ui = {
  state: null,
  channel: null,      // id of the open channel
  thread: null,       // ts of the open thread, in ui.channel
  stick: true,        // keep the channel scrolled to the newest entry
  threadStick: true,  // keep the thread scrolled to the newest reply
  seen: {},           // channel id → number of entries seen
  dismissed: new Set(),
  history: [],
  historyAt: 0,
};

const $ = sel => document.querySelector(sel);

function ctxOf(st) {
  const channels = {};
  for (const c of st.channels) channels[c.id] = c.name;
  return { users: st.users, me: st.user, channels };
}

function timeOf(ms) {
  return new Date(ms).toLocaleTimeString(undefined, { hour: "numeric", minute: "2-digit" });
}

function initials(name) {
  return (name || "?").replace(/[^A-Za-z0-9]/g, "").slice(0, 2).toUpperCase() || "?";
}

// renderItem renders one entry of a channel or thread.
function renderItem(it, prev, ctx, channel, inThread) {
  const isBot = it.kind !== "command";
  const name = it.kind === "slackbot" ? "Slackbot" : (ctx.users[it.user] || it.user);
  const grouped = prev && prev.user === it.user && prev.kind === it.kind && it.kind === "message" &&
    it.at - prev.at < 5 * 60 * 1000 && !(prev.replies && prev.replies.length && !inThread);
  const classes = ["msg", "kind-" + it.kind];
  if (grouped) classes.push("grouped");
  const ephemeral = it.kind === "ephemeral" || it.kind === "command" || it.kind === "slackbot";
  if (ephemeral) classes.push("ephemeral");
  const msg = { channel, ts: it.ts, ephemeral };
  let body;
  if (it.kind === "command") {
    body = `<div class="command-echo"><code>${escapeHTML(it.text)}</code></div>`;
  } else if (it.blocks && it.blocks.length) {
    body = renderBlocks(it.blocks, ctx, msg);
  } else {
    body = `<div class="b-text">${mrkdwn(it.text, ctx)}</div>`;
  }
  const files = (it.files || []).map(f => `<a class="file" href="${escapeHTML(f.url)}" target="_blank">` +
    `<span class="file-icon">TXT</span><span><b>${escapeHTML(f.title || f.name)}</b>` +
    `<span class="muted">${escapeHTML(f.name)} · ${(f.size / 1024).toFixed(1)} kB</span></span></a>`).join("");
  const edited = it.edits ? `<span class="edited" title="edited ${it.edits} times">(edited)</span>` : "";
  let replies = "";
  if (!inThread && it.replies && it.replies.length) {
    const n = it.replies.length;
    const last = it.replies[n - 1];
    replies = `<div class="replies"><button type="button" class="replies-link" data-thread="${escapeHTML(it.ts)}">` +
      `<span class="avatar tiny">${avatar(last, ctx)}</span><b>${n} ${n === 1 ? "reply" : "replies"}</b>` +
      `<span class="muted">Last reply ${timeOf(last.at)}</span></button></div>`;
  }
  const note = ephemeral ? `<div class="only-you"><span class="eye">👁</span> Only visible to you` +
    (it.kind === "command" ? "" : ` · <button type="button" class="link dismiss" data-key="${escapeHTML(it.key)}">Dismiss message</button>`) + `</div>` : "";
  const head = grouped ? `<div class="gutter-time">${timeOf(it.at)}</div>` :
    `<div class="avatar ${isBot ? "bot" : "user"}">${avatar(it, ctx)}</div>`;
  const meta = grouped ? "" : `<div class="meta"><span class="name">${escapeHTML(name)}</span>` +
    (it.user === ctx.me || it.kind === "slackbot" ? "" : `<span class="app-badge">APP</span>`) + `<span class="time">${timeOf(it.at)}</span></div>`;
  return `<div class="${classes.join(" ")}" data-key="${escapeHTML(it.key)}"${it.ts ? ` data-ts="${escapeHTML(it.ts)}"` : ""}>` +
    `${head}<div class="msg-body">${meta}<div class="content">${body}${edited}</div>${files}${replies}${note}</div></div>`;
}

function avatar(it, ctx) {
  if (it.kind === "slackbot") return "💬";
  if (it.user === ctx.me) return initials(ctx.users[it.user]).slice(0, 1);
  return "🤖";
}

// renderList renders entries as [{key, html}], for patch.
function renderList(items, ctx, channel, inThread) {
  const out = [];
  let prev = null;
  for (const it of items) {
    if (ui.dismissed.has(channel + "/" + it.key)) continue;
    out.push({ key: it.key, html: renderItem(it, prev, ctx, channel, inThread) });
    prev = it;
  }
  return out;
}

// patch makes container's children show entries ([{key, html}]), keeping
// every element whose HTML did not change: no flicker, and a reader's
// selection or hover survives the updates.
function patch(container, entries) {
  const old = new Map();
  for (const el of Array.from(container.children)) old.set(el.dataset.rkey, el);
  entries.forEach((e, i) => {
    let el = old.get(e.key);
    if (!el || el._html !== e.html) {
      const tpl = document.createElement("template");
      tpl.innerHTML = e.html.trim();
      const fresh = tpl.content.firstElementChild;
      fresh.dataset.rkey = e.key;
      fresh._html = e.html;
      if (el) el.replaceWith(fresh);
      el = fresh;
    }
    old.delete(e.key);
    if (container.children[i] !== el) container.insertBefore(el, container.children[i] || null);
  });
  for (const el of old.values()) el.remove();
}

function render() {
  const st = ui.state;
  if (!st) return;
  const ctx = ctxOf(st);
  if (!ui.channel || !st.channels.some(c => c.id === ui.channel)) ui.channel = st.channels.length ? st.channels[0].id : null;
  const ch = st.channels.find(c => c.id === ui.channel);
  $("#team-name").textContent = st.team;
  $("#conn").textContent = st.connected ? "● dlqbot connected" : "○ no bot connected";
  $("#conn").className = "conn " + (st.connected ? "on" : "off");
  ui.seen[ui.channel] = ch ? ch.items.length : 0;
  $("#channel-list").innerHTML = st.channels.map(c => {
    const unread = c.id === ui.channel ? 0 : c.items.length - (ui.seen[c.id] ?? c.items.length);
    if (ui.seen[c.id] === undefined) ui.seen[c.id] = c.items.length;
    return `<li><button type="button" class="nav-channel${c.id === ui.channel ? " active" : ""}${unread > 0 ? " unread" : ""}" ` +
      `data-channel="${escapeHTML(c.id)}"><span class="hash">${c.dm ? "@" : "#"}</span>${escapeHTML(c.name)}` +
      (unread > 0 ? `<span class="badge">${unread}</span>` : "") + `</button></li>`;
  }).join("");
  if (!ch) return;
  $("#channel-name").textContent = ch.name;
  $("#channel-topic").textContent = ch.topic || "";
  const notice = $("#notice");
  notice.hidden = !st.notice;
  notice.innerHTML = st.notice ? mrkdwn(st.notice, ctx) : "";
  $("#command-input").placeholder = `Message ${ch.dm ? "@" : "#"}${ch.name} — type ${st.command} help`;
  $("#suggestions").innerHTML = (st.suggestions || []).length ? `<span class="muted">Try</span>` +
    st.suggestions.map(s => `<button type="button" class="chip" data-suggest="${escapeHTML(s)}">${escapeHTML(s)}</button>`).join("") : "";

  const box = $("#messages");
  const intro = `<div class="channel-intro"><h1>${ch.dm ? "@" : "#"}${escapeHTML(ch.name)}</h1>` +
    (ch.intro ? `<div class="intro-text">${mrkdwn(ch.intro, ctx)}</div>` : "") + `</div>`;
  patch(box, [{ key: "intro:" + ch.id, html: intro }, ...renderList(ch.items, ctx, ch.id, false)]);
  renderThread(ch, ctx);
  stickToBottom();
}

// stickToBottom keeps the channel and the thread scrolled to their newest
// entries unless the reader scrolled up.
function stickToBottom() {
  const box = $("#messages");
  const thread = $("#thread-body");
  if (ui.stick) box.scrollTop = box.scrollHeight;
  if (ui.threadStick) thread.scrollTop = thread.scrollHeight;
}

function nearBottom(el) {
  return el.scrollHeight - el.scrollTop - el.clientHeight < 60;
}

function renderThread(ch, ctx) {
  const pane = $("#thread");
  const parent = ui.thread && ch.items.find(it => it.ts === ui.thread);
  if (!parent) {
    pane.hidden = true;
    document.body.classList.remove("thread-open");
    return;
  }
  pane.hidden = false;
  document.body.classList.add("thread-open");
  $("#thread-channel").textContent = (ch.dm ? "@" : "#") + ch.name;
  const body = $("#thread-body");
  const n = (parent.replies || []).length;
  patch(body, [...renderList([parent], ctx, ch.id, true),
    { key: "divider", html: `<div class="thread-divider"><span>${n} ${n === 1 ? "reply" : "replies"}</span></div>` },
    ...renderList(parent.replies || [], ctx, ch.id, true)]);
}

// poll reads the state in a loop; each read waits for a change.
async function poll() {
  let rev = -1;
  for (;;) {
    try {
      const r = await fetch(`/ui/state?rev=${rev}`, { cache: "no-store" });
      if (!r.ok) throw new Error(r.statusText);
      const st = await r.json();
      if (st.rev !== rev) {
        rev = st.rev;
        ui.state = st;
        render();
      }
      document.body.classList.remove("offline");
    } catch (e) {
      document.body.classList.add("offline");
      await new Promise(res => setTimeout(res, 1000));
    }
  }
}

async function post(path, body) {
  try {
    const r = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    const res = await r.json().catch(() => ({ ok: r.ok }));
    if (!res.ok) toast(res.error || r.statusText);
    return res;
  } catch (e) {
    toast("the stand-in did not answer: " + e.message);
    return { ok: false };
  }
}

function toast(text) {
  const t = $("#toast");
  t.textContent = text;
  t.hidden = false;
  clearTimeout(ui.toastTimer);
  ui.toastTimer = setTimeout(() => { t.hidden = true; }, 5000);
}

// confirmDialog shows a Block Kit confirm object; it resolves true on
// confirm, false on deny.
function confirmDialog(c, ctx) {
  return new Promise(resolve => {
    $("#confirm-title").innerHTML = textObject(c.title || { type: "plain_text", text: "Are you sure?" }, ctx);
    $("#confirm-text").innerHTML = textObject(c.text, ctx);
    const ok = $("#confirm-ok");
    ok.innerHTML = textObject(c.confirm || { type: "plain_text", text: "Yes" }, ctx);
    ok.className = "btn " + (c.style === "danger" ? "danger" : "primary");
    $("#confirm-deny").innerHTML = textObject(c.deny || { type: "plain_text", text: "Cancel" }, ctx);
    const back = $("#dialog-backdrop");
    back.hidden = false;
    ok.focus();
    const done = v => {
      back.hidden = true;
      ok.onclick = $("#confirm-deny").onclick = $("#confirm-x").onclick = back.onkeydown = null;
      resolve(v);
    };
    ok.onclick = () => done(true);
    $("#confirm-deny").onclick = $("#confirm-x").onclick = () => done(false);
    back.onkeydown = e => { if (e.key === "Escape") done(false); };
  });
}

async function clickButton(btn) {
  const d = btn.dataset;
  if (d.confirm && !(await confirmDialog(JSON.parse(d.confirm), ctxOf(ui.state)))) return;
  btn.classList.add("busy");
  btn.disabled = true;
  await post("/ui/click", { channel: d.channel, ts: d.ts || "", action_id: d.actionId, value: d.value || "" });
  btn.classList.remove("busy");
  btn.disabled = false;
}

document.addEventListener("click", e => {
  const t = e.target.closest("button, a");
  if (!t) return;
  if (t.dataset.actionId) { e.preventDefault(); clickButton(t); return; }
  if (t.dataset.thread) { ui.thread = t.dataset.thread; ui.threadStick = true; render(); return; }
  if (t.dataset.channel && t.classList.contains("nav-channel")) { ui.channel = t.dataset.channel; ui.thread = null; ui.stick = true; render(); return; }
  if (t.dataset.suggest) { const i = $("#command-input"); i.value = t.dataset.suggest; i.focus(); return; }
  if (t.classList.contains("dismiss")) { ui.dismissed.add(ui.channel + "/" + t.dataset.key); render(); return; }
  if (t.id === "thread-close") { ui.thread = null; render(); }
});

$("#command-form").addEventListener("submit", async e => {
  e.preventDefault();
  const input = $("#command-input");
  const text = input.value.trim();
  if (!text || !ui.channel) return;
  input.value = "";
  ui.history.push(text);
  ui.historyAt = ui.history.length;
  ui.stick = true; // show what the command brings
  stickToBottom();
  await post("/ui/command", { channel: ui.channel, text });
});

$("#command-input").addEventListener("keydown", e => {
  if (e.key !== "ArrowUp" && e.key !== "ArrowDown") return;
  if (!ui.history.length) return;
  e.preventDefault();
  ui.historyAt = Math.max(0, Math.min(ui.history.length, ui.historyAt + (e.key === "ArrowUp" ? -1 : 1)));
  e.target.value = ui.history[ui.historyAt] || "";
});

$("#messages").addEventListener("scroll", e => { ui.stick = nearBottom(e.target); });
$("#thread-body").addEventListener("scroll", e => { ui.threadStick = nearBottom(e.target); });
new ResizeObserver(stickToBottom).observe($("#messages"));
new ResizeObserver(stickToBottom).observe($("#thread-body"));
document.fonts.ready.then(stickToBottom);
poll();
$("#command-input").focus();
