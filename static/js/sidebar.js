// The sidebar: the drawer on narrow screens (focus kept inside, Esc and an outside tap close
// it and return focus to the menu button), the current chat scrolled into view, and the
// "answering" mark on chats whose turn runs in the background (polled, one request per
// page of ids). Infinite scroll and date groups are server-rendered (_chat_list_page.html).
(function () {
  "use strict";

  var Numi = window.Numi = window.Numi || {};
  var POLL_MS = 4000;
  var PAGE = 100;

  // Date groups (Today, Yesterday, ...) are made on the server in the browser's time zone.
  document.cookie = "numi_tz=" + (-new Date().getTimezoneOffset()) + "; path=/; SameSite=Lax; max-age=31536000";

  function sidebar() { return document.getElementById("sidebar"); }
  function menuButton() { return document.getElementById("menu-button"); }
  function layout() { return document.querySelector(".layout"); }
  function focusables(root) {
    return Array.prototype.filter.call(
      root.querySelectorAll("a[href], button:not([disabled]), input:not([type=hidden]):not([disabled]), select, textarea, summary, [tabindex]:not([tabindex='-1'])"),
      function (el) { return el.offsetParent !== null || el === document.activeElement; });
  }

  // --- the drawer -------------------------------------------------------------------------

  Numi.drawerOpen = function () { var l = layout(); return !!l && l.classList.contains("drawer-open"); };
  Numi.openDrawer = function (focusTarget) {
    var l = layout(), nav = sidebar(), main = document.getElementById("main");
    if (!l || !nav) return;
    l.classList.add("drawer-open");
    var backdrop = document.getElementById("drawer-backdrop");
    if (backdrop) backdrop.hidden = false;
    if (menuButton()) menuButton().setAttribute("aria-expanded", "true");
    if (main) main.inert = true;  // what is behind the drawer cannot be reached
    var target = focusTarget || nav.querySelector(".chat-item.current .chat-link") || nav.querySelector("#new-chat");
    // The drawer slides in; focus once it is visible.
    requestAnimationFrame(function () { if (target) target.focus(); });
    scrollCurrentIntoView();
  };
  Numi.closeDrawer = function (returnFocus) {
    var l = layout(), nav = sidebar(), main = document.getElementById("main");
    if (!l || !l.classList.contains("drawer-open")) return;
    l.classList.remove("drawer-open");
    var backdrop = document.getElementById("drawer-backdrop");
    if (backdrop) backdrop.hidden = true;
    if (main) main.inert = false;
    if (menuButton()) {
      menuButton().setAttribute("aria-expanded", "false");
      if (returnFocus !== false) menuButton().focus();
    }
  };

  document.addEventListener("click", function (event) {
    var target = event.target;
    if (!target.closest) return;
    if (target.closest("#menu-button")) Numi.openDrawer();
    else if (target.closest("#drawer-close") || target.closest("#drawer-backdrop")) Numi.closeDrawer();
  });
  document.addEventListener("keydown", function (event) {
    if (!Numi.drawerOpen()) return;
    var nav = sidebar();
    if (event.key === "Escape" && !event.target.closest(".rename-form")) {
      event.preventDefault();
      event.stopImmediatePropagation();
      Numi.closeDrawer();
    } else if (event.key === "Tab" && nav) {
      var items = focusables(nav);
      if (!items.length) return;
      var first = items[0], last = items[items.length - 1];
      if (event.shiftKey && (document.activeElement === first || !nav.contains(document.activeElement))) {
        event.preventDefault();
        last.focus();
      } else if (!event.shiftKey && (document.activeElement === last || !nav.contains(document.activeElement))) {
        event.preventDefault();
        first.focus();
      }
    }
  }, true);
  // Back to a wide screen: the drawer is the plain sidebar again.
  window.matchMedia("(max-width: 760px)").addEventListener("change", function (event) {
    if (!event.matches) Numi.closeDrawer(false);
  });

  // --- the current chat in view -----------------------------------------------------------

  function scrollCurrentIntoView() {
    var list = document.getElementById("chat-list");
    var current = list && list.querySelector(".chat-item.current");
    if (!current) return;
    var top = current.offsetTop - list.offsetTop;
    if (top < list.scrollTop || top + current.offsetHeight > list.scrollTop + list.clientHeight) {
      list.scrollTop = top - list.clientHeight / 2;
    }
  }

  // --- "answering" marks ------------------------------------------------------------------

  function mark(item, running) {
    var el = item.querySelector(".answering-mark");
    if (el && el.hidden === running) el.hidden = !running;
  }
  function poll() {
    if (document.visibilityState !== "visible") return;
    var items = Array.prototype.slice.call(document.querySelectorAll("#chat-list .chat-item[data-chat-id]"));
    for (var i = 0; i < items.length; i += PAGE) {
      (function (page) {
        var ids = page.map(function (item) { return item.getAttribute("data-chat-id"); });
        fetch("/chats/running?ids=" + encodeURIComponent(ids.join(",")), {credentials: "same-origin"})
          .then(function (response) { return response.ok ? response.json() : null; })
          .then(function (data) {
            if (!data || !Array.isArray(data.running)) return;
            page.forEach(function (item) { mark(item, data.running.indexOf(item.getAttribute("data-chat-id")) >= 0); });
          })
          .catch(function () { /* offline: the next poll tries again */ });
      })(items.slice(i, i + PAGE));
    }
  }
  // The open chat's own turn shows at once, from its live connection.
  document.addEventListener("htmx:wsAfterMessage", function () {
    var current = document.querySelector("#chat-list .chat-item.current");
    if (current) mark(current, Numi.isRunning());
  });

  document.addEventListener("DOMContentLoaded", function () {
    scrollCurrentIntoView();
    poll();
    setInterval(poll, POLL_MS);
    document.addEventListener("visibilitychange", poll);
  });
})();
