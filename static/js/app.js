// Numi's one small script: what HTML and htmx cannot do on their own — the resume cursor,
// Enter to send, autoscroll, the connection indicator. No eval, no inline handlers (the
// page's CSP forbids both). Everything else is htmx and server-rendered fragments.
(function () {
  "use strict";

  var stickToBottom = true;

  function transcript() { return document.getElementById("transcript"); }
  function isRunning() {
    var controls = document.getElementById("composer-controls");
    return controls && controls.getAttribute("data-running") === "1";
  }
  function setConnection(state) {
    var dot = document.getElementById("connection");
    if (dot) dot.setAttribute("data-state", state);
    document.body.setAttribute("data-connection", state);
  }
  function newRequestId() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    return "r-" + Date.now().toString(36) + "-" + Math.random().toString(36).slice(2);
  }
  function scrollToBottom() {
    var t = transcript();
    if (t) t.scrollTop = t.scrollHeight;
  }

  // --- the live connection ---------------------------------------------------------------

  // On every (re)connect, tell the server what this page already shows, so it replays
  // exactly the missed events (or a snapshot of the running turn).
  document.addEventListener("htmx:wsOpen", function (event) {
    var cursor = document.getElementById("event-cursor");
    var lastEventId = cursor ? cursor.getAttribute("data-event-id") : "";
    var lastMessageId = 0;
    document.querySelectorAll("#transcript [data-message-id]").forEach(function (el) {
      var id = parseInt(el.getAttribute("data-message-id"), 10);
      if (id > lastMessageId) lastMessageId = id;
    });
    var turns = document.querySelectorAll("#transcript .turn[data-turn-id]");
    var lastTurn = turns.length ? turns[turns.length - 1] : null;
    var liveTurn = lastTurn && lastTurn.querySelector(".turn-live") ? lastTurn.getAttribute("data-turn-id") : null;
    event.detail.socketWrapper.sendImmediately(JSON.stringify({
      type: "resume",
      last_event_id: lastEventId || null,
      last_message_id: lastMessageId,
      turn_id: liveTurn
    }));
    setConnection("open");
  });
  document.addEventListener("htmx:wsClose", function () { setConnection("closed"); });
  document.addEventListener("htmx:wsError", function () { setConnection("closed"); });
  document.addEventListener("htmx:wsConnecting", function () { setConnection("connecting"); });

  // A send gets a request id (so a retried send is recognised) and the user's time zone.
  document.addEventListener("htmx:wsConfigSend", function (event) {
    var params = event.detail.parameters;
    if (params.type !== "send") return;
    var input = document.getElementById("composer-input");
    if (!params.message || !params.message.trim() || isRunning()) {
      event.preventDefault();
      return;
    }
    params.request_id = newRequestId();
    try { params.timezone = Intl.DateTimeFormat().resolvedOptions().timeZone; } catch (e) { /* old browser */ }
    params.tz_offset = -new Date().getTimezoneOffset();
    delete event.detail.headers;
    if (input) input.value = "";
    stickToBottom = true;
  });
  document.addEventListener("htmx:wsConfigSend", function (event) {
    // Stop and approve carry only what they need, not the composer's text.
    var params = event.detail.parameters;
    if (params.type === "stop" || params.type === "approve") {
      delete params.message;
      delete event.detail.headers;
    }
  });

  // Follow the answer while the reader is at the bottom; stop when they scroll up.
  document.addEventListener("scroll", function (event) {
    var t = event.target;
    if (t && t.id === "transcript") {
      stickToBottom = t.scrollHeight - t.scrollTop - t.clientHeight < 80;
    }
  }, true);
  document.addEventListener("htmx:wsAfterMessage", function () {
    if (stickToBottom) scrollToBottom();
  });

  // Enter sends, Shift+Enter makes a new line.
  document.addEventListener("keydown", function (event) {
    if (event.target && event.target.id === "composer-input" && event.key === "Enter" &&
        !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      var form = document.getElementById("composer");
      if (form && !isRunning()) form.requestSubmit();
      return;
    }
    if (event.key === "Escape") {
      var rename = event.target.closest && event.target.closest(".rename-form");
      if (rename) {
        var cancel = rename.querySelector(".rename-cancel");
        if (cancel) cancel.click();
      }
    }
  });

  // --- small things -----------------------------------------------------------------------

  // Toasts disappear after a while.
  document.addEventListener("htmx:afterSwap", function (event) {
    if (event.detail.target && event.detail.target.id === "toasts") {
      var toasts = event.detail.target;
      setTimeout(function () {
        if (toasts.firstElementChild) toasts.firstElementChild.remove();
      }, 6000);
    }
  });

  // Focus a rename field when it appears.
  document.addEventListener("htmx:load", function (event) {
    var input = event.detail.elt.querySelector && event.detail.elt.querySelector(".rename-form input[name=title]");
    if (input) { input.focus(); input.select(); }
  });

  // Open a chat at its newest message.
  document.addEventListener("DOMContentLoaded", function () {
    scrollToBottom();
    var input = document.getElementById("composer-input");
    if (input) input.focus();
  });
})();
