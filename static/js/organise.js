// Answers ending out of view (a sidebar.js mark going out): unread, maybe notified.
(function () {
  var N = window.Numi = window.Numi || {}, S = localStorage, on = document.addEventListener.bind(document);
  function $(id) { return document.getElementById(id); }
  function shown() { var t = $("transcript"); return t && t.getAttribute("data-chat-id"); }
  function unread() { return (S.getItem("numi:unread") || "").split(" "); }
  N.notifying = function () { return S.getItem("numi:notify") && window.Notification && Notification.permission === "granted"; };
  function show() {
    document.querySelectorAll("#chat-list [data-chat-id]").forEach(function (i) {
      i.classList.toggle("unread", unread().indexOf(i.getAttribute("data-chat-id")) >= 0);
    });
  }
  function mark(id, read) {
    S.setItem("numi:unread", unread().filter(function (x) { return x && x !== id; }).concat(read ? [] : [id]).join(" "));
    show();
  }
  new MutationObserver(function (changes) {
    changes.forEach(function (c) {
      var i = c.target.closest("[data-chat-id]"), id = i && i.getAttribute("data-chat-id");
      if (!i || c.oldValue !== null || !c.target.matches(".answering-mark[hidden]")) return;
      if (id !== shown()) mark(id);
      else if (!document.hidden) return;
      if (N.notifying()) new Notification("Answer ready", {body: i.querySelector(".chat-link-title").textContent});
    });
  }).observe(document, {subtree: true, attributeFilter: ["hidden"], attributeOldValue: true});
  on("htmx:afterSettle", show);
  on("DOMContentLoaded", function () {
    var t = $("notify-toggle"), s = $("notify-status");
    mark(shown(), 1);
    if (!t) return;
    t.disabled = !window.Notification;
    t.checked = N.notifying();
    t.onchange = function () {  // texts: data-* of #notify-status
      (t.checked ? Notification.requestPermission() : Promise.resolve("off")).then(function (answer) {
        t.checked = answer === "granted";
        S.setItem("numi:notify", t.checked ? "1" : "");
        s.textContent = s.getAttribute("data-" + (t.checked ? "on" : answer));
      });
    };
  });
})();
