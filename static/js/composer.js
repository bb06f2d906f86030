// The composer keeps text and chips until the server accepts the send (#composer-feedback),
// keeps a draft per chat, grows, and uploads files. File names are untrusted: textContent.

const Numi = window.Numi, {$, on, all} = Numi;
let sent = null, sentTimer = null;  // a send not yet answered
const form = () => $("composer"), input = () => $("composer-input"), chips = () => $("composer-attachments");
// Drafts and the outbox are kept per chat in localStorage; it may refuse (private mode,
// full): then they last as long as the page, which is all they are worth.
const stored = (kind) => form() && "numi:" + kind + ":" + form().getAttribute("data-chat-id");
function load(kind) {
  try { return JSON.parse(localStorage.getItem(stored(kind)) || "null"); } catch (e) { return null; }
}
function store(kind, value) {
  try {
    if (value) localStorage.setItem(stored(kind), JSON.stringify(value));
    else localStorage.removeItem(stored(kind));
  } catch (e) { /* see above */ }
}

function grow() {
  const box = input();
  if (!box) return;
  box.style.height = "auto";
  const visible = window.visualViewport ? visualViewport.height : innerHeight;
  box.style.height = Math.min(box.scrollHeight + 2, Math.round(visible * 0.4)) + "px";
}

function saveDraft() {
  if (!stored("draft")) return;
  const text = input().value;
  const list = [...chips().querySelectorAll(".attachment-chip[data-attachment-id]")].map(({dataset: d}) =>
    ({id: d.attachmentId, name: d.name, size: +d.size || 0, thumb: d.thumb || ""}));
  store("draft", text || list.length ? {text, chips: list} : null);
}
function restoreDraft() {
  const draft = load("draft");
  if (!draft || !input()) return;
  if (typeof draft.text === "string" && !input().value) input().value = draft.text;
  (Array.isArray(draft.chips) ? draft.chips : []).forEach((c) => {
    if (!c || !/^\d+$/.test(c.id)) return;
    const thumb = /^\/api\/attachments\/\d+\/thumbnail$/.test(c.thumb) ? c.thumb : "";
    uploaded(addChip(String(c.name || "file"), "", null, thumb), {id: c.id, size: +c.size || 0, thumbnail_url: thumb});
  });
}
function clearComposer() {
  input().value = "";
  chips().textContent = "";
  store("draft", null);
  grow();
}

function release() { sent = null; clearTimeout(sentTimer); }

// Sends while the socket is down wait in an outbox (kept in localStorage) with their
// request id set, shown as "waiting to send", and go out on reconnect; the server
// takes a request id once, so a resend after a lost answer is no duplicate.
function outbox(items) {
  if (items) store("outbox", items);
  return items || load("outbox") || [];
}
function queueOutbox(message) {
  outbox(outbox().concat([message]));
  clearComposer();
  showOutbox();
}
function showOutbox() {
  const list = $("outbox");
  if (!list) return;
  list.textContent = "";
  outbox().forEach((m) => {
    const li = list.appendChild(el("li", "queued"));
    const edit = el("button", "outbox-edit", "Edit"), remove = el("button", "outbox-remove", "Remove");
    for (const [button, label] of [[edit, "Edit"], [remove, "Remove"]]) {
      button.type = "button";
      button.dataset.requestId = m.request_id;
      button.setAttribute("aria-label", `${label} the waiting message: ${m.message.slice(0, 40)}`);
    }
    li.append(el("span", "queued-label", "Waiting to send"), el("span", "queued-text", m.message), edit, remove);
  });
}
// A waiting message can be taken back: Edit puts it in the box again, Remove drops it.
on("click", (event) => {
  const button = Numi.hit(event, ".outbox-edit, .outbox-remove");
  if (!button) return;
  const items = outbox(), item = items.find((m) => m.request_id === button.dataset.requestId);
  outbox(items.filter((m) => m !== item));
  showOutbox();
  if (item && button.classList.contains("outbox-edit")) {
    const box = input();
    box.value = box.value ? `${item.message}\n\n${box.value}` : item.message;
    box.dispatchEvent(new Event("input", {bubbles: true}));
    box.focus();
  }
});
// Lost before its answer: the send waits in the outbox too, and goes again (same id).
on("htmx:wsClose", () => {
  const lost = sent;
  if (!lost || !form()) return;
  release();
  queueOutbox(lost);
});
on("htmx:wsOpen", (event) => {
  if (form()) outbox().forEach((m) => event.detail.socketWrapper.sendImmediately(JSON.stringify(m)));
});

