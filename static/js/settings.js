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
