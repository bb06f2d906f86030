// The sidebar: the drawer on narrow screens, the current chat in view, "answering" marks
// (polled, one request per 100 ids). Paging and date groups are server-rendered.
(function () {
  "use strict";

  var Numi = window.Numi = window.Numi || {};
  var on = document.addEventListener.bind(document);
  function $(id) { return document.getElementById(id); }

  // Date groups are made on the server, in this time zone.
  document.cookie = "numi_tz=" + (-new Date().getTimezoneOffset()) + "; path=/; SameSite=Lax; max-age=31536000";

  function layout() { return document.querySelector(".layout"); }
  function setOpen(open) {
    var backdrop = $("drawer-backdrop"), main = $("main"), menu = $("menu-button");
    layout().classList.toggle("drawer-open", open);
    if (backdrop) backdrop.hidden = !open;
    if (main) main.inert = open;  // what is behind the drawer cannot be reached
    if (menu) menu.setAttribute("aria-expanded", String(open));
  }
  Numi.drawerOpen = function () { return !!layout() && layout().classList.contains("drawer-open"); };
  Numi.openDrawer = function (focusTarget) {
    if (!layout() || !$("sidebar")) return;
    setOpen(true);
    var target = focusTarget || document.querySelector("#chat-list .current .chat-link") || $("new-chat");
    requestAnimationFrame(function () { target.focus(); });
    currentIntoView();
  };
  Numi.closeDrawer = function (returnFocus) {
    if (!Numi.drawerOpen()) return;
    setOpen(false);
    if (returnFocus !== false && $("menu-button")) $("menu-button").focus();
  };

  on("click", function (event) {
    var t = event.target.closest ? event.target : null;
    if (t && t.closest("#menu-button")) Numi.openDrawer();
    else if (t && (t.closest("#drawer-close") || t.closest("#drawer-backdrop"))) Numi.closeDrawer();
  });
  on("keydown", function (event) {
    var nav = $("sidebar");
    if (!Numi.drawerOpen()) return;
    if (event.key === "Escape" && !event.target.closest(".rename-form")) {
      event.preventDefault();
      event.stopImmediatePropagation();
      Numi.closeDrawer();
    } else if (event.key === "Tab") {  // Tab and Shift+Tab go round inside the drawer
      var items = Array.prototype.filter.call(nav.querySelectorAll("a[href], button, input:not([type=hidden]), summary"),
        function (el) { return el.offsetParent !== null; });
      var edge = items[event.shiftKey ? 0 : items.length - 1];
      if (items.length && (document.activeElement === edge || !nav.contains(document.activeElement))) {
        event.preventDefault();
        items[event.shiftKey ? items.length - 1 : 0].focus();
      }
    }
  }, true);
  matchMedia("(max-width: 760px)").addEventListener("change", function (event) {
    if (!event.matches) Numi.closeDrawer(false);  // a wide screen has no drawer
  });

  function currentIntoView() {
    var list = $("chat-list"), current = list && list.querySelector(".current");
    if (!current) return;
    var top = current.offsetTop - list.offsetTop;
    if (top < list.scrollTop || top + current.offsetHeight > list.scrollTop + list.clientHeight) {
      list.scrollTop = top - list.clientHeight / 2;
    }
  }

  function mark(item, running) {
    var el = item.querySelector(".answering-mark");
    if (el) el.hidden = !running;
  }
  function poll() {
    if (document.visibilityState !== "visible") return;
    var items = Array.prototype.slice.call(document.querySelectorAll("#chat-list .chat-item[data-chat-id]"));
    for (var i = 0; i < items.length; i += 100) (function (page) {
      var ids = page.map(function (item) { return item.getAttribute("data-chat-id"); });
      fetch("/chats/running?ids=" + encodeURIComponent(ids.join(",")), {credentials: "same-origin"})
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (data) {
          if (data && Array.isArray(data.running)) page.forEach(function (item, n) { mark(item, data.running.indexOf(ids[n]) >= 0); });
        })
        .catch(function () { /* offline: the next poll tries again */ });
    })(items.slice(i, i + 100));
  }
  // The open chat's own turn shows at once, from its live connection.
  on("htmx:wsAfterMessage", function () {
    var current = document.querySelector("#chat-list .chat-item.current");
    if (current) mark(current, Numi.isRunning());
  });

  on("DOMContentLoaded", function () {
    currentIntoView();
    setInterval(poll, 4000);  // the page came with the marks of its first load
    on("visibilitychange", poll);
  });
})();
