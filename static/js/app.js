// The live page: connection and resume, scrolling, older pages, announcements, the tab
// title, Copy buttons. Loaded first, it makes `Numi`, all the modules share. They import
// nothing (an import's URL has no fingerprint: the file would load twice). No eval, no
// inline handlers.

const Numi = window.Numi = {
  $: (id) => document.getElementById(id),
  all: (selector) => [...document.querySelectorAll(selector)],
  on: document.addEventListener.bind(document),
  // The element matching `selector` that a delegated event came from, if any.
  hit: (event, selector) => event.target.closest?.(selector),
  narrow: () => matchMedia("(max-width: 760px)").matches,
  // A route the server rendered into the page (a data-*-url attribute, never a path written
  // here) with 0 in its id's place, in one of its last two segments: that 0 made `id`.
  urlFor: (template, id) => template.replace(/\/0(?=(\/[^/?]*)?(\?.*)?$)/, "/" + encodeURIComponent(id)),
  // A touch screen: focusing the message box there pops up the keyboard.
  touch: () => matchMedia("(pointer: coarse)").matches,
  isRunning: () => $("composer-controls")?.getAttribute("data-running") === "1",
  // Brings `el` to the middle of the transcript by scrolling the transcript alone
  // (scrollIntoView would move every scrollable box around it, the page's too).
  scrollTranscriptTo(el) {
    const t = $("transcript");
    if (!t || !el) return;
    const offset = el.getBoundingClientRect().top - t.getBoundingClientRect().top;
    t.scrollTop += offset - Math.max(0, (t.clientHeight - el.offsetHeight) / 2);
  },
  scrollToBottom() {
    const t = $("transcript");
    stick = true;
    if (t) t.scrollTop = t.scrollHeight;
    showJump(false);
  },
};
const {$, all, on} = Numi;
let stick = true, bannerTimer = null, loadingOlder = false, shownTitle = null;

function setConnection(state) {
  const dot = $("connection"), banner = $("connection-banner");
  if (dot) {
    dot.setAttribute("data-state", state);
    dot.setAttribute("aria-label", "Live connection: " + ({open: "connected", closed: "lost, reconnecting"}[state] || "connecting"));
  }
  document.body.setAttribute("data-connection", state);
  if (!banner) return;
  clearTimeout(bannerTimer);
  if (state === "closed") bannerTimer = setTimeout(() => { banner.hidden = false; }, 1000);
  else if (state === "open") banner.hidden = true;
}

// Each (re)connect says what the page shows; the server replays what it missed.
on("htmx:wsOpen", (event) => {
  const cursor = $("event-cursor"), turn = all("#transcript .turn[data-turn-id]").pop();
  const last = all("#transcript [data-message-id]").reduce((max, el) => Math.max(max, parseInt(el.getAttribute("data-message-id"), 10) || 0), 0);
  event.detail.socketWrapper.sendImmediately(JSON.stringify({
    type: "resume",
    last_event_id: cursor?.getAttribute("data-event-id") || null,
    last_message_id: last,
    turn_id: turn?.querySelector(".turn-live") ? turn.getAttribute("data-turn-id") : null,
  }));
  setConnection("open");
});
on("htmx:wsClose", (event) => { setConnection("closed"); scheduleReconnect(event); });
on("htmx:wsError", () => setConnection("closed"));

