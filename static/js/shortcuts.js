// Keyboard shortcuts (listed in _shortcuts_dialog.html), menus that close on Esc and an
// outside click, and focus that goes back to an opener or on to the next natural control.
(function () {
  "use strict";

  var Numi = window.Numi = window.Numi || {};
  var opener = null, controlsHadFocus = false;
  var on = document.addEventListener.bind(document);
  function $(id) { return document.getElementById(id); }
  function openMenus() { return document.querySelectorAll("details.menu[open], details.regenerate-model[open]"); }
  function isTextField(el) {
    return /^(TEXTAREA|SELECT)$/.test(el.tagName) || el.isContentEditable ||
      (el.tagName === "INPUT" && !/^(button|checkbox|radio|submit|reset|file|range|color)$/i.test(el.type));
  }
  function focusLost() { return !document.activeElement || document.activeElement === document.body; }
  function click(el) { if (el) el.click(); return !!el; }

  on("close", function (event) {
    if (event.target.id !== "shortcuts-dialog") return;
    var back = opener && opener.isConnected ? opener : $("composer-input");
    if (back) back.focus();
  }, true);

  on("keydown", function (event) {
    var t = event.target, mod = event.ctrlKey || event.metaKey, key = event.key;
    if (event.defaultPrevented || event.isComposing || !t.closest || t.closest("dialog[open]")) return;
    if (key === "Escape") {
      var menus = openMenus();
      if (menus.length) {
        event.preventDefault();
        menus.forEach(function (d) {
          d.open = false;
          if (d.contains(t) || t === document.body) d.querySelector("summary").focus();
        });
      } else if (!click(t.closest(".rename-form") && t.closest(".rename-form").querySelector(".rename-cancel")) &&
                 !click(t.closest(".msg-editing") && t.closest(".msg-editing").querySelector(".edit-buttons button[type=button]")) &&
                 Numi.isRunning() && click($("stop-button"))) {
        event.preventDefault();
      }
    } else if (mod && event.shiftKey && key.toLowerCase() === "o") {
      event.preventDefault();
      if ($("new-chat")) $("new-chat").form.requestSubmit();
    } else if (mod && !event.shiftKey && key.toLowerCase() === "k") {
      event.preventDefault();
      var search = $("chat-search");
      if (!search) return;
      if (Numi.narrow() && !Numi.drawerOpen()) Numi.openDrawer(search);
      else { search.focus(); search.select(); }
    } else if (key === "ArrowUp" && !mod && !event.shiftKey && !event.altKey && t.id === "composer-input" &&
               t.value === "" && !Numi.isRunning()) {
      var edits = document.querySelectorAll("#transcript .msg-user .action-edit");
      if (click(edits[edits.length - 1])) event.preventDefault();
    } else if (key === "?" && !mod && !isTextField(t) && $("shortcuts-dialog")) {
      event.preventDefault();
      opener = document.activeElement;
      $("shortcuts-dialog").showModal();
      $("shortcuts-close").focus();
    }
  });

  // An outside click closes open menus.
  on("click", function (event) {
    openMenus().forEach(function (d) { if (!d.contains(event.target)) d.open = false; });
  });

  // Focus into a rename or edit field when it appears.
  on("htmx:load", function (event) {
    var elt = event.detail.elt, rename, edit;
    if (!elt.querySelector) return;
    if ((rename = elt.querySelector(".rename-form input[name=title]"))) {
      rename.focus();
      rename.select();
    } else if ((edit = elt.matches(".msg-editing") ? elt.querySelector("textarea") : elt.querySelector(".msg-editing textarea"))) {
      edit.focus();
      edit.setSelectionRange(edit.value.length, edit.value.length);
    }
  });
  // A rename or an edit put back its item: focus goes to the item's natural control (the
  // focused field is gone) and other tabs hear the chat's new title.
  var swapFrom = null;
  on("htmx:beforeRequest", function (event) {
    var item = event.detail.elt.closest && event.detail.elt.closest(".chat-item, .msg-editing");
    swapFrom = item && item.id;
  });
  on("htmx:load", function (event) {
    var elt = event.detail.elt, target;
    if (!swapFrom || elt.id !== swapFrom || elt.matches(".editing, .msg-editing")) return;
    swapFrom = null;
    if (elt.matches(".chat-item")) {
      target = elt.querySelector(".chat-link");
      Numi.broadcastTitle(elt.getAttribute("data-chat-id"), elt.querySelector(".chat-link-title").textContent);
    } else {
      target = elt.querySelector(".action-edit");
    }
    if (target && focusLost()) target.focus();
  });
  // Stop (or the answer ending) replaces the focused button: focus goes to the composer.
  on("htmx:wsBeforeMessage", function () {
    var controls = $("composer-controls");
    controlsHadFocus = !!controls && controls.contains(document.activeElement);
  });
  on("htmx:wsAfterMessage", function () {
    if (controlsHadFocus && focusLost() && $("composer-input")) $("composer-input").focus({preventScroll: true});
    controlsHadFocus = false;
  });
})();
