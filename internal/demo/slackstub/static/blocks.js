// blocks.js renders Block Kit as HTML: header, section (text, fields as a
// two-column grid, accessory), context, divider, image, actions (buttons
// with primary and danger styles and confirm dialogs) and rich_text. A
// block it does not know is shown as such, never dropped silently.
"use strict";

// renderBlocks renders a message's blocks; msg ({channel, ts, ephemeral})
// is what a button click is about.
function renderBlocks(blocks, ctx, msg) {
  return `<div class="blocks">${(blocks || []).map(b => renderBlock(b, ctx, msg)).join("")}</div>`;
}

function renderBlock(b, ctx, msg) {
  const id = b.block_id ? ` data-block-id="${escapeHTML(b.block_id)}"` : "";
  switch (b.type) {
    case "header":
      return `<div class="b-header"${id}>${textObject(b.text, ctx)}</div>`;
    case "section": {
      let html = "";
      if (b.text) html += `<div class="b-text">${textObject(b.text, ctx)}</div>`;
      if (b.fields && b.fields.length) {
        html += `<div class="b-fields">${b.fields.map(f => `<div class="b-field">${textObject(f, ctx)}</div>`).join("")}</div>`;
      }
      const acc = b.accessory ? `<div class="b-accessory">${renderElement(b.accessory, ctx, msg)}</div>` : "";
      return `<div class="b-section"${id}><div class="b-main">${html}</div>${acc}</div>`;
    }
    case "context":
      return `<div class="b-context"${id}>${(b.elements || []).map(e => e.type === "image"
        ? `<img class="ctx-img" src="${escapeHTML(e.image_url)}" alt="${escapeHTML(e.alt_text || "")}">`
        : `<span>${textObject(e, ctx)}</span>`).join("")}</div>`;
    case "divider":
      return `<hr class="b-divider"${id}>`;
    case "image":
      return `<figure class="b-image"${id}>${b.title ? `<figcaption>${textObject(b.title, ctx)}</figcaption>` : ""}` +
        `<img src="${escapeHTML(b.image_url)}" alt="${escapeHTML(b.alt_text || "")}"></figure>`;
    case "actions":
      return `<div class="b-actions"${id}>${(b.elements || []).map(e => renderElement(e, ctx, msg, b.block_id)).join("")}</div>`;
    case "rich_text":
      return `<div class="b-rich"${id}>${(b.elements || []).map(e => richElement(e, ctx)).join("")}</div>`;
    default:
      return `<div class="b-unknown"${id}>[${escapeHTML(b.type)} block]</div>`;
  }
}

// renderElement renders an interactive or image element.
function renderElement(e, ctx, msg, blockID) {
  if (e.type === "image") {
    return `<img class="acc-img" src="${escapeHTML(e.image_url)}" alt="${escapeHTML(e.alt_text || "")}">`;
  }
  if (e.type !== "button") {
    return `<span class="b-unknown">[${escapeHTML(e.type)}]</span>`;
  }
  const label = plainText(e.text && e.text.text, e.text && e.text.emoji);
  const style = e.style === "primary" || e.style === "danger" ? " " + e.style : "";
  if (e.url) {
    return `<a class="btn${style}" href="${escapeHTML(e.url)}" target="_blank" rel="noopener noreferrer">${label}</a>`;
  }
  const data = {
    "action-id": e.action_id, value: e.value || "", channel: msg.channel, ts: msg.ts || "",
    "block-id": blockID || "", confirm: e.confirm ? JSON.stringify(e.confirm) : "",
  };
  const attrs = Object.entries(data).filter(([, v]) => v !== "" && v != null)
    .map(([k, v]) => ` data-${k}="${escapeHTML(v)}"`).join("");
  return `<button type="button" class="btn${style}"${attrs}>${label}</button>`;
}

// richElement renders the parts of a rich_text block.
function richElement(e, ctx) {
  const inline = els => (els || []).map(x => {
    let t;
    switch (x.type) {
      case "text": t = escapeHTML(x.text).replace(/\n/g, "<br>"); break;
      case "link": t = `<a href="${escapeHTML(x.url)}" target="_blank" rel="noopener noreferrer">${escapeHTML(x.text || x.url)}</a>`; break;
      case "user": t = angleToken("@" + x.user_id, ctx); break;
      case "channel": t = angleToken("#" + x.channel_id, ctx); break;
      case "emoji": t = emojify(`:${x.name}:`); break;
      default: t = "";
    }
    const s = x.style || {};
    if (s.code) t = `<code>${t}</code>`;
    if (s.bold) t = `<b>${t}</b>`;
    if (s.italic) t = `<i>${t}</i>`;
    if (s.strike) t = `<s>${t}</s>`;
    return t;
  }).join("");
  switch (e.type) {
    case "rich_text_section": return `<div>${inline(e.elements)}</div>`;
    case "rich_text_preformatted": return `<pre class="code-block">${inline(e.elements)}</pre>`;
    case "rich_text_quote": return `<blockquote>${inline(e.elements)}</blockquote>`;
    case "rich_text_list": {
      const tag = e.style === "ordered" ? "ol" : "ul";
      return `<${tag}>${(e.elements || []).map(x => `<li>${inline(x.elements)}</li>`).join("")}</${tag}>`;
    }
    default: return "";
  }
}