// Reconnecting: Numi's own timer, not the library's back-off of up to 64 s. A retry waits
// at most about 5 s (with jitter, so a restarted server is not hit by every tab at once),
// and goes at once when the network or the tab comes back, or on "Retry now". The
// library's own timer is told to wait for ever (the longest a browser timer can).
if (window.htmx) htmx.config.wsReconnectDelay = () => 2 ** 31 - 1;
let socket = null, retries = 0, retryTimer = null, connecting = 0;
on("htmx:wsOpen", (event) => {
  socket = event.detail.socketWrapper;
  retries = connecting = 0;
  clearTimeout(retryTimer);
  delete document.body.dataset.reconnect;
});
function scheduleReconnect(event) {
  socket = event.detail.socketWrapper;
  connecting = 0;
  const code = event.detail.event?.code;
  if (code === 1000 || !document.body.contains($("main"))) return;  // closed on purpose
  clearTimeout(retryTimer);
  const delay = Math.min(5000, 250 * 2 ** retries) * (0.6 + 0.4 * Math.random());
  retries += 1;
  retryTimer = setTimeout(reconnectNow, delay);
  // What the page is doing about it, for its tests and styles: waiting, or trying.
  Object.assign(document.body.dataset, {reconnect: "waiting", reconnectTries: retries});
}
function reconnectNow() {
  // One attempt at a time: a second would orphan the first socket, whose close would
  // later mark a live connection lost.
  // (An attempt still unanswered after 10 s is given up: the network may have gone.)
  if (!socket || Date.now() - connecting < 10000 || document.body.getAttribute("data-connection") === "open") return;
  clearTimeout(retryTimer);
  connecting = Date.now();
  document.body.dataset.reconnect = "trying";
  socket.reconnect();
}
Numi.reconnectNow = reconnectNow;
window.addEventListener("online", reconnectNow);
window.addEventListener("focus", reconnectNow);
on("visibilitychange", () => { if (document.visibilityState === "visible") reconnectNow(); });
on("click", (event) => { if (Numi.hit(event, "#reconnect-now")) reconnectNow(); });
on("htmx:wsConnecting", () => {
  if (document.body.getAttribute("data-connection") !== "closed") setConnection("connecting");
});

// Stop and approve carry only what they need, not the composer's text.
on("htmx:wsConfigSend", (event) => {
  const p = event.detail.parameters;
  if (p.type === "stop" || p.type === "approve") {
    delete p.message;
    delete p.attachments;
    delete event.detail.headers;
  } else if (p.type === "send") {
    Numi.scrollToBottom();
  }
});

const fromBottom = (t) => t.scrollHeight - t.scrollTop - t.clientHeight;
function showJump(visible) { if ($("jump-latest")) $("jump-latest").hidden = !visible; }

// Follow the answer at the bottom; scrolled up, leave the reader be and offer a way back.
on("scroll", (event) => {
  const t = event.target;
  if (t.id !== "transcript") return;
  stick = fromBottom(t) < 80;
  showJump(fromBottom(t) > 200);
  loadOlderIfNear(t);
}, true);
// Where the reader is when a frame arrives decides (a scroll event may still be on its way).
on("htmx:wsBeforeMessage", () => {
  if ($("transcript")) stick = fromBottom($("transcript")) < 80;
});
// A retry's answer replaces its failed answer in every tab, not only in the one that
// asked (that one has swapped its transcript already): the server names the failures.
const replaced = document.getElementsByClassName("replaced-versions");
on("htmx:wsAfterMessage", () => {
  const t = $("transcript");
  if (!t) return;
  for (const mark of [...replaced]) {
    for (const id of mark.dataset.ids.split(" ")) $("msg-" + id)?.remove();
    mark.remove();
  }
  if (stick) t.scrollTop = t.scrollHeight;
  else showJump(fromBottom(t) > 200);
  announceFinished();
  syncTitle();
});
// A regenerate, edit or retry answers with the transcript again and starts its turn once
// that answer is sent, so the turn's first events (or all of them, from a fast model on a
// busy machine) can reach the page on the socket before the answer is swapped in. The
// transcript was rendered before the turn began and cannot hold it: a turn that arrived
// while the request was out is carried through the swap, less any message the new
// transcript has too. Turns already on the page when the request left are not carried:
// the new transcript is the truth about them (a delete removes their messages).
const turnsNow = () => all("#transcript > .turn[data-turn-id]");
on("htmx:beforeRequest", (event) => {
  if (event.detail.target?.id === "transcript") event.detail.xhr.numiTurns = new Set(turnsNow());
});
on("htmx:beforeSwap", (event) => {
  const xhr = event.detail.xhr, before = xhr?.numiTurns;
  if (before && event.detail.target?.id === "transcript" && event.detail.shouldSwap) {
    xhr.numiArrived = turnsNow().filter((turn) => !before.has(turn));
  }
});
on("htmx:afterSwap", (event) => {
  const arrived = event.detail.xhr?.numiArrived, t = $("transcript");
  if (!arrived?.length || event.detail.target !== t) return;
  for (const turn of arrived) {
    if ($(turn.id)) continue;  // the new transcript has it already
    turn.querySelectorAll("[data-message-id]").forEach((el) => {
      if ($(el.id) && $(el.id) !== el) el.remove();
    });
    t.append(turn);
  }
  $("empty-chat")?.remove();
  if (stick) t.scrollTop = t.scrollHeight;
});

