// The context panel: the gauge above the composer opens it (#context-panel), filled with
// what the next request carries (GET /c/<chat>/context_panel). It reloads when the
// context changes (a turn ended, a message left out or brought back) while it is open,
// and closes with its ✕, Escape, or the gauge again. No eval, no inline handlers.

const panel = () => document.getElementById("context-panel");
const gaugeButton = () => document.querySelector("#context-gauge .gauge-button");

function load() {
  const button = gaugeButton(), target = panel();
  if (!button || !target || !window.htmx) return;
  window.htmx.ajax("GET", button.getAttribute("data-panel-url"), {target: "#context-panel", swap: "innerHTML"});
}

function setOpen(open) {
  const target = panel(), button = gaugeButton();
  if (!target) return;
  target.hidden = !open;
  button?.setAttribute("aria-expanded", open ? "true" : "false");
  if (open) load();
  else button?.focus();
}

document.addEventListener("click", (event) => {
  if (event.target.closest?.("#context-gauge .gauge-button")) setOpen(panel()?.hidden ?? false);
  else if (event.target.closest?.("#context-panel-close")) setOpen(false);
});

// Capture phase, default prevented: Escape in the panel closes it and does not also stop
// a running answer (shortcuts.js leaves prevented keys alone).
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && panel() && !panel().hidden && panel().contains(document.activeElement)) {
    event.preventDefault();
    setOpen(false);
  }
}, true);

// The gauge is swapped whole after each change: keep its button's state and the focus on
// it (a swap over the WebSocket does not restore focus the way htmx's own swaps do), and
// refresh the open panel with it.
let gaugeFocused = false;
document.addEventListener("focusin", (event) => {
  gaugeFocused = Boolean(event.target.closest?.("#context-gauge"));
});
document.addEventListener("htmx:load", (event) => {
  if (event.detail?.elt?.id !== "context-gauge" || !gaugeButton()) return;
  const open = panel() && !panel().hidden;
  gaugeButton()?.setAttribute("aria-expanded", open ? "true" : "false");
  if (gaugeFocused && (!document.activeElement || document.activeElement === document.body)) {
    gaugeButton().focus();
  }
  if (open) load();
});

// A reload of the panel (after leaving a message out, or after a turn) keeps the parts the
// reader had open, and the focus in the panel.
let openKinds = null;
document.addEventListener("htmx:beforeSwap", (event) => {
  if (event.detail?.target?.id !== "context-panel") return;
  openKinds = [...panel().querySelectorAll(".context-part details[open]")]
    .map((details) => details.closest(".context-part")?.getAttribute("data-kind"));
});
document.addEventListener("htmx:afterSwap", (event) => {
  if (event.detail?.target?.id !== "context-panel" || !openKinds) return;
  const hadFocus = panel().contains(document.activeElement) || document.activeElement === document.body;
  for (const kind of openKinds) {
    const details = panel().querySelector(`.context-part[data-kind="${kind}"] details`);
    if (details) details.open = true;
  }
  if (hadFocus && openKinds.length) {
    panel().querySelector(`.context-part[data-kind="${openKinds[openKinds.length - 1]}"] summary`)?.focus();
  }
  openKinds = null;
});
