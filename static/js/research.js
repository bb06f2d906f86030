// Research (partials/_research_toggle.html): the toggle shows when it is on, and one
// research run per send: after a research send the toggle is cleared, as ChatGPT's is.
const $ = (id) => document.getElementById(id);

function update() {
  const on = $("research-mode")?.checked;
  $("research-picker")?.toggleAttribute("data-active", Boolean(on));
}
document.addEventListener("change", (event) => {
  if (event.target.closest?.("#research-picker")) update();
});

document.addEventListener("htmx:wsConfigSend", (event) => {
  const p = event.detail.parameters;
  if (p.type !== "send" || p.mode !== "research" || event.defaultPrevented) return;
  $("research-mode").checked = false;
  $("research-picker").open = false;
  update();
});

// The elapsed time ticks between events on this page's clock (no polling): from the run's
// start as the server counts it (`data-started-at`, time the server was down left out) and
// the server's time when it drew the view (`data-now`), so a skewed clock does not show.
const TICKING = ".research-elapsed[data-started-at]";
let ticker = 0;

function tick() {
  const shown = document.querySelectorAll(TICKING);
  if (!shown.length) {
    clearInterval(ticker);
    ticker = 0;
  }
  const now = Date.now() / 1000;
  shown.forEach((el) => {
    const s = Math.max(0, Math.floor(now - Number(el.dataset.skew) - Number(el.dataset.startedAt)));
    el.textContent = `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")} elapsed`;
  });
}

function watch() {
  const now = Date.now() / 1000;
  const shown = document.querySelectorAll(TICKING);
  shown.forEach((el) => (el.dataset.skew ??= String(now - Number(el.dataset.now))));
  if (shown.length && !ticker) ticker = setInterval(tick, 1000);
}
["DOMContentLoaded", "htmx:wsAfterMessage", "htmx:oobAfterSwap"].forEach((name) =>
  document.addEventListener(name, watch),
);