on("click", (event) => {
  if (!Numi.hit(event, "#jump-latest")) return;
  Numi.scrollToBottom();
  if (!Numi.touch()) $("composer-input")?.focus({preventScroll: true});
});

// Older messages: one page near the top, the reading position kept.
function loadOlderIfNear(t) {
  const sentinel = t.querySelector(":scope > .load-older");
  if (!sentinel || loadingOlder || t.scrollTop > 400) return;
  loadingOlder = true;
  fetch(sentinel.getAttribute("data-older-url"), {headers: {"HX-Request": "true"}, credentials: "same-origin"})
    .then((r) => { if (!r.ok) throw new Error(r.status); return r.text(); })
    .then((html) => {
      const anchor = sentinel.nextElementSibling, before = anchor ? anchor.getBoundingClientRect().top : 0;
      window.htmx.swap(sentinel, html, {swapStyle: "outerHTML"});
      if (anchor) t.scrollTop += anchor.getBoundingClientRect().top - before;
      markAnnounced();
      loadingOlder = false;
      if (t.scrollHeight <= t.clientHeight) loadOlderIfNear(t);  // not scrollable yet
    })
    .catch(() => setTimeout(() => { loadingOlder = false; }, 3000));
}

// --- each answer announced once, complete ---

const ANSWERS = "#transcript .msg-assistant[data-message-id]";
function markAnnounced() {
  all(ANSWERS).forEach((el) => el.setAttribute("data-announced", ""));
}
function announceFinished() {
  const texts = [];
  all(ANSWERS + ":not([data-announced])").forEach((el) => {
    el.setAttribute("data-announced", "");
    const text = el.querySelector(".msg-body")?.textContent.trim();
    if (text) texts.push(text);
  });
  if (texts.length && $("answer-announcer")) $("answer-announcer").textContent = "Answer: " + texts.join("\n").slice(0, 4000);
}

// --- the tab title follows the chat's title (auto-title, rename, other tabs) ---

const channel = window.BroadcastChannel ? new BroadcastChannel("numi-chats") : null;
const chatId = () => $("transcript")?.getAttribute("data-chat-id");
function applyTitle(id, title) {
  all("#chat-" + CSS.escape(id) + " .chat-link-title").forEach((el) => {
    if (el.textContent !== title) el.textContent = title;
  });
  const heading = $("chat-title");
  if (id !== chatId() || !heading) return;
  if (heading.textContent !== title) heading.textContent = heading.title = title;
  shownTitle = title;
  document.title = title + " · Numi";
}
Numi.broadcastTitle = (id, title) => {
  if (channel && id && title) channel.postMessage({type: "title", chat: id, title});
};
function syncTitle() {
  const title = $("chat-title")?.textContent.trim();
  if (!title || title === shownTitle) return;
  applyTitle(chatId(), title);
  Numi.broadcastTitle(chatId(), title);
}
if (channel) channel.onmessage = ({data}) => {
  if (data?.type === "title" && typeof data.chat === "string" && typeof data.title === "string") applyTitle(data.chat, data.title);
};
on("htmx:afterSettle", syncTitle);

