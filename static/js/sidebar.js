// The sidebar: the drawer on narrow screens, the current chat in view, "answering" marks
// (told on the feed socket) and unread marks. Paging and date groups are server-rendered.

const Numi = window.Numi, {$, all, on} = Numi;

// Date groups are made on the server, in this time zone.
document.cookie = "numi_tz=" + (-new Date().getTimezoneOffset()) + "; path=/; SameSite=Lax; max-age=31536000";

// --- the drawer ---

const layout = () => document.querySelector(".layout");
function setOpen(open) {
  layout().classList.toggle("drawer-open", open);
  if ($("drawer-backdrop")) $("drawer-backdrop").hidden = !open;
  if ($("main")) $("main").inert = open;  // what is behind the drawer cannot be reached
  $("menu-button")?.setAttribute("aria-expanded", String(open));
}
Numi.drawerOpen = () => !!layout()?.classList.contains("drawer-open");
Numi.openDrawer = (focusTarget) => {
  if (!layout() || !$("sidebar")) return;
  setOpen(true);
  const target = focusTarget || document.querySelector("#chat-list .current .chat-link") || $("new-chat");
  requestAnimationFrame(() => target.focus());
  currentIntoView();
};
Numi.closeDrawer = (returnFocus) => {
  if (!Numi.drawerOpen()) return;
  setOpen(false);
  if (returnFocus !== false) $("menu-button")?.focus();
};

on("click", (event) => {
  if (Numi.hit(event, "#menu-button")) Numi.openDrawer();
  else if (Numi.hit(event, "#drawer-close, #drawer-backdrop")) Numi.closeDrawer();
});
on("keydown", (event) => {
  const nav = $("sidebar");
  if (!Numi.drawerOpen()) return;
  if (event.key === "Escape" && !event.target.closest(".rename-form")) {
    event.preventDefault();
    event.stopImmediatePropagation();
    Numi.closeDrawer();
  } else if (event.key === "Tab") {  // Tab and Shift+Tab go round inside the drawer
    const items = [...nav.querySelectorAll("a[href], button, input:not([type=hidden]), summary")].filter((el) => el.offsetParent !== null && el.tabIndex >= 0);
    const edge = items[event.shiftKey ? 0 : items.length - 1];
    if (items.length && (document.activeElement === edge || !nav.contains(document.activeElement))) {
      event.preventDefault();
      items[event.shiftKey ? items.length - 1 : 0].focus();
    }
  }
}, true);
matchMedia("(max-width: 760px)").addEventListener("change", (event) => {
  if (!event.matches) Numi.closeDrawer(false);  // a wide screen has no drawer
});

// One tab stop per chat (its link): → and ← walk the row's actions, ↑ and ↓ the chats.
on("keydown", (event) => {
  const t = event.target, item = t.closest?.(".chat-item"), key = event.key;
  if (!item || event.altKey || event.ctrlKey || event.metaKey || !t.matches("a, button")) return;
  const stops = [item.querySelector(".chat-link"), ...item.querySelectorAll(".chat-actions button")];
  const at = stops.indexOf(t);
  let next = key === "ArrowRight" ? stops[at + 1] : key === "ArrowLeft" ? stops[at - 1] : null;
  if (key === "ArrowDown" || key === "ArrowUp") {
    const links = [...(item.closest("ul, ol") || document).querySelectorAll(".chat-item .chat-link")].filter((a) => a.offsetParent !== null);
    next = links[links.indexOf(stops[0]) + (key === "ArrowDown" ? 1 : -1)];
  }
  if (at >= 0 && next) { event.preventDefault(); next.focus(); }
});

function currentIntoView() {
  const list = $("chat-list"), current = list?.querySelector(".current");
  if (!current) return;
  const top = current.offsetTop - list.offsetTop;
  if (top < list.scrollTop || top + current.offsetHeight > list.scrollTop + list.clientHeight) {
    list.scrollTop = top - list.clientHeight / 2;
  }
}

// --- answering marks ---

