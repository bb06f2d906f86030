// The service worker (served as /sw.js by numi/web/installable.py, which puts `SHELL`,
// the app shell's fingerprinted URLs and their version, before this file).
//
// What it keeps, and why no more:
// - static files under their content-hashed URLs (one cache per release, old ones deleted);
// - the home page and the last 50 chat pages the user has opened, keyed by URL, so a
//   visited chat opens offline: it then shows "Reconnecting…" and its outbox, as on a lost
//   connection (any other page offline gets static/offline.html). A page is fetched from
//   the network first, always; the copy is only for when the network fails. A new release
//   fetches the kept pages again; logout clears them (Clear-Site-Data).
// Kept pages belong to one session (numi/web/offline_pages.py): their cache is named by the
// session's page key, which every page names in its `Numi-Page-Key` header. A page without
// a key (a redirect to the login page, the token form, a 401) or with another key (someone
// else signed in) drops them all. Offline, a kept page is served only while the browser's
// `numi_page_key` cookie still names the key it was kept under: an ended or expired
// session, or another person's, gets the offline note. A `no-store` page (a temporary
// chat) is never kept, and its old copy goes.
// Nothing of /api/, /ws/, HTMX fragments or other methods than GET is touched: those are
// live and private.

const STATIC_CACHE = "numi-static-" + SHELL.version;
const PAGES_PREFIX = "numi-pages-";  // + the page key of the session the pages belong to
const PAGE_KEY_HEADER = "Numi-Page-Key";
const PAGE_KEY_COOKIE = "numi_page_key";
const PAGE_PATHS = /^\/(c\/[0-9a-f-]{36})?$/;

self.addEventListener("install", (event) => {
  event.waitUntil((async () => {
    const cache = await caches.open(STATIC_CACHE);
    await cache.addAll(SHELL.urls);
    // The first worker takes over at once; a new release waits for "Reload to update".
    if (!self.registration.active) await self.skipWaiting();
  })());
});

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    let updated = false;
    for (const name of await caches.keys()) {
      if (name.startsWith("numi-static-") && name !== STATIC_CACHE) updated = await caches.delete(name);
      // The release before kept pages under no session at all: they go.
      else if (name === "numi-pages") await caches.delete(name);
    }
    await self.clients.claim();
    // Kept pages name the old release's files, gone now: fetch them again (or forget them).
    if (updated) await refreshPages();
  })());
});

async function refreshPages() {
  const name = await pagesCacheName();
  if (!name) return;
  const cache = await caches.open(name);
  for (const request of await cache.keys()) {
    try {
      const response = await fetch(request.url);
      if (keepable(response) && response.headers.get(PAGE_KEY_HEADER) === keyOf(name)) await cache.put(request, response);
      else await cache.delete(request);
    } catch (error) {
      await cache.delete(request);
    }
  }
}

// --- whose pages are kept ------------------------------------------------------------------

// The one pages cache, if any: its name carries the page key of the session it belongs to.
async function pagesCacheName() {
  return (await caches.keys()).find((name) => name.startsWith(PAGES_PREFIX));
}

function keyOf(cacheName) {
  return cacheName.slice(PAGES_PREFIX.length);
}

async function forgetPages(exceptName) {
  for (const name of await caches.keys()) {
    if (name.startsWith(PAGES_PREFIX) && name !== exceptName) await caches.delete(name);
  }
}

// The page key the browser's session cookie goes with now: a string, null (no session),
// or undefined where a worker cannot read cookies (then the last page seen decides).
async function browserPageKey() {
  if (!self.cookieStore) return undefined;
  try {
    const cookie = await self.cookieStore.get(PAGE_KEY_COOKIE);
    return cookie ? cookie.value : null;
  } catch (error) {
    return undefined;
  }
}

function keepable(response) {
  return response.status === 200 && response.type === "basic"
    && (response.headers.get("Content-Type") || "").startsWith("text/html")
    && !/no-store/.test(response.headers.get("Cache-Control") || "");
}

// The newest MAX_PAGES pages are kept; older ones are dropped (a put adds at the end).
const MAX_PAGES = 50;
async function trimPages(cache) {
  const keys = await cache.keys();
  for (const request of keys.slice(0, Math.max(0, keys.length - MAX_PAGES))) await cache.delete(request);
}

self.addEventListener("message", (event) => {
  if (event.data?.type === "skip-waiting") self.skipWaiting();
  else if (event.data?.type === "forget-pages") event.waitUntil(forgetPages());
});

self.addEventListener("fetch", (event) => {
  const request = event.request, url = new URL(request.url);
  if (request.method !== "GET" || url.origin !== location.origin) return;
  if (url.pathname.startsWith("/static/")) {
    event.respondWith(staticFile(request, url));
  } else if (request.mode === "navigate" && !url.pathname.startsWith("/api/")) {
    event.respondWith(page(request, url));
  }
  // Everything else (the API, WebSockets, fragments) goes to the network as if there were
  // no worker.
});

async function staticFile(request, url) {
  const cache = await caches.open(STATIC_CACHE);
  const hit = await cache.match(request);
  if (hit) return hit;
  const response = await fetch(request);
  // Only a fingerprinted URL names one version of a file for good.
  if (response.ok && url.searchParams.has("v")) await cache.put(request, response.clone());
  return response;
}

async function page(request, url) {
  let response;
  try {
    response = await fetch(request);
  } catch (error) {
    const copy = PAGE_PATHS.test(url.pathname) && await keptCopy(url.pathname);
    if (copy) return copy;
    const offline = await caches.match(SHELL.urls.find((u) => u.startsWith("/static/offline.html")));
    if (offline) return offline;
    throw error;
  }
  await keep(url, response);
  return response;
}

// What a page answered online says about the kept pages: whose they are, and this one's copy.
async function keep(url, response) {
  const key = response.headers.get(PAGE_KEY_HEADER);
  if (!key) {
    // A redirect (to the login page), 401/403, the token form: no session is signed in here.
    // (A 500 without a key says nothing about the session and keeps them.)
    if (response.type === "opaqueredirect" || response.redirected || response.status === 401
        || response.status === 403 || response.ok) await forgetPages();
    return;
  }
  const name = PAGES_PREFIX + key;
  await forgetPages(name);  // another session's pages, if any
  // A chat opened on one message (`?at=`) leaves the kept copy of the chat as it is.
  if (!PAGE_PATHS.test(url.pathname) || url.search) return;
  const cache = await caches.open(name);
  // Re-added at the end when kept (the newest visit); gone when no longer keepable (a
  // temporary chat, a deleted one).
  await cache.delete(url.pathname);
  if (keepable(response)) {
    await cache.put(url.pathname, response.clone());
    await trimPages(cache);
  }
}

async function keptCopy(path) {
  const name = await pagesCacheName();
  if (!name) return undefined;
  const browserKey = await browserPageKey();
  if (browserKey !== undefined && browserKey !== keyOf(name)) {
    await forgetPages();  // the session that kept them has ended, or is someone else's
    return undefined;
  }
  return caches.match(path, {cacheName: name});
}
