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
  // Esc in a rename field, an open row menu or the open search is theirs (they close first, shortcuts.js).
  if (event.key === "Escape" && !event.target.closest(".rename-form, #sidebar-search") &&
      !nav.querySelector(".row-menu[open]")) {
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

// One tab stop per chat (its link): → reaches the row's "…", ← comes back, ↑ and ↓ walk the
// chats; in an open "…" menu ↑ and ↓ walk its items.
const menuStops = (menu) => [...menu.querySelectorAll(".menu-items .menu-item")].filter((el) => el.offsetParent !== null);
on("keydown", (event) => {
  const t = event.target, item = t.closest?.(".chat-item"), key = event.key;
  if (!item || event.altKey || event.ctrlKey || event.metaKey || !t.matches("a, button, summary, label")) return;
  const link = item.querySelector(".chat-link"), more = item.querySelector(".row-menu-button");
  const menu = t.closest(".row-menu");
  let next = null;
  if (menu?.open && (key === "ArrowDown" || key === "ArrowUp")) {
    const stops = menuStops(menu), at = stops.indexOf(t);
    next = stops[(at + (key === "ArrowDown" ? 1 : -1) + stops.length) % stops.length];
  } else if (t === link && key === "ArrowRight") next = more;
  else if (t === more && key === "ArrowLeft" && !menu.open) next = link;
  else if ((t === link || t === more) && (key === "ArrowDown" || key === "ArrowUp")) {
    const links = [...(item.closest("ul, ol") || document).querySelectorAll(".chat-item .chat-link")].filter((a) => a.offsetParent !== null);
    next = links[links.indexOf(link) + (key === "ArrowDown" ? 1 : -1)];
  }
  if (next) { event.preventDefault(); next.focus(); }
});

// A row's "…" menu: fixed beside its button on a wide screen (the list scrolls and would clip
// it), below or, near the bottom, above; on a phone it is the sheet (messages.css).
function placeRowMenu(menu) {
  const items = menu.querySelector(".menu-items");
  items.style.top = items.style.bottom = items.style.left = "";
  if (Numi.narrow()) return;
  const r = menu.querySelector("summary").getBoundingClientRect();
  items.style.left = r.left + "px";
  if (r.bottom + items.offsetHeight + 8 > innerHeight) items.style.top = Math.max(8, r.top - items.offsetHeight - 4) + "px";
  else items.style.top = r.bottom + 4 + "px";
}
on("toggle", (event) => {
  const menu = event.target;
  if (!menu.matches?.(".row-menu") || !menu.open) return;
  all(".row-menu[open]").forEach((other) => { if (other !== menu) other.open = false; });
  placeRowMenu(menu);
}, true);
// The items come from the server on first opening: place the filled menu again, and an
// opening by keyboard goes on to its first item.
on("htmx:afterSwap", (event) => {
  const menu = event.detail.target?.closest?.(".row-menu");
  if (!menu || !menu.open) return;
  placeRowMenu(menu);
  if (document.activeElement === menu.querySelector("summary")) menuStops(menu)[0]?.focus();
});
on("keydown", (event) => {  // Enter on a loaded menu's button goes into the menu too
  const t = event.target;
  if ((event.key === "Enter" || event.key === " ") && t.matches?.(".row-menu-button") && t.parentElement.querySelector(".menu-item")) {
    requestAnimationFrame(() => { if (t.parentElement.open) menuStops(t.parentElement)[0]?.focus(); });
  }
});
// An item chosen closes its menu; "Select chats" enters selection mode with its row chosen.
on("click", (event) => {
  const choice = event.target.closest?.(".row-menu .menu-item:not(summary)");
  if (!choice) return;
  const menu = choice.closest(".row-menu"), row = menu.closest(".chat-item");
  if (choice.matches(".row-select")) {
    event.preventDefault();
    $("select-mode").checked = true;
    const box = row.querySelector(".chat-select");
    if (box) { box.checked = true; box.focus(); }
  }
  menu.open = false;
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