on("htmx:afterSwap", (event) => {  // toasts go away after a while
  const toasts = event.detail?.target;
  if (toasts?.id === "toasts") setTimeout(() => toasts.firstElementChild?.remove(), 6000);
});
on("htmx:oobAfterSwap", (event) => {  // a toast that came beside another answer (Undo)
  const toasts = event.detail?.target;
  if (toasts?.id === "toasts") setTimeout(() => toasts.firstElementChild?.remove(), 6000);
});
// A toast the page came with (the Undo of the open chat just deleted) too; the address
// loses its `deleted`, so a reload does not offer the Undo again.
if ($("toasts")?.firstElementChild) setTimeout(() => $("toasts").firstElementChild?.remove(), 6000);
if (new URLSearchParams(location.search).has("deleted")) history.replaceState(history.state, "", location.pathname);

// The page takes the visible height: the composer stays above an on-screen keyboard.
if (window.visualViewport) {
  const fit = () => document.documentElement.style.setProperty("--app-height", visualViewport.height + "px");
  visualViewport.addEventListener("resize", fit);
  fit();
}

on("DOMContentLoaded", () => {
  const target = location.hash.startsWith("#msg-") && $(location.hash.slice(1)), t = $("transcript");
  markAnnounced();
  shownTitle = $("chat-title")?.textContent.trim();
  if (target) {
    stick = false;
    Numi.scrollTranscriptTo(target);
    // Again once the page has laid out what loaded after it (older pages, math, fonts).
    requestAnimationFrame(() => Numi.scrollTranscriptTo(target));
    target.classList.add("jumped");
  } else {
    Numi.scrollToBottom();
  }
  if (t && t.scrollHeight <= t.clientHeight) loadOlderIfNear(t);
  if ($("composer-input") && !Numi.narrow()) $("composer-input").focus({preventScroll: true});
});

// --- Modules loaded on first use, from the fingerprinted URL in their page's meta tag: Voice
// (static/js/voice.js) on the first use of the microphone or Read aloud, Artifacts
// (static/js/artifacts.js) on the first Preview. Most visits use neither. The click that
// asked for one is repeated once it is there; the module then handles that click and all
// the later ones itself.
function loadOnFirstUse(selector, metaName) {
  let module = null;
  on("click", (event) => {
    const target = Numi.hit(event, selector);
    const url = document.querySelector(`meta[name=${metaName}]`)?.content;
    if (!target || !url || module === "ready") return;
    event.stopImmediatePropagation();
    // The click is repeated once the module is in, unless the page swapped the button out
    // meanwhile (a streamed answer replaced by its saved copy): a detached button's click
    // reaches no listener, so a module that exports `activate` is handed it directly.
    module = module || import(url).then((loaded) => {
      module = "ready";
      if (!target.isConnected && loaded.activate) loaded.activate(target);
      else target.click();
    }, () => { module = null; });
  });
}
loadOnFirstUse("#mic-button, .read-aloud", "numi-voice-module");
loadOnFirstUse(".preview-artifact", "numi-artifacts-module");

// Settings opens over the chat (static/js/settings_overlay.js, on first use); its link keeps
// its address, for a new tab, a middle click and no script.
on("click", (event) => {
  const link = Numi.hit(event, "a.settings-link");
  const url = document.querySelector("meta[name=numi-settings-module]")?.content;
  if (!link || !url || event.button || event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) return;
  event.preventDefault();
  import(url).then((overlay) => overlay.open(link.href, link), () => { location.href = link.href; });
});

// --- Copy buttons ---
// A code block's text (.copy-code, partials/_md_blocks.html) or a message's markdown
// source (.copy-message, its data-markdown); delegated, so streamed buttons work too.

