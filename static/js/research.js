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
