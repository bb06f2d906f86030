// Settings → Appearance: a theme applies on click; its form (hx-trigger="change") saves it.
document.addEventListener("change", (event) => {
  const radio = event.target;
  if (!radio.matches?.(".theme-choice input[name=theme]")) return;
  document.documentElement.setAttribute("data-theme", radio.value);
  document.querySelector("meta[name=color-scheme]")?.setAttribute("content", radio.value === "system" ? "light dark" : radio.value);
});

// Usage → Budgets: a time zone field left empty starts as the browser's own zone.
const fillZones = (root) => root.querySelectorAll?.("input[data-browser-timezone]").forEach((input) => {
  if (!input.value) input.value = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
});
fillZones(document);
document.addEventListener("htmx:load", (event) => fillZones(event.detail.elt));

// Settings → Import: another file chosen makes the shown preview (and its Import button,
// which would send the new file) stale, so it goes.
document.addEventListener("change", (event) => {
  if (!event.target.matches?.("#import-form input[type=file]")) return;
  document.getElementById("import-preview")?.replaceChildren();
});

// Drawn in the overlay's frame (settings.html, static/js/settings_overlay.js): × and Esc close
// the overlay; another section replaces this one rather than adding a step to Back; a link or
// form that leaves Settings opens in the window, not in the frame.
const framed = () => {
  try { return window.parent !== window && !!window.parent.document.getElementById("settings-overlay"); } catch (error) { return false; }
};
if (framed()) {
  document.body.classList.add("settings-embedded");
  const root = document.getElementById("main").dataset.settingsRoot;
  const inSettings = (url) => new URL(url, location.href).pathname.startsWith(root);
  const close = () => window.parent.dispatchEvent(new Event("numi:settings-close"));
  document.addEventListener("click", (event) => {
    const link = event.target.closest?.("a[href]");
    if (!link || event.defaultPrevented || event.button || event.ctrlKey || event.metaKey || event.shiftKey) return;
    if (link.matches(".settings-close")) { event.preventDefault(); close(); }
    else if (link.target === "_blank" || link.hasAttribute("download")) return;
    else if (inSettings(link.href)) { event.preventDefault(); location.replace(link.href); }
    else link.target = "_top";
  });
  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (!inSettings(form.action)) form.target = "_top";
  }, true);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !event.defaultPrevented && !event.target.closest?.("dialog[open], details[open]")) close();
  });
  // A theme chosen here is the chat's behind too.
  document.addEventListener("change", (event) => {
    if (!event.target.matches?.(".theme-choice input[name=theme]")) return;
    window.parent.document.documentElement.setAttribute("data-theme", event.target.value);
  });
}
