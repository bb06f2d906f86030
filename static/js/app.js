// Numi's one small script: what HTML and htmx cannot do on their own.
// No eval, no inline handlers (the page's CSP forbids both).
(function () {
  "use strict";

  // Toasts disappear after a while.
  document.addEventListener("htmx:afterSwap", function (event) {
    if (event.detail.target && event.detail.target.id === "toasts") {
      var toasts = event.detail.target;
      setTimeout(function () {
        if (toasts.firstElementChild) toasts.firstElementChild.remove();
      }, 6000);
    }
  });

  // Escape cancels an inline rename.
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    var form = event.target.closest && event.target.closest(".rename-form");
    if (form) {
      var cancel = form.querySelector(".rename-cancel");
      if (cancel) cancel.click();
    }
  });

  // Put the caret at the end of a rename field when it appears.
  document.addEventListener("htmx:load", function (event) {
    var input = event.detail.elt.querySelector && event.detail.elt.querySelector(".rename-form input[name=title]");
    if (input) { input.focus(); input.select(); }
  });

  // Start a chat scrolled to its newest message.
  document.addEventListener("DOMContentLoaded", function () {
    var transcript = document.getElementById("transcript");
    if (transcript) transcript.scrollTop = transcript.scrollHeight;
  });
})();
