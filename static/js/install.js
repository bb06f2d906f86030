// The installable page: registers the service worker (/sw.js, whole-site scope) and offers
// "Reload to update" when a new release's worker is waiting. The worker takes over only
// when the person asks, so a page never runs half old, half new.

const Numi = window.Numi, {$, on} = Numi;
const sw = navigator.serviceWorker;

function offerUpdate(registration) {
  const bar = $("update-banner");
  if (!bar || !registration.waiting || !sw.controller) return;
  bar.hidden = false;
  bar.querySelector("button").onclick = () => registration.waiting?.postMessage({type: "skip-waiting"});
}

// The worker's URL and scope are the page's (base.html's data-worker-url and -scope).
const {workerUrl, workerScope} = document.body.dataset;

if (sw && window.isSecureContext && workerUrl) {
  let reloading = false;
  sw.register(workerUrl, {scope: workerScope}).then((registration) => {
    offerUpdate(registration);
    registration.addEventListener("updatefound", () => {
      const incoming = registration.installing;
      incoming?.addEventListener("statechange", () => {
        if (incoming.state === "installed") offerUpdate(registration);
      });
    });
    // A page left open for days still hears about a release.
    setInterval(() => registration.update().catch(() => {}), 60 * 60 * 1000);
  }).catch(() => { /* no worker (private window, blocked): the page works as before */ });
  sw.addEventListener("controllerchange", () => {
    // Only after "Reload to update" (the first worker's claim finds no controller before).
    if (reloading || !$("update-banner") || $("update-banner").hidden) return;
    reloading = true;
    location.reload();
  });
}

// Signing out forgets the pages kept for offline reading (the server also sends
// Clear-Site-Data; this covers browsers that ignore it).
on("submit", (event) => {
  if (event.target.matches?.("form[action$='/logout'], form[action$='/logout-everywhere']")) sw?.controller?.postMessage({type: "forget-pages"});
}, true);
