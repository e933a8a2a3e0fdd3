// mrkdwn.js renders Slack's mrkdwn and plain_text as HTML: *bold*,
// _italic_, ~strike~, `code`, ```code blocks```, > quotes, <url|label>
// links, <@U…> mentions, <#C…> channels, <!date^…> dates, <!here>,
// :emoji: and line breaks. Text arrives escaped the Slack way (&amp;
// &lt; &gt;); everything is escaped again for HTML before it is shown.
"use strict";

const EMOJI = {
  arrow_forward: "▶️", black_square_for_stop: "⏹️", checkered_flag: "🏁", double_vertical_bar: "⏸️",
  ghost: "👻", grey_question: "❔", hourglass_flowing_sand: "⏳", information_source: "ℹ️", mag: "🔍",
  no_entry_sign: "🚫", octagonal_sign: "🛑", parking: "🅿️", repeat: "🔁", rotating_light: "🚨", zzz: "💤",
  warning: "⚠️", wastebasket: "🗑️", white_check_mark: "✅", x: "❌", zap: "⚡", tada: "🎉",
  eyes: "👀", robot_face: "🤖", wave: "👋", bulb: "💡", lock: "🔒", hourglass: "⌛", fire: "🔥",
  heavy_check_mark: "✔️", point_right: "👉", memo: "📝", inbox_tray: "📥", outbox_tray: "📤",
  rewind: "⏪", fast_forward: "⏩", stopwatch: "⏱️", speech_balloon: "💬", thumbsup: "👍", "+1": "👍",
  red_circle: "🔴", large_green_circle: "🟢", large_yellow_circle: "🟡", white_circle: "⚪",
  chart_with_upwards_trend: "📈", handshake: "🤝", raising_hand: "🙋",
};

function escapeHTML(s) {
  return String(s).replace(/[&<>"']/g, c => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

// unescapeSlack undoes Slack's three escapes.
function unescapeSlack(s) {
  return s.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
}

function emojify(html) {
  return html.replace(/:([a-z0-9_+\-]+):/g, (m, name) => EMOJI[name] ? `<span class="emoji" title=":${name}:">${EMOJI[name]}</span>` : m);
}

// plainText renders a plain_text object's text (emoji when asked).
function plainText(text, emoji) {
  const html = escapeHTML(text || "");
  return emoji === false ? html : emojify(html);
}

const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];

// slackDate renders <!date^ts^format|fallback> in the reader's time zone.
function slackDate(ts, format) {
  const d = new Date(ts * 1000);
  if (isNaN(d)) return null;
  const now = new Date();
  const day = x => new Date(x.getFullYear(), x.getMonth(), x.getDate()).getTime();
  const diff = Math.round((day(now) - day(d)) / 864e5);
  const pretty = full => diff === 0 ? "Today" : diff === 1 ? "Yesterday" : diff === -1 ? "Tomorrow" : full;
  const pad = n => String(n).padStart(2, "0");
  const short = `${MONTHS[d.getMonth()].slice(0, 3)} ${d.getDate()}, ${d.getFullYear()}`;
  const long = `${MONTHS[d.getMonth()]} ${d.getDate()}, ${d.getFullYear()}`;
  const parts = {
    date_num: `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`,
    date: long, date_short: short, date_long: `${d.toLocaleDateString(undefined, { weekday: "long" })}, ${long}`,
    date_pretty: pretty(long), date_short_pretty: pretty(short), date_long_pretty: pretty(long),
    time: d.toLocaleTimeString(undefined, { hour: "numeric", minute: "2-digit" }),
    time_secs: d.toLocaleTimeString(undefined, { hour: "numeric", minute: "2-digit", second: "2-digit" }),
    ago: agoText(Date.now() - d.getTime()),
  };
  return format.replace(/\{(\w+)\}/g, (m, k) => parts[k] ?? m);
}

function agoText(ms) {
  const s = Math.round(ms / 1000);
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.round(s / 60)} minutes ago`;
  if (s < 86400) return `${Math.round(s / 3600)} hours ago`;
  return `${Math.round(s / 86400)} days ago`;
}

// angleToken renders the inside of a <…> token.
function angleToken(tok, ctx) {
  const bar = tok.indexOf("|");
  const target = bar < 0 ? tok : tok.slice(0, bar);
  const label = bar < 0 ? "" : unescapeSlack(tok.slice(bar + 1));
  if (target.startsWith("@")) {
    const id = target.slice(1);
    const name = (ctx.users && ctx.users[id]) || label.replace(/^@/, "") || id;
    const me = id === ctx.me ? " me" : "";
    return `<span class="mention${me}" data-user="${escapeHTML(id)}">@${escapeHTML(name)}</span>`;
  }
  if (target.startsWith("#")) {
    const id = target.slice(1);
    const name = label || (ctx.channels && ctx.channels[id]) || id;
    return `<span class="mention channel">#${escapeHTML(name)}</span>`;
  }
  if (target.startsWith("!date^")) {
    const [, ts, format] = target.split("^");
    const text = slackDate(Number(ts), unescapeSlack(format || "{date_short_pretty} {time}"));
    return `<time title="${escapeHTML(label)}">${escapeHTML(text ?? label)}</time>`;
  }
  if (target.startsWith("!subteam^")) {
    return `<span class="mention">${escapeHTML(label || "@" + target.slice(9))}</span>`;
  }
  if (target.startsWith("!")) {
    return `<span class="mention here">@${escapeHTML(target.slice(1))}</span>`;
  }
  const url = unescapeSlack(target);
  if (/^(https?:|mailto:)/i.test(url)) {
    return `<a href="${escapeHTML(url)}" target="_blank" rel="noopener noreferrer">${escapeHTML(label || url)}</a>`;
  }
  return escapeHTML("<" + unescapeSlack(tok) + ">");
}