on("htmx:wsConfigSend", (event) => {
  const p = event.detail.parameters;
  if (p.type !== "send") return;
  if (!p.message || !p.message.trim() || sent || chips().querySelector(".uploading")) {
    event.preventDefault();
    return;
  }
  p.request_id = crypto.randomUUID ? crypto.randomUUID() : "r-" + Date.now() + Math.random().toString(36).slice(2);
  p.timezone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  p.tz_offset = -new Date().getTimezoneOffset();
  p.attachments = [].concat(p.attachments === undefined ? [] : p.attachments).map((id) => parseInt(id, 10));
  const asIs = all("[aria-pressed=true].redact-exempt").map((b) => b.dataset.value);
  if (asIs.length) p.exempt = asIs;
  delete event.detail.headers;
  $("composer-feedback").textContent = "";
  if (document.body.getAttribute("data-connection") !== "open") {
    event.preventDefault();
    queueOutbox(p);
    return;
  }
  sent = p;
  clearTimeout(sentTimer);
  sentTimer = setTimeout(release, 30000);  // no word at all: let the person try again
});

// Accepted empties the composer (or the outbox); a refusal leaves it, the reason beside it.
on("htmx:wsAfterMessage", () => {
  const feedback = $("composer-feedback"), accepted = feedback?.getAttribute("data-accepted");
  if (accepted) {
    feedback.removeAttribute("data-accepted");
    if (accepted === sent?.request_id) { all(".redact-exempt").forEach((b) => b.ariaPressed = false); release(); clearComposer(); }
    outbox(outbox().filter((m) => m.request_id !== accepted));
    showOutbox();
  } else if (feedback?.getAttribute("data-code") && sent) {
    release();
    input().focus();
  }
});

// Enter sends from the chat's composer and the home page's first-question box; on a touch
// screen Enter breaks the line and the send button sends, as in ChatGPT's mobile web.
on("keydown", (event) => {
  if (event.target.matches?.("[data-enter-sends]") && event.key === "Enter" && !event.shiftKey && !event.isComposing && !Numi.touch()) {
    event.preventDefault();
    event.target.form.requestSubmit();
  }
});
on("input", (event) => { if (event.target.id === "composer-input") { grow(); saveDraft(); } });
addEventListener("resize", grow);

function el(tag, className, text) {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}
function addChip(name, className, list, thumb) {
  const li = (list || chips()).appendChild(el("li", "attachment-chip " + className));
  li.dataset.name = name;
  if (thumb) li.appendChild(Object.assign(el("img", "chip-thumb"), {alt: "", src: thumb}));
  li.appendChild(el("span", "attachment-name", name));
  return li;
}
function uploaded(li, a) {
  li.classList.remove("uploading");
  li.dataset.attachmentId = a.id;
  li.dataset.size = a.size || 0;
  if (a.thumbnail_url) li.dataset.thumb = a.thumbnail_url;
  const remove = Object.assign(el("button", "attachment-remove", "×"), {type: "button"});
  remove.setAttribute("aria-label", "Remove " + li.dataset.name);
  li.append(
    el("span", "attachment-size", a.size < 1024 ? a.size + " bytes" : (a.size / 1024).toFixed(1) + " KB"),
    Object.assign(el("input", ""), {type: "hidden", name: "attachments", value: a.id}),
    remove);
}

