// The live chat page: the connection (resume cursor, state, "Reconnecting…" banner), the
// transcript's scrolling (follow the answer, older pages one at a time, jump to latest),
// announcing finished answers to screen readers, and the tab title following the chat's
// title. The composer, sidebar and shortcuts have their own modules; `Numi` is what they
// share. No eval, no inline handlers: the page's CSP forbids both.
(function () {
  "use strict";

  var Numi = window.Numi = window.Numi || {};
  var stickToBottom = true;
  var bannerTimer = null;

  function transcript() { return document.getElementById("transcript"); }
  Numi.isRunning = function () {
    var controls = document.getElementById("composer-controls");
    return !!controls && controls.getAttribute("data-running") === "1";
  };
  Numi.narrow = function () { return window.matchMedia("(max-width: 760px)").matches; };
  Numi.scrollToBottom = function () {
    var t = transcript();
    stickToBottom = true;
    if (t) t.scrollTop = t.scrollHeight;
    showJump(false);
  };

  // --- the live connection ---------------------------------------------------------------

  function setConnection(state) {
    var dot = document.getElementById("connection");
    if (dot) {
      dot.setAttribute("data-state", state);
      dot.setAttribute("aria-label", "Live connection: " + (state === "open" ? "connected" : state === "closed" ? "lost, reconnecting" : "connecting"));
    }
    document.body.setAttribute("data-connection", state);
    var banner = document.getElementById("connection-banner");
    if (!banner) return;
    clearTimeout(bannerTimer);
    // A short blip is not worth a banner; a lost connection for a second and more is.
    if (state === "closed") bannerTimer = setTimeout(function () { banner.hidden = false; }, 1000);
    else if (state === "open") banner.hidden = true;
  }

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
  document.addEventListener("htmx:wsConnecting", function () {
    if (document.body.getAttribute("data-connection") !== "closed") setConnection("connecting");
  });

  // Stop and approve carry only what they need, not the composer's text.
  document.addEventListener("htmx:wsConfigSend", function (event) {
    var params = event.detail.parameters;
    if (params.type === "stop" || params.type === "approve") {
      delete params.message;
      delete params.attachments;
      delete event.detail.headers;
    } else if (params.type === "send") {
      stickToBottom = true;
    }
  });

  // --- scrolling --------------------------------------------------------------------------

  function distanceFromBottom(t) { return t.scrollHeight - t.scrollTop - t.clientHeight; }
  function showJump(visible) {
    var button = document.getElementById("jump-latest");
    if (button) button.hidden = !visible;
  }

  // Follow the answer while the reader is at the bottom; leave them alone when they scroll
  // up, and offer the way back.
  document.addEventListener("scroll", function (event) {
    var t = event.target;
    if (!t || t.id !== "transcript") return;
    var distance = distanceFromBottom(t);
    stickToBottom = distance < 80;
    showJump(distance > 200);
    loadOlderIfNear(t);
  }, true);
  document.addEventListener("htmx:wsAfterMessage", function () {
    var t = transcript();
    if (!t) return;
    if (stickToBottom) t.scrollTop = t.scrollHeight;
    else showJump(distanceFromBottom(t) > 200);
    announceFinished();
  });
  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("#jump-latest")) {
      Numi.scrollToBottom();
      var input = document.getElementById("composer-input");
      if (input) input.focus({preventScroll: true});
    }
  });

  // Older messages: one page when the reader nears the top, keeping what they read in place.
  var loadingOlder = false;
  function loadOlderIfNear(t) {
    var sentinel = t.querySelector(":scope > .load-older");
    if (!sentinel || loadingOlder || t.scrollTop > 400) return;
    loadingOlder = true;
    fetch(sentinel.getAttribute("data-older-url"), {headers: {"HX-Request": "true"}, credentials: "same-origin"})
      .then(function (response) { if (!response.ok) throw new Error(response.status); return response.text(); })
      .then(function (html) {
        var anchor = sentinel.nextElementSibling;
        var before = anchor ? anchor.getBoundingClientRect().top : 0;
        window.htmx.swap(sentinel, html, {swapStyle: "outerHTML"});
        if (anchor) t.scrollTop += anchor.getBoundingClientRect().top - before;
        markAnnounced();
        loadingOlder = false;
        // A page that does not fill the screen cannot be scrolled: load the next one.
        if (t.scrollHeight <= t.clientHeight) loadOlderIfNear(t);
      })
      .catch(function () { setTimeout(function () { loadingOlder = false; }, 3000); });
  }

  // --- screen readers: each answer once, when it is complete -------------------------------

  function markAnnounced() {
    document.querySelectorAll("#transcript .msg-assistant[data-message-id]").forEach(function (el) {
      el.setAttribute("data-announced", "");
    });
  }
  function announceFinished() {
    var fresh = document.querySelectorAll("#transcript .msg-assistant[data-message-id]:not([data-announced])");
    if (!fresh.length) return;
    var region = document.getElementById("answer-announcer");
    var texts = [];
    fresh.forEach(function (el) {
      el.setAttribute("data-announced", "");
      var body = el.querySelector(".msg-body");
      if (body && body.textContent.trim()) texts.push(body.textContent.trim());
    });
    if (region && texts.length) region.textContent = "Answer: " + texts.join("\n").slice(0, 4000);
  }

  // --- the tab title follows the chat's title (auto-title, rename, other tabs) -------------

  var channel = window.BroadcastChannel ? new BroadcastChannel("numi-chats") : null;
  var shownTitle = null;
  function currentChatId() { var t = transcript(); return t ? t.getAttribute("data-chat-id") : null; }
  function applyTitle(chatId, title) {
    document.querySelectorAll("#chat-" + CSS.escape(chatId) + " .chat-link-title").forEach(function (el) {
      if (el.textContent !== title) el.textContent = title;
    });
    if (chatId !== currentChatId()) return;
    var heading = document.getElementById("chat-title");
    if (heading && heading.textContent !== title) { heading.textContent = title; heading.title = title; }
    shownTitle = title;
    document.title = title + " · Numi";
  }
  Numi.broadcastTitle = function (chatId, title) {
    if (channel && chatId && title) channel.postMessage({type: "title", chat: chatId, title: title});
  };
  function syncTitle() {
    var heading = document.getElementById("chat-title");
    var chatId = currentChatId();
    if (!heading || !chatId) return;
    var title = heading.textContent.trim();
    if (title && title !== shownTitle) {
      applyTitle(chatId, title);
      Numi.broadcastTitle(chatId, title);
    }
  }
  if (channel) {
    channel.onmessage = function (event) {
      var data = event.data || {};
      if (data.type === "title" && typeof data.chat === "string" && typeof data.title === "string") applyTitle(data.chat, data.title);
    };
  }
  document.addEventListener("htmx:wsAfterMessage", syncTitle);
  document.addEventListener("htmx:afterSettle", syncTitle);

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

  // The on-screen keyboard shrinks the visual viewport (iOS does not resize the layout):
  // the page takes the visible height, so the composer stays above the keyboard.
  if (window.visualViewport) {
    var fit = function () {
      document.documentElement.style.setProperty("--app-height", window.visualViewport.height + "px");
    };
    window.visualViewport.addEventListener("resize", fit);
    fit();
  }

  // Open a chat at its newest message, or on the one a link names (search hit, outline).
  document.addEventListener("DOMContentLoaded", function () {
    markAnnounced();
    shownTitle = (document.getElementById("chat-title") || {}).textContent || null;
    var target = location.hash.indexOf("#msg-") === 0 && document.getElementById(location.hash.slice(1));
    if (target) {
      stickToBottom = false;
      target.scrollIntoView({block: "center"});
      target.classList.add("jumped");
    } else {
      Numi.scrollToBottom();
    }
    var t = transcript();
    if (t && t.scrollHeight <= t.clientHeight) loadOlderIfNear(t);
    // On a phone, focusing would pop the keyboard over the page at once.
    var input = document.getElementById("composer-input");
    if (input && !Numi.narrow()) input.focus({preventScroll: true});
  });
})();
