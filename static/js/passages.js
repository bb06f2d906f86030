// A citation of a document passage (a `passage-link`, or a marker [n] leading where one
// does) opens it in #passage-panel (without script: as a page). ✕ or Escape close it.
const {$} = window.Numi;
let opener = null;

function passageLink(link) {
  if (!link?.closest("#transcript")) return null;
  const href = link.getAttribute("href"), message = link.closest("[data-message-id]");
  const known = [...(message?.querySelectorAll("a.passage-link") || [])];
  return known.some((a) => a.getAttribute("href") === href) ? link : null;
}

function setOpen(open) {
  $("passage-panel").hidden = !open;
  document.querySelector(".layout")?.classList.toggle("passage-open", open);
  if ($("main")) $("main").inert = open && window.Numi.narrow();  // a phone's sheet
  if (!open && opener?.isConnected) opener.focus();
}

document.addEventListener("click", (event) => {
  if (event.target.closest?.("#passage-panel-close")) return setOpen(false);
  const link = passageLink(event.target.closest?.("a[href]"));
  if (!link || !$("passage-panel") || !window.htmx || event.button || event.metaKey || event.ctrlKey) return;
  event.preventDefault();
  opener = link;
  setOpen(true);
  $("passage-panel-body").focus();
  window.htmx.ajax("GET", link.getAttribute("href"), {target: "#passage-panel-body", swap: "innerHTML"});
});

// Captured and prevented: Escape does not also stop a running answer.
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && $("passage-panel")?.contains(document.activeElement) && !$("passage-panel").hidden) {
    event.preventDefault();
    setOpen(false);
  }
}, true);
