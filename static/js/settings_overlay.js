// Settings over the chat (issue 43): the Settings page in a frame inside a modal dialog, so
// the chat behind stays as it was (its scroll, its draft, its live connection). While open,
// the address bar shows the section's own URL, which opens the page itself when loaded
// directly or without script. Esc, ×, a click beside it or Back close it, and the focus
// goes back to the link that opened it. Loaded on the first click on Settings (app.js).

let dialog = null, frame = null, opener = null, title = "";

function build() {
  dialog = document.createElement("dialog");
  dialog.id = "settings-overlay";
  dialog.className = "settings-overlay";
  dialog.setAttribute("aria-label", "Settings");
  document.body.append(dialog);
  // Esc while the focus is outside the frame (inside it, settings.js asks for the close).
  dialog.addEventListener("cancel", (event) => { event.preventDefault(); close(); });
  dialog.addEventListener("click", (event) => { if (event.target === dialog) close(); });
}

// A new frame each time, removed on close: navigating an old one away would add a step to
// Back, and nothing of Settings keeps running behind the chat.
function newFrame(url) {
  frame = document.createElement("iframe");
  frame.title = "Settings";
  frame.src = url;
  frame.addEventListener("load", () => {
    let here;
    try { here = frame.contentWindow.location; } catch (error) { return; }
    if (!dialog.open || here.href === "about:blank") return;
    history.replaceState({numiSettings: true}, "", here.pathname + here.search + here.hash);
    document.title = frame.contentDocument.title;
    frame.contentWindow.focus();
  });
  dialog.append(frame);
}

export function open(url, link) {
  if (!dialog) build();
  if (dialog.open) return;
  opener = link;
  title = document.title;
  newFrame(url);
  dialog.showModal();
  history.pushState({numiSettings: true}, "", url);
}

function close(fromHistory) {
  if (!dialog?.open) return;
  dialog.close();
  frame.remove();
  document.title = title;
  if (!fromHistory && history.state?.numiSettings) history.back();
  if (opener?.isConnected) opener.focus();
}

addEventListener("numi:settings-close", () => close());
addEventListener("popstate", () => { if (!history.state?.numiSettings) close(true); });
