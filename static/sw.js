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
// Nothing of /api/, /ws/, HTMX fragments or other methods than GET is touched: those are
// live and private.

const STATIC_CACHE = "numi-static-" + SHELL.version;
const PAGES_CACHE = "numi-pages";
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
    }
    await self.clients.claim();
    // Kept pages name the old release's files, gone now: fetch them again (or forget them).
    if (updated) await refreshPages();
  })());
});

async function refreshPages() {
  const cache = await caches.open(PAGES_CACHE);
  for (const request of await cache.keys()) {
    try {
      const response = await fetch(request.url);
      if (response.status === 200 && response.type === "basic") await cache.put(request, response);
      else await cache.delete(request);
    } catch (error) {
      await cache.delete(request);
    }
  }
}

// The newest MAX_PAGES pages are kept; older ones are dropped (a put adds at the end).
const MAX_PAGES = 50;
async function trimPages(cache) {
  const keys = await cache.keys();
  for (const request of keys.slice(0, Math.max(0, keys.length - MAX_PAGES))) await cache.delete(request);
}

self.addEventListener("message", (event) => {
  if (event.data?.type === "skip-waiting") self.skipWaiting();
  else if (event.data?.type === "forget-pages") event.waitUntil(caches.delete(PAGES_CACHE));
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
  try {
    const response = await fetch(request);
    const cacheable = PAGE_PATHS.test(url.pathname) && response.status === 200 && response.type === "basic" && !url.search
      && (response.headers.get("Content-Type") || "").startsWith("text/html")
      && !/no-store/.test(response.headers.get("Cache-Control") || "");
    if (cacheable) {
      const cache = await caches.open(PAGES_CACHE);
      await cache.delete(url.pathname);  // re-added at the end: the newest visit
      await cache.put(url.pathname, response.clone());
      await trimPages(cache);
    }
    else if (response.status === 401 || response.status === 403) await caches.delete(PAGES_CACHE);
    return response;
  } catch (error) {
    const copy = PAGE_PATHS.test(url.pathname) && await caches.match(url.pathname, {cacheName: PAGES_CACHE});
    if (copy) return copy;
    const offline = await caches.match(SHELL.urls.find((u) => u.startsWith("/static/offline.html")));
    if (offline) return offline;
    throw error;
  }
}
