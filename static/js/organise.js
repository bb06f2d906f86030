// Background answers: when a chat's "answering" mark goes out (sidebar.js keeps the marks)
// and that chat is not in view, mark it unread until opened and, if the user opted in
// (Settings; per browser), show a desktop notification.
(function () {
  "use strict";

  var Numi = window.Numi = window.Numi || {};
  var on = document.addEventListener.bind(document);
  function $(id) { return document.getElementById(id); }
  function load(key, fallback) { try { return JSON.parse(localStorage.getItem(key)) || fallback; } catch (e) { return fallback; } }
  function save(key, value) { try { localStorage.setItem(key, JSON.stringify(value)); } catch (e) { /* private mode */ } }
  function shown() { var t = $("transcript"); return t && t.getAttribute("data-chat-id"); }

  Numi.notifying = function () {
    return load("numi:notify", false) === true && window.Notification && Notification.permission === "granted";
  };

  function showUnread() {
    var unread = load("numi:unread", []);
    document.querySelectorAll("#chat-list .chat-item[data-chat-id]").forEach(function (item) {
      var on = unread.indexOf(item.getAttribute("data-chat-id")) >= 0, mark = item.querySelector(".unread-mark");
      item.classList.toggle("unread", on);
      if (mark) mark.hidden = !on;
    });
  }
  function setUnread(id, unread) {
    var ids = load("numi:unread", []).filter(function (x) { return x !== id; });
    if (unread) ids.push(id);
    save("numi:unread", ids.slice(-200));
    showUnread();
  }

  function finished(item) {
    var id = item.getAttribute("data-chat-id"), open = id === shown();
    if (open && !document.hidden) return;  // read as it came
    if (!open) setUnread(id, true);
    if (!Numi.notifying()) return;
    var title = item.querySelector(".chat-link-title");
    var note = new Notification("Answer ready", {body: title ? title.textContent : "", tag: "numi-" + id});
    note.onclick = function () {
      window.focus();
      if (!open) location.href = item.querySelector(".chat-link").getAttribute("href");
      note.close();
    };
  }

  // An answering mark that becomes hidden is a turn that ended.
  new MutationObserver(function (changes) {
    changes.forEach(function (c) {
      if (c.target.classList.contains("answering-mark") && c.oldValue === null && c.target.hidden) {
        var item = c.target.closest(".chat-item[data-chat-id]");
        if (item) finished(item);
      }
    });
  }).observe(document.documentElement, {subtree: true, attributes: true, attributeFilter: ["hidden"], attributeOldValue: true});

  // Settings: the toggle asks the browser's permission first.
  function settings() {
    var toggle = $("notify-toggle"), status = $("notify-status");
    if (!toggle) return;
    if (!window.Notification) { toggle.disabled = true; status.textContent = "This browser has no desktop notifications."; return; }
    toggle.checked = Numi.notifying();
    toggle.addEventListener("change", function () {
      if (!toggle.checked) { save("numi:notify", false); status.textContent = "Notifications are off."; return; }
      Notification.requestPermission().then(function (permission) {
        var granted = permission === "granted";
        save("numi:notify", granted);
        toggle.checked = granted;
        status.textContent = granted ? "Notifications are on in this browser." : "The browser refused: allow notifications for this site first.";
      });
    });
  }

  on("htmx:afterSettle", showUnread);
  window.addEventListener("storage", function (event) { if (event.key === "numi:unread") showUnread(); });
  on("DOMContentLoaded", function () {
    if (shown()) setUnread(shown(), false);  // opening a chat reads it
    else showUnread();
    settings();
  });
})();
