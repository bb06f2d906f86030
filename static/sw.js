// The service worker (served as /sw.js by numi/web/installable.py, which puts `SHELL`,
// the app shell's fingerprinted URLs and their version, before this file).
//
// What it keeps, and why no more:
// - static files under their content-hashed URLs (one cache per release, old ones deleted);
// - the home page and chat pages the user has opened, keyed by URL, so a visited chat opens
//   offline (any other page offline gets static/offline.html) (the page then shows "Reconnecting…" and its outbox as it does on a lost
//   connection). A page is fetched from the network first, always; the copy is only for
//   when the network fails. Logout clears them (Clear-Site-Data) and so does signing out.
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
    for (const name of await caches.keys()) {
      if (name.startsWith("numi-static-") && name !== STATIC_CACHE) await caches.delete(name);
    }
    await self.clients.claim();
  })());
});

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
    if (cacheable) await (await caches.open(PAGES_CACHE)).put(url.pathname, response.clone());
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