function copy(text) {
  if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
  // Pages served over plain http on another host have no Clipboard API.
  const area = Object.assign(document.createElement("textarea"), {value: text, readOnly: true});
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.appendChild(area);
  area.select();
  const ok = document.execCommand("copy");
  area.remove();
  return ok ? Promise.resolve() : Promise.reject(new Error("copy refused"));
}

// An icon button (a message's Copy) says it beside its icon, a check in place of the icon.
Numi.say = (button, label, state) => {
  const text = button.querySelector(".action-label") || button;
  button.dataset.label = button.dataset.label || text.textContent;
  text.textContent = label || button.dataset.label;
  button.classList.toggle("says", Boolean(label));
  button.classList.remove("copied", "playing");
  if (label && state) button.classList.add(state);
};
function showCopied(button, label) {
  Numi.say(button, label, label === "Copied" ? "copied" : null);
  clearTimeout(button.copyTimer);
  button.copyTimer = setTimeout(() => Numi.say(button, null), 1500);
}

// Copies `text` and says so on `button` (the artifact panel's Copy uses it too).
Numi.copyWithFeedback = (text, button) =>
  copy(text).then(() => showCopied(button, "Copied"), () => showCopied(button, "Copy failed"));

on("click", (event) => {
  const button = Numi.hit(event, ".copy-code, .copy-message");
  if (!button) return;
  const pre = button.classList.contains("copy-code") && button.closest(".code-block").querySelector("pre");
  Numi.copyWithFeedback(pre ? pre.textContent : button.dataset.markdown || "", button);
});

// No hover on touch: a tap on a message shows its actions (messages.css).
on("click", (event) => {
  if (!matchMedia("(hover: none)").matches || !event.target.closest) return;
  const msg = event.target.closest("#transcript .msg");
  if (msg && event.target.closest("a, button, summary, input, textarea, select, label")) return;
  all("#transcript .msg.tapped").forEach((m) => m !== msg && m.classList.remove("tapped"));
  msg?.classList.add("tapped");
});

// --- markdown: wide blocks and footnotes ---
// A code block, table or formula wider than its message scrolls sideways: it then takes the
// focus, with a name, so a keyboard can scroll it too (checked once a frame after changes).
let scanQueued = false;
function markScrollable() {
  scanQueued = false;
  all(".md pre, .md table, .md .math-block").forEach((el) => {
    const wide = el.scrollWidth > el.clientWidth + 1;
    if (wide === (el.getAttribute("tabindex") === "0")) return;
    if (!wide) return el.removeAttribute("tabindex");
    const kind = el.tagName === "TABLE" ? "Table" : el.tagName === "PRE" ? (el.closest(".code-block")?.querySelector(".code-lang")?.textContent || "Code") : "Formula";
    if (el.tagName !== "TABLE") el.setAttribute("role", "group");
    el.setAttribute("aria-label", kind + ", scrolls sideways");
    el.tabIndex = 0;
  });
}
const queueScan = () => { if (!scanQueued) { scanQueued = true; requestAnimationFrame(markScrollable); } };
["DOMContentLoaded", "htmx:afterSettle", "htmx:wsAfterMessage"].forEach((name) => on(name, queueScan));
addEventListener("resize", queueScan);

// A footnote reference leads to its note in the same message, and the note's ↩ back to it.
on("click", (event) => {
  const link = Numi.hit(event, ".md .footnote-ref a, .md .footnote-back");
  if (!link) return;
  const back = link.matches(".footnote-back"), href = link.getAttribute("href");
  const label = href.slice(back ? 7 : 4), want = back ? "#fn-" + label : "#fnref-" + label;
  const found = [...link.closest(".md").querySelectorAll(back ? ".footnote-ref a" : ".footnote-back")].find((a) => a.getAttribute("href") === want);
  const target = back ? found : found?.closest(".footnote");
  event.preventDefault();
  if (!target) return;
  if ($("transcript")?.contains(target)) Numi.scrollTranscriptTo(target);
  if (!back) target.tabIndex = -1;
  target.focus({preventScroll: true});
});
