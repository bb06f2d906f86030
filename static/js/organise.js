// Background answers: a chat's answering mark going out while it is not shown marks it
// unread (until opened) and, if opted in (Settings, per browser), shows a notification.
(function () {
  "use strict";

  var Numi = window.Numi = window.Numi || {};
  var on = document.addEventListener.bind(document);
  function $(id) { return document.getElementById(id); }
  function load(key) { try { return JSON.parse(localStorage.getItem(key)); } catch (e) { return null; } }
  function save(key, value) { try { localStorage.setItem(key, JSON.stringify(value)); } catch (e) { /* private mode */ } }
  function shown() { var t = $("transcript"); return t && t.getAttribute("data-chat-id"); }

  Numi.notifying = function () {
    return load("numi:notify") === true && window.Notification && Notification.permission === "granted";
  };

  function showUnread() {
    var unread = load("numi:unread") || [];
    document.querySelectorAll("#chat-list .chat-item[data-chat-id]").forEach(function (item) {
      var is = unread.indexOf(item.getAttribute("data-chat-id")) >= 0, mark = item.querySelector(".unread-mark");
      item.classList.toggle("unread", is);
      if (mark) mark.hidden = !is;
    });
  }
  function setUnread(id, unread) {
    var ids = (load("numi:unread") || []).filter(function (x) { return x !== id; });
    save("numi:unread", ids.concat(unread ? [id] : []).slice(-200));
    showUnread();
  }

  function notify(id, title, href) {
    if (!Numi.notifying()) return;
    var note = new Notification("Answer ready", {body: title, tag: "numi-" + id});
    note.onclick = function () { window.focus(); if (href) location.href = href; note.close(); };
  }

  // Another chat: its answering mark going out is a turn that ended there.
  new MutationObserver(function (changes) {
    changes.forEach(function (c) {
      var item = c.target.closest(".chat-item[data-chat-id]"), id = item && item.getAttribute("data-chat-id");
      if (!item || id === shown() || !c.target.matches(".answering-mark[hidden]") || c.oldValue !== null) return;
      setUnread(id, true);
      notify(id, item.querySelector(".chat-link-title").textContent, item.querySelector(".chat-link").getAttribute("href"));
    });
  }).observe(document.documentElement, {subtree: true, attributeFilter: ["hidden"], attributeOldValue: true});

  // The chat shown: a newer answer, the turn over, while the tab is hidden.
  var newest = 0;
  function newestAnswer() {
    return Math.max.apply(null, [0].concat([].map.call(document.querySelectorAll("#transcript .msg-assistant[data-message-id]"),
      function (el) { return +el.getAttribute("data-message-id"); })));
  }
  on("htmx:wsAfterMessage", function () {
    if (Numi.isRunning() || newestAnswer() <= newest) return;
    newest = newestAnswer();
    if (document.hidden) notify(shown(), $("chat-title").textContent, null);
  });

  // Settings: turning it on asks the browser's permission (messages in data-* of #notify-status).
  function settings(toggle, status) {
    function say(key) { status.textContent = status.getAttribute("data-" + key); }
    if (!window.Notification) { toggle.disabled = true; return say("missing"); }
    toggle.checked = Numi.notifying();
    toggle.addEventListener("change", function () {
      if (!toggle.checked) { save("numi:notify", false); return say("off"); }
      Notification.requestPermission().then(function (permission) {
        toggle.checked = permission === "granted";
        save("numi:notify", toggle.checked);
        say(toggle.checked ? "on" : "refused");
      });
    });
  }

  on("htmx:afterSettle", showUnread);
  addEventListener("storage", function (event) { if (event.key === "numi:unread") showUnread(); });
  on("DOMContentLoaded", function () {
    newest = newestAnswer();
    if (shown()) setUnread(shown(), false);  // opening a chat reads it
    else showUnread();
    if ($("notify-toggle")) settings($("notify-toggle"), $("notify-status"));
  });
})();
