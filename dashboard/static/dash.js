// dlqbot dashboard: live updates without a reload. The replay page follows
// the replay's event stream (EventSource resumes with Last-Event-ID by
// itself); the replays' list refreshes its table every few seconds. The
// server renders everything else, and decides again on every action.
"use strict";

function setText(id, v) {
  const el = document.getElementById(id);
  if (el && v !== undefined && v !== null) el.textContent = String(v);
}

function show(r) {
  setText("sent", r.sent);
  setText("settled", r.settled);
  setText("returned", r.returned);
  setText("missing", r.missing || 0);
  setText("new_failures", r.new_failures || 0);
  setText("in_doubt", r.in_doubt || 0);
  setText("step", r.step);
  setText("left", Math.max(0, r.total - r.sent - (r.missing || 0) - (r.failed || 0) - (r.in_doubt || 0)));
  if (r.note !== undefined) setText("note", r.note || "");
  const p = document.getElementById("progress");
  if (p) { p.max = r.total || 1; p.value = r.sent; }
  const st = document.querySelector("#state .state");
  // The badge: a finished replay shows its verdict (dashboard/funcs.go badge).
  let cls = r.state, label = r.state;
  if (r.state === "finished" && r.verdict === "came_back") { cls = "came_back"; label = "finished · " + r.returned + " came back"; }
  else if (r.state === "finished" && r.verdict === "could_not_tell") { cls = "could_not_tell"; label = "finished · could not tell"; }
  else if (r.state === "finished") { label = "finished clean"; }
  if (st && st.textContent !== label) {
    st.textContent = label;
    st.className = "state st-" + cls;
    st.dataset.verdict = r.verdict || "";
    return true;
  }
  return false;
}

function clock(at) {
  const d = new Date(at);
  return isNaN(d) ? "" : d.toISOString().substring(11, 19);
}

function addStep(ev) {
  const list = document.getElementById("steps");
  if (!list) return;
  const li = document.createElement("li");
  li.className = "ev fresh ev-" + ev.kind;
  const t = document.createElement("time");
  t.textContent = clock(ev.at);
  const k = document.createElement("span");
  k.className = "kind";
  k.textContent = ev.kind;
  const x = document.createElement("span");
  x.className = "text";
  x.textContent = ev.text || "";
  li.append(t, k, x);
  list.prepend(li);
}

function refreshControls(id) {
  fetch("/dashboard/replays/" + encodeURIComponent(id) + "?part=controls", { credentials: "same-origin" })
    .then((r) => (r.ok ? r.text() : null))
    .then((html) => {
      const el = document.getElementById("controls");
      if (html !== null && el) el.outerHTML = html;
    })
    .catch(() => {});
}

const kinds = ["started", "step_started", "step_passed", "stopped", "paused", "resumed", "cancelled",
  "finished", "interrupted", "follow_up", "parked"];

function followReplay(el) {
  if (el.dataset.live !== "true" || !window.EventSource) return;
  const id = el.dataset.id;
  let url = "/dashboard/replays/" + encodeURIComponent(id) + "/events";
  if (el.dataset.lastEvent) url += "?after=" + encodeURIComponent(el.dataset.lastEvent);
  const es = new EventSource(url);
  const live = document.getElementById("live");
  es.addEventListener("replay", (m) => {
    if (show(JSON.parse(m.data))) refreshControls(id);
  });
  for (const kind of kinds) {
    es.addEventListener(kind, (m) => {
      el.dataset.seen = String(Number(el.dataset.seen || 0) + 1);
      const ev = JSON.parse(m.data);
      el.dataset.lastEvent = m.lastEventId;
      if (ev.kind !== "follow_up") addStep(ev);
      if (show(ev.replay)) refreshControls(id);
    });
  }
  es.addEventListener("end", () => {
    es.close();
    if (live) live.textContent = "ended";
    refreshControls(id);
  });
  es.onopen = () => { if (live) live.textContent = "live"; };
  es.onerror = () => { if (live && es.readyState !== EventSource.CLOSED) live.textContent = "reconnecting…"; };
}

function refreshList(every) {
  setInterval(() => {
    const q = new URLSearchParams(location.search);
    q.set("part", "replays");
    fetch("/dashboard/?" + q.toString(), { credentials: "same-origin" })
      .then((r) => (r.ok ? r.text() : null))
      .then((html) => {
        const el = document.getElementById("replays");
        if (html && el) el.outerHTML = html;
      })
      .catch(() => {});
  }, every);
}

// Start once everything above is defined (kinds is a const).
(function () {
  const replay = document.getElementById("replay");
  if (replay) followReplay(replay);
  const list = document.getElementById("replays");
  if (list && list.dataset.refresh) refreshList(Number(list.dataset.refresh));
})();