// codeText renders code: Slack's escapes undone, tokens shown by their
// labels, nothing else formatted.
function codeText(s, ctx) {
  let out = "";
  let last = 0;
  s.replace(/<([^<>\n]+)>/g, (m, tok, at) => {
    out += escapeHTML(unescapeSlack(s.slice(last, at))) + angleToken(tok, ctx);
    last = at + m.length;
    return m;
  });
  return out + escapeHTML(unescapeSlack(s.slice(last)));
}

// mrkdwn renders mrkdwn text; ctx gives user names (users), the reader's
// id (me) and channel names (channels).
function mrkdwn(text, ctx) {
  const slots = [];
  const hold = html => "\u0000" + (slots.push(html) - 1) + "\u0001";
  let s = String(text || "");
  s = s.replace(/```\n?([\s\S]*?)```/g, (_, code) => hold(`<pre class="code-block">${codeText(code, ctx)}</pre>`));
  s = s.replace(/`([^`\n]+)`/g, (_, code) => hold(`<code>${codeText(code, ctx)}</code>`));
  s = s.replace(/<([^<>\n]+)>/g, (_, tok) => hold(angleToken(tok, ctx)));
  s = escapeHTML(unescapeSlack(s));
  const open = "(^|[\\s(\\[{\"'\\u0001*_~])";
  const close = "(?=$|[\\s)\\]}.,;:!?\"'\\u0000*_~])";
  s = s.replace(new RegExp(open + "\\*(?!\\s)([^*\\n]*?[^\\s*])\\*" + close, "gm"), "$1<b>$2</b>");
  s = s.replace(new RegExp(open + "_(?!\\s)([^_\\n]*?[^\\s_])_" + close, "gm"), "$1<i>$2</i>");
  s = s.replace(new RegExp(open + "~(?!\\s)([^~\\n]*?[^\\s~])~" + close, "gm"), "$1<s>$2</s>");
  s = s.replace(/(^|\n)&gt; ?([^\n]*)/g, "$1<blockquote>$2</blockquote>");
  s = emojify(s);
  s = s.replace(/<\/blockquote>\n/g, "</blockquote>").replace(/\n/g, "<br>");
  for (let i = 0; i < 3 && s.includes("\u0000"); i++) s = s.replace(/\u0000(\d+)\u0001/g, (_, n) => slots[n]);
  return s;
}

// textObject renders a Block Kit text object.
function textObject(t, ctx) {
  if (!t) return "";
  return t.type === "mrkdwn" ? mrkdwn(t.text, ctx) : plainText(t.text, t.emoji);
}
