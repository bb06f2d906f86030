// Copy buttons: a code block's text (.copy-code, in partials/_md_blocks.html) and a
// message's markdown source (.copy-message, its data-markdown attribute). One delegated
// listener, so buttons added by streamed fragments work too; no inline handlers (CSP).
(function () {
  "use strict";

  function fallbackCopy(text) {
    // Pages served over plain http on another host have no Clipboard API.
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    var ok = document.execCommand("copy");
    document.body.removeChild(area);
    return ok ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }

  function copy(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    return fallbackCopy(text);
  }

  function confirm(button, label) {
    var original = button.getAttribute("data-label") || button.textContent;
    button.setAttribute("data-label", original);
    button.textContent = label;
    clearTimeout(button._copyTimer);
    button._copyTimer = setTimeout(function () { button.textContent = original; }, 1500);
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest(".copy-code, .copy-message");
    if (!button) return;
    var text;
    if (button.classList.contains("copy-code")) {
      var pre = button.closest(".code-block") && button.closest(".code-block").querySelector("pre");
      text = pre ? pre.textContent : "";
    } else {
      text = button.getAttribute("data-markdown") || "";
    }
    copy(text).then(function () { confirm(button, "Copied"); }, function () { confirm(button, "Copy failed"); });
  });
})();
