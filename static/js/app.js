// The live page: connection and resume, scrolling, older pages, announcements, the tab
// title. `Numi` holds what the other modules share. No eval, no inline handlers (CSP).
(function () {
  "use strict";

  var Numi = window.Numi = window.Numi || {};
  var stick = true, bannerTimer = null, loadingOlder = false, shownTitle = null;
  var on = document.addEventListener.bind(document);
  function $(id) { return document.getElementById(id); }

  Numi.isRunning = function () {
    var c = $("composer-controls");
    return !!c && c.getAttribute("data-running") === "1";
  };
  Numi.narrow = function () { return matchMedia("(max-width: 760px)").matches; };
  Numi.scrollToBottom = function () {
    var t = $("transcript");
    stick = true;
    if (t) t.scrollTop = t.scrollHeight;
    showJump(false);
  };

  function setConnection(state) {
    var dot = $("connection"), banner = $("connection-banner");
    if (dot) {
      dot.setAttribute("data-state", state);
      dot.setAttribute("aria-label", "Live connection: " + ({open: "connected", closed: "lost, reconnecting"}[state] || "connecting"));
    }
    document.body.setAttribute("data-connection", state);
    if (!banner) return;
    clearTimeout(bannerTimer);
    if (state === "closed") bannerTimer = setTimeout(function () { banner.hidden = false; }, 1000);
    else if (state === "open") banner.hidden = true;
  }

  // Each (re)connect says what the page shows; the server replays what it missed.
  on("htmx:wsOpen", function (event) {
    var cursor = $("event-cursor"), last = 0;
    document.querySelectorAll("#transcript [data-message-id]").forEach(function (el) {
      last = Math.max(last, parseInt(el.getAttribute("data-message-id"), 10) || 0);
    });
    var turns = document.querySelectorAll("#transcript .turn[data-turn-id]");
    var turn = turns.length ? turns[turns.length - 1] : null;
    event.detail.socketWrapper.sendImmediately(JSON.stringify({
      type: "resume",
      last_event_id: (cursor && cursor.getAttribute("data-event-id")) || null,
      last_message_id: last,
      turn_id: turn && turn.querySelector(".turn-live") ? turn.getAttribute("data-turn-id") : null
    }));
    setConnection("open");
  });
  on("htmx:wsClose", function () { setConnection("closed"); });
  on("htmx:wsError", function () { setConnection("closed"); });
  on("htmx:wsConnecting", function () {
    if (document.body.getAttribute("data-connection") !== "closed") setConnection("connecting");
  });

  // Stop and approve carry only what they need, not the composer's text.
  on("htmx:wsConfigSend", function (event) {
    var p = event.detail.parameters;
    if (p.type === "stop" || p.type === "approve") {
      delete p.message;
      delete p.attachments;
      delete event.detail.headers;
    } else if (p.type === "send") {
      Numi.scrollToBottom();
    }
  });

  function fromBottom(t) { return t.scrollHeight - t.scrollTop - t.clientHeight; }
  function showJump(visible) { var b = $("jump-latest"); if (b) b.hidden = !visible; }

  // Follow the answer at the bottom; scrolled up, leave the reader be and offer a way back.
  on("scroll", function (event) {
    var t = event.target;
    if (!t || t.id !== "transcript") return;
    stick = fromBottom(t) < 80;
    showJump(fromBottom(t) > 200);
    loadOlderIfNear(t);
  }, true);
  // Where the reader is when a frame arrives decides (a scroll event may still be on its way).
  on("htmx:wsBeforeMessage", function () {
    var t = $("transcript");
    if (t) stick = fromBottom(t) < 80;
  });
  on("htmx:wsAfterMessage", function () {
    var t = $("transcript");
    if (!t) return;
    if (stick) t.scrollTop = t.scrollHeight;
    else showJump(fromBottom(t) > 200);
    announceFinished();
    syncTitle();
  });
  on("click", function (event) {
    if (!event.target.closest || !event.target.closest("#jump-latest")) return;
    Numi.scrollToBottom();
    if ($("composer-input")) $("composer-input").focus({preventScroll: true});
  });

  // Older messages: one page near the top, the reading position kept.
  function loadOlderIfNear(t) {
    var sentinel = t.querySelector(":scope > .load-older");
    if (!sentinel || loadingOlder || t.scrollTop > 400) return;
    loadingOlder = true;
    fetch(sentinel.getAttribute("data-older-url"), {headers: {"HX-Request": "true"}, credentials: "same-origin"})
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (html) {
        var anchor = sentinel.nextElementSibling, before = anchor ? anchor.getBoundingClientRect().top : 0;
        window.htmx.swap(sentinel, html, {swapStyle: "outerHTML"});
        if (anchor) t.scrollTop += anchor.getBoundingClientRect().top - before;
        markAnnounced();
        loadingOlder = false;
        if (t.scrollHeight <= t.clientHeight) loadOlderIfNear(t);  // not scrollable yet
      })
      .catch(function () { setTimeout(function () { loadingOlder = false; }, 3000); });
  }

  // --- each answer announced once, complete ---

  var ANSWERS = "#transcript .msg-assistant[data-message-id]";
  function markAnnounced() {
    document.querySelectorAll(ANSWERS).forEach(function (el) { el.setAttribute("data-announced", ""); });
  }
  function announceFinished() {
    var texts = [];
    document.querySelectorAll(ANSWERS + ":not([data-announced])").forEach(function (el) {
      el.setAttribute("data-announced", "");
      var body = el.querySelector(".msg-body");
      if (body && body.textContent.trim()) texts.push(body.textContent.trim());
    });
    if (texts.length && $("answer-announcer")) $("answer-announcer").textContent = "Answer: " + texts.join("\n").slice(0, 4000);
  }

  // --- the tab title follows the chat's title (auto-title, rename, other tabs) ---

  var channel = window.BroadcastChannel ? new BroadcastChannel("numi-chats") : null;
  function chatId() { var t = $("transcript"); return t && t.getAttribute("data-chat-id"); }
  function applyTitle(id, title) {
    document.querySelectorAll("#chat-" + CSS.escape(id) + " .chat-link-title").forEach(function (el) {
      if (el.textContent !== title) el.textContent = title;
    });
    var heading = $("chat-title");
    if (id !== chatId() || !heading) return;
    if (heading.textContent !== title) heading.textContent = heading.title = title;
    shownTitle = title;
    document.title = title + " · Numi";
  }
  Numi.broadcastTitle = function (id, title) {
    if (channel && id && title) channel.postMessage({type: "title", chat: id, title: title});
  };
  function syncTitle() {
    var heading = $("chat-title"), title = heading && heading.textContent.trim();
    if (!title || title === shownTitle) return;
    applyTitle(chatId(), title);
    Numi.broadcastTitle(chatId(), title);
  }
  if (channel) channel.onmessage = function (event) {
    var d = event.data || {};
    if (d.type === "title" && typeof d.chat === "string" && typeof d.title === "string") applyTitle(d.chat, d.title);
  };
  on("htmx:afterSettle", syncTitle);

  on("htmx:afterSwap", function (event) {  // toasts go away after a while
    var toasts = event.detail.target;
    if (toasts && toasts.id === "toasts") setTimeout(function () {
      if (toasts.firstElementChild) toasts.firstElementChild.remove();
    }, 6000);
  });

  // The page takes the visible height: the composer stays above an on-screen keyboard.
  if (window.visualViewport) {
    var fit = function () { document.documentElement.style.setProperty("--app-height", visualViewport.height + "px"); };
    visualViewport.addEventListener("resize", fit);
    fit();
  }

  on("DOMContentLoaded", function () {
    markAnnounced();
    shownTitle = $("chat-title") ? $("chat-title").textContent.trim() : null;
    var target = location.hash.indexOf("#msg-") === 0 && $(location.hash.slice(1)), t = $("transcript");
    if (target) {
      stick = false;
      target.scrollIntoView({block: "center"});
      target.classList.add("jumped");
    } else {
      Numi.scrollToBottom();
    }
    if (t && t.scrollHeight <= t.clientHeight) loadOlderIfNear(t);
    if ($("composer-input") && !Numi.narrow()) $("composer-input").focus({preventScroll: true});
  });
})();