// `list`, `url`: an edit form's chips and upload URL; by default the composer's.
function upload(files, list, url) {
  const own = !list;
  [...files].forEach((file) => {
    const li = addChip(file.name || "file", "uploading", list, /^image\//.test(file.type) ? URL.createObjectURL(file) : "");
    const body = new FormData();
    body.append("file", file, file.name || "pasted");
    fetch(url || form().dataset.uploadUrl, {method: "POST", body, credentials: "same-origin"})
      .then((r) => r.json().then((data) => {
        if (!r.ok) throw new Error(data.error?.message || "Upload failed.");
        uploaded(li, data.attachments[0]);
        if (own) saveDraft();
      }))
      .catch((error) => {
        li.className = "attachment-chip failed";
        li.querySelector(".attachment-name").textContent = (file.name || "file") + ": " + error.message;
        setTimeout(() => li.remove(), 8000);
      });
  });
}

on("click", (event) => {
  const remove = Numi.hit(event, ".attachment-remove"), chip = remove?.closest(".attachment-chip");
  if (Numi.hit(event, "#attach-button")) { $("composer-file").click(); closePlus(); }
  if (Numi.hit(event, "#composer-tools")) showTools();
  Numi.hit(event, ".edit-attach")?.closest("form").querySelector(".attach-input").click();
  if (!chip) return;
  const own = chip.closest("#composer");
  chip.remove();
  if (own) { saveDraft(); input().focus(); }
});
on("change", (event) => {
  const t = event.target;
  if (t.id === "composer-file") {
    upload(t.files);
    input().focus();
  } else if (t.classList.contains("attach-input")) {
    upload(t.files, t.closest("form").querySelector(".attach-chips"), t.dataset.uploadUrl);
  } else {
    return;
  }
  t.value = "";
});
const hasFiles = (event) => form() && [...event.dataTransfer?.types || []].includes("Files");
on("dragover", (event) => {
  if (!hasFiles(event)) return;
  event.preventDefault();
  form().classList.add("drop-target");
});
on("dragleave", () => form()?.classList.remove("drop-target"));
on("drop", (event) => {
  if (!hasFiles(event) || !event.dataTransfer.files.length) return;
  event.preventDefault();
  form().classList.remove("drop-target");
  upload(event.dataTransfer.files);
});
on("paste", (event) => {
  const files = event.target.id === "composer-input" && event.clipboardData?.files;
  if (files?.length) {
    event.preventDefault();
    upload(files);
  }
});

// The "+" menu. Tools opens the chat's settings at its tools.
function closePlus() { if ($("composer-plus")) $("composer-plus").open = false; }
function showTools() {
  closePlus();
  const tools = document.querySelector(".chat-tools");
  document.querySelectorAll("#chat-more, .chat-settings").forEach((d) => { d.open = true; });
  tools?.scrollIntoView({block: "nearest"});
  tools?.querySelector("input:not([type=hidden])")?.focus();
}

// The Enter hint is said until the first send from this browser.
const HINT = "numi:hint-seen", hideHint = () => { if ($("composer-hint")) $("composer-hint").hidden = true; };
on("htmx:wsConfigSend", (event) => {
  if (event.detail.parameters.type !== "send" || event.defaultPrevented) return;
  try { localStorage.setItem(HINT, "1"); } catch (e) { /* private mode */ }
  hideHint();
  closePlus();
});

on("DOMContentLoaded", () => {
  if (!form()) return;
  try { if (localStorage.getItem(HINT)) hideHint(); } catch (e) { /* private mode */ }
  restoreDraft(); showOutbox(); grow();
});

// Send as is once: a press toggles each mark of its value, sent as `exempt`.
on("click", (e) => {
  const b = Numi.hit(e, ".redact-exempt"), v = (m) => m.dataset.value.toLowerCase(), to = b?.ariaPressed !== "true";
  if (b) all(".redact-exempt").forEach((m) => v(m) === v(b) && (m.ariaPressed = to));
});

// A suggestion under the greeting (partials/_suggestions.html) fills its message box, caret at
// the end, and never sends: the user finishes the sentence.
on("click", (event) => {
  const chip = event.target.closest?.(".suggestion"), box = chip && $(chip.parentElement.dataset.fills);
  if (!box) return;
  box.value = chip.dataset.text;
  box.dispatchEvent(new Event("input", {bubbles: true}));
  box.focus();
  box.setSelectionRange(box.value.length, box.value.length);
});
