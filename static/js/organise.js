// Background answers: a chat's answering mark going out while it is not shown marks it
// unread until opened and, if opted in (Settings, per browser), notifies.
(function () {
  "use strict";

  var Numi = window.Numi = window.Numi || {}, on = document.addEventListener.bind(document), newest = 0;
  function $(id) { return document.getElementById(id); }
  function load(key) { try { return JSON.parse(localStorage.getItem(key)); } catch (e) { return null; } }
  function save(key, value) { try { localStorage.setItem(key, JSON.stringify(value)); } catch (e) { /* private mode */ } }
  function shown() { var t = $("transcript"); return t && t.getAttribute("data-chat-id"); }
  function attr(item, sel, name) { var el = item.querySelector(sel); return name ? el.getAttribute(name) : el.textContent; }

  Numi.notifying = function () {
    return load("numi:notify") === true && window.Notification && Notification.permission === "granted";
  };
  function notify(id, title, href) {
    if (!Numi.notifying()) return;
    var note = new Notification("Answer ready", {body: title, tag: "numi-" + id});
    note.onclick = function () { focus(); if (href) location.href = href; note.close(); };
  }

  function showUnread() {
    var unread = load("numi:unread") || [];
    document.querySelectorAll("#chat-list .chat-item[data-chat-id]").forEach(function (item) {
      item.classList.toggle("unread", unread.indexOf(item.getAttribute("data-chat-id")) >= 0);
    });
  }
  function setUnread(id, unread) {
    var ids = (load("numi:unread") || []).filter(function (x) { return x !== id; });
    save("numi:unread", ids.concat(unread ? [id] : []).slice(-200));
    showUnread();
  }

  new MutationObserver(function (changes) {
    changes.forEach(function (c) {
      var item = c.target.closest(".chat-item[data-chat-id]"), id = item && item.getAttribute("data-chat-id");
      if (!item || id === shown() || !c.target.matches(".answering-mark[hidden]") || c.oldValue !== null) return;
      setUnread(id, true);
      notify(id, attr(item, ".chat-link-title"), attr(item, ".chat-link", "href"));
    });
  }).observe(document.documentElement, {subtree: true, attributeFilter: ["hidden"], attributeOldValue: true});

  // The chat shown notifies of a newer answer, the turn over, while the tab is hidden.
  function newestAnswer() {  // the transcript is in id order
    var all = document.querySelectorAll("#transcript .msg-assistant[data-message-id]");
    return all.length ? +all[all.length - 1].getAttribute("data-message-id") : 0;
  }
  on("htmx:wsAfterMessage", function () {
    if (Numi.isRunning() || newestAnswer() <= newest) return;
    newest = newestAnswer();
    if (document.hidden) notify(shown(), $("chat-title").textContent);
  });

  // Turning it on asks the browser first; the messages are in #notify-status's data-*.
  function settings(toggle, status) {
    function say(key) { status.textContent = status.getAttribute("data-" + key); }
    if (!window.Notification) { toggle.disabled = true; return say("missing"); }
    toggle.checked = Numi.notifying();
    toggle.onchange = function () {
      if (!toggle.checked) { save("numi:notify", false); return say("off"); }
      Notification.requestPermission().then(function (permission) {
        save("numi:notify", toggle.checked = permission === "granted");
        say(toggle.checked ? "on" : "refused");
      });
    };
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
