// Keyboard shortcuts (listed in _shortcuts_dialog.html), menus that close on Esc and an
// outside click, and focus that goes back to an opener or on to the next natural control.

const Numi = window.Numi, {$, all, on} = Numi;
let opener = null, controlsHadFocus = false, swapFrom = null;
const openMenus = () => all("details.menu[open], details.regenerate-model[open]");
const isTextField = (el) => /^(TEXTAREA|SELECT)$/.test(el.tagName) || el.isContentEditable ||
  (el.tagName === "INPUT" && !/^(button|checkbox|radio|submit|reset|file|range|color)$/i.test(el.type));
const focusLost = () => !document.activeElement || document.activeElement === document.body;
function click(el) { if (el) el.click(); return !!el; }
// The Cancel of the rename or message edit `t` is in, if any.
// (Processed first: an Esc within htmx's settle delay of the form appearing would click a
// button htmx has not bound yet, and nothing would happen.)
const cancelOf = (t) => {
  const cancel = t.closest(".rename-form, .msg-editing")?.querySelector(".rename-cancel, .edit-cancel");
  if (cancel && window.htmx) htmx.process(cancel);
  return cancel;
};

on("close", (event) => {
  if (event.target.id !== "shortcuts-dialog") return;
  const back = opener && opener.isConnected ? opener : $("composer-input");
  if (back) back.focus();
}, true);

on("keydown", (event) => {
  const t = event.target, mod = event.ctrlKey || event.metaKey, key = event.key;
  if (event.defaultPrevented || event.isComposing || !t.closest || t.closest("dialog[open]")) return;
  if (key === "Escape" && t.closest("#sidebar-search")) {
    event.preventDefault();
    closeSearch();
  } else if (key === "Escape") {
    // The innermost open menus only (a row of the header's "…" before the "…").
    const menus = openMenus().filter((d) => !d.querySelector("details.menu[open], details.regenerate-model[open]"));
    if (menus.length) {
      event.preventDefault();
      menus.forEach((d) => {
        d.open = false;
        if (d.contains(t) || t === document.body) d.querySelector("summary").focus();
      });
    } else if (!click(cancelOf(t)) && Numi.isRunning() && click($("stop-button"))) {
      event.preventDefault();
    }
  } else if (mod && event.shiftKey && key.toLowerCase() === "o") {
    event.preventDefault();
    $("new-chat")?.form.requestSubmit();
  } else if (mod && !event.shiftKey && key.toLowerCase() === "k") {
    const search = $("chat-search");
    event.preventDefault();
    if (!search) return;
    $("search-toggle").open = true;
    if (Numi.narrow() && !Numi.drawerOpen()) Numi.openDrawer(search);
    else { search.focus(); search.select(); }
  } else if (key === "ArrowUp" && !mod && !event.shiftKey && !event.altKey && t.id === "composer-input" &&
             t.value === "" && !Numi.isRunning()) {
    if (click(all("#transcript .msg-user .action-edit").pop())) event.preventDefault();
  } else if (key === "?" && !mod && !isTextField(t) && $("shortcuts-dialog")) {
    event.preventDefault();
    opener = document.activeElement;
    $("shortcuts-dialog").showModal();
    $("shortcuts-close").focus();
  }
});

// The sidebar's search: its icon opens the box, which takes the focus; Esc empties it (the
// list comes back whole) and closes it back to the icon.
on("toggle", (event) => {
  if (event.target.id === "search-toggle" && event.target.open) $("chat-search")?.focus();
}, true);
// The box searches on input; its change (on blur, as a result is clicked) would search again
// and swap the list under the click.
on("change", (event) => {
  if (event.target.id === "chat-search") event.stopPropagation();
}, true);
function closeSearch() {
  const search = $("chat-search"), toggle = $("search-toggle");
  if (search.value) {
    search.value = "";
    search.form.requestSubmit();
  }
  toggle.open = false;
  toggle.querySelector("summary").focus();
}

// An outside click closes open menus.
on("click", (event) => openMenus().forEach((d) => { if (!d.contains(event.target)) d.open = false; }));

// A rename or edit field that appears takes the focus. A rename or an edit that put back
// its item sends focus to the item's natural control (the focused field is gone), and other
// tabs hear the chat's new title.
on("htmx:beforeRequest", (event) => {
  swapFrom = event.detail.elt.closest?.(".chat-item, .msg-editing")?.id;
});
on("htmx:load", (event) => {
  const elt = event.detail.elt;
  if (!elt.querySelector) return;
  const field = elt.querySelector(".rename-form input[name=title]") ||
    (elt.matches(".msg-editing") ? elt.querySelector("textarea") : elt.querySelector(".msg-editing textarea"));
  if (field) {
    field.focus();
    if (field.tagName === "INPUT") field.select();
    else field.setSelectionRange(field.value.length, field.value.length);
  } else if (swapFrom && elt.id === swapFrom && !elt.matches(".editing, .msg-editing")) {
    const target = elt.querySelector(elt.matches(".chat-item") ? ".chat-link" : ".action-edit");
    swapFrom = null;
    if (elt.matches(".chat-item")) Numi.broadcastTitle(elt.getAttribute("data-chat-id"), elt.querySelector(".chat-link-title").textContent);
    if (target && focusLost()) target.focus();
  }
});
// Stop (or the answer ending) replaces the focused button: focus goes to the composer,
// except on a touch screen, where that would pop up the keyboard (the button keeps none).
on("htmx:wsBeforeMessage", () => {
  controlsHadFocus = !!$("composer-controls")?.contains(document.activeElement);
});
on("htmx:wsAfterMessage", () => {
  if (controlsHadFocus && focusLost() && !Numi.touch()) $("composer-input")?.focus({preventScroll: true});
  controlsHadFocus = false;
});