function mark(item, running) {
  const el = item.querySelector(".answering-mark");
  if (el) el.hidden = !running;
}
// The server tells the page of each of the user's chats that starts or stops answering or
// gets a title, on the sidebar's feed socket (numi/web/live/sidebar_feed.py; its URL is the
// sidebar's data-feed-url). It is opened again after a drop, later each time, up to 30 s.
let feedRetry = 1000;
const unlisted = new Set();  // chats the page does not list, seen answering
function listen() {
  const route = $("sidebar")?.dataset.feedUrl;
  if (!route || !window.WebSocket) return;
  const socket = new WebSocket(new URL(route, location.href.replace(/^http/, "ws")));
  // #sidebar's data-feed says whether the page hears of changes (open or closed).
  socket.onopen = () => { feedRetry = 1000; $("sidebar").dataset.feed = "open"; };
  socket.onmessage = (event) => {
    let change;
    try { change = JSON.parse(event.data); } catch { return; }
    const item = all("#chat-list .chat-item[data-chat-id]").find((i) => i.getAttribute("data-chat-id") === change.chat_id);
    if (!item) {
      // A chat this page does not list answered: a scheduled task's new chat, or one further
      // down. It is unread when it next shows, and notifies as any answer (once: its title
      // comes as another change).
      if (change.running) unlisted.add(change.chat_id);
      else if (unlisted.delete(change.chat_id) && change.chat_id !== shown()) {
        markUnread(change.chat_id);
        if (notifying()) new Notification("Answer ready", {body: typeof change.title === "string" ? change.title : ""});
      }
      return;
    }
    mark(item, change.running);
    const title = item.querySelector(".chat-link-title");
    if (title && typeof change.title === "string" && title.textContent !== change.title) {
      title.textContent = change.title;  // text, never markup
      item.querySelector(".chat-link")?.setAttribute("title", change.title);
    }
  };
  socket.onclose = () => {
    $("sidebar").dataset.feed = "closed";
    setTimeout(listen, feedRetry);
    feedRetry = Math.min(feedRetry * 2, 30000);
  };
}
// The open chat's own turn shows at once, from its live connection.
on("htmx:wsAfterMessage", () => {
  const current = document.querySelector("#chat-list .chat-item.current");
  if (current) mark(current, Numi.isRunning());
});

// --- background answers: unread marks (localStorage numi:unread) and notifications ---

const S = localStorage, shown = () => $("transcript")?.getAttribute("data-chat-id");
const unread = () => (S.getItem("numi:unread") || "").split(" ");
const notifying = () => S.getItem("numi:notify") && window.Notification && Notification.permission === "granted";
function showUnread() {
  all("#chat-list [data-chat-id]").forEach((i) => i.classList.toggle("unread", unread().includes(i.getAttribute("data-chat-id"))));
}
function markUnread(id, read) {
  S.setItem("numi:unread", unread().filter((x) => x && x !== id).concat(read ? [] : [id]).join(" "));
  showUnread();
}
// A mark going out (gaining `hidden`) is an answer finished, whoever hid it: the feed or the
// open chat's socket.
new MutationObserver((changes) => changes.forEach((c) => {
  const i = c.target.closest("[data-chat-id]"), id = i?.getAttribute("data-chat-id");
  if (!i || c.oldValue !== null || !c.target.matches(".answering-mark[hidden]")) return;
  if (id !== shown()) markUnread(id);
  else if (!document.hidden) return;
  if (notifying()) new Notification("Answer ready", {body: i.querySelector(".chat-link-title").textContent});
})).observe(document, {subtree: true, attributeFilter: ["hidden"], attributeOldValue: true});
on("htmx:afterSettle", showUnread);

on("DOMContentLoaded", () => {
  const toggle = $("notify-toggle"), status = $("notify-status");
  currentIntoView();
  markUnread(shown(), true);
  listen();  // the page came with the marks of its first load; changes come on the feed
  if (!toggle) return;
  toggle.disabled = !window.Notification;
  toggle.checked = notifying();
  toggle.onchange = () => {  // texts: data-* of #notify-status
    (toggle.checked ? Notification.requestPermission() : Promise.resolve("off")).then((answer) => {
      toggle.checked = answer === "granted";
      S.setItem("numi:notify", toggle.checked ? "1" : "");
      status.textContent = status.getAttribute("data-" + (toggle.checked ? "on" : answer));
    });
  };
});
