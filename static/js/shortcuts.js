// Keyboard shortcuts, menus and where focus goes. Esc stops the answer (or closes what is
// open), Ctrl/Cmd+Shift+O starts a chat, Ctrl/Cmd+K searches, ArrowUp in an empty composer
// edits the last question, `?` lists the shortcuts. Menus (<details class="menu">) close on
// Esc and an outside click; closing a menu or dialog returns focus to its opener; after
// Stop, focus goes back to the composer; an edit form gets focus when it opens.
(function () {
  "use strict";

  var Numi = window.Numi = window.Numi || {};
  var dialogOpener = null;

  function isTextField(el) {
    if (!el) return false;
    var tag = el.tagName;
    return tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable ||
      (tag === "INPUT" && !/^(button|checkbox|radio|submit|reset|file|range|color)$/i.test(el.type));
  }
  function composerInput() { return document.getElementById("composer-input"); }

  function openMenus() { return document.querySelectorAll("details.menu[open], details.regenerate-model[open]"); }
  function closeMenu(details, focusSummary) {
    details.open = false;
    var summary = details.querySelector("summary");
    if (focusSummary && summary) summary.focus();
  }

  function openShortcuts() {
    var dialog = document.getElementById("shortcuts-dialog");
    if (!dialog || dialog.open) return;
    dialogOpener = document.activeElement;
    dialog.showModal();
    var close = document.getElementById("shortcuts-close");
    if (close) close.focus();
  }
  document.addEventListener("close", function (event) {
    if (event.target && event.target.id === "shortcuts-dialog") {
      var back = dialogOpener && dialogOpener.isConnected ? dialogOpener : composerInput();
      if (back && back.focus) back.focus();
      dialogOpener = null;
    }
  }, true);

  function editLastQuestion() {
    var buttons = document.querySelectorAll("#transcript .msg-user .action-edit");
    if (!buttons.length) return false;
    buttons[buttons.length - 1].click();
    return true;
  }

  document.addEventListener("keydown", function (event) {
    var target = event.target;
    var mod = event.ctrlKey || event.metaKey;
    if (event.defaultPrevented || event.isComposing) return;
    if (target.closest && target.closest("dialog[open]")) return;  // the dialog handles its own keys

    if (event.key === "Escape") {
      var menus = openMenus();
      if (menus.length) {
        event.preventDefault();
        menus.forEach(function (d) { closeMenu(d, d.contains(target) || target === document.body); });
        return;
      }
      var rename = target.closest && target.closest(".rename-form");
      if (rename) {
        var cancel = rename.querySelector(".rename-cancel");
        if (cancel) cancel.click();
        return;
      }
      var editing = target.closest && target.closest(".msg-editing");
      if (editing && !Numi.isRunning()) {
        var back = editing.querySelector(".edit-buttons button[type=button]");
        if (back) back.click();
        return;
      }
      var stop = document.getElementById("stop-button");
      if (stop && Numi.isRunning()) {
        event.preventDefault();
        stop.click();
      }
      return;
    }
    if (mod && event.shiftKey && (event.key === "O" || event.key === "o")) {
      event.preventDefault();
      var newChat = document.getElementById("new-chat");
      if (newChat && newChat.form) newChat.form.requestSubmit();
      return;
    }
    if (mod && !event.shiftKey && (event.key === "k" || event.key === "K")) {
      event.preventDefault();
      var search = document.getElementById("chat-search");
      if (!search) return;
      if (Numi.narrow() && Numi.openDrawer && !Numi.drawerOpen()) Numi.openDrawer(search);
      else { search.focus(); search.select(); }
      return;
    }
    if (event.key === "ArrowUp" && !mod && !event.shiftKey && !event.altKey && target.id === "composer-input" &&
        target.value === "" && !Numi.isRunning()) {
      if (editLastQuestion()) event.preventDefault();
      return;
    }
    if (event.key === "?" && !mod && !isTextField(target)) {
      event.preventDefault();
      openShortcuts();
    }
  });

  // An outside click closes open menus; a click on a menu's own summary toggles as usual.
  document.addEventListener("click", function (event) {
    openMenus().forEach(function (details) {
      if (!details.contains(event.target)) closeMenu(details, false);
    });
  });

  // Where focus goes after a swap took away the focused element.
  document.addEventListener("htmx:load", function (event) {
    var elt = event.detail.elt;
    if (!elt || !elt.querySelector) return;
    var rename = elt.querySelector(".rename-form input[name=title]");
    if (rename) { rename.focus(); rename.select(); return; }
    var edit = elt.matches(".msg-editing") ? elt.querySelector("textarea") : elt.querySelector(".msg-editing textarea");
    if (edit) {
      edit.focus();
      edit.setSelectionRange(edit.value.length, edit.value.length);
    }
  });
  function focusLost() { return !document.activeElement || document.activeElement === document.body; }
  document.addEventListener("htmx:afterSettle", function (event) {
    if (!focusLost()) return;
    var elt = event.detail.elt;
    if (elt && elt.classList && elt.classList.contains("chat-item")) {
      var link = elt.querySelector(".chat-link");
      if (link) link.focus();
    } else if (elt && elt.classList && elt.classList.contains("msg-user")) {
      var editButton = elt.querySelector(".action-edit");
      if (editButton) editButton.focus();
    }
  });
  // Stop (or the answer ending) replaces the button that had focus: back to the composer.
  var controlsHadFocus = false;
  document.addEventListener("htmx:wsBeforeMessage", function () {
    var controls = document.getElementById("composer-controls");
    controlsHadFocus = !!controls && controls.contains(document.activeElement);
  });
  document.addEventListener("htmx:wsAfterMessage", function () {
    var input = composerInput();
    if (controlsHadFocus && input && focusLost()) input.focus({preventScroll: true});
    controlsHadFocus = false;
  });
})();
