// Artifacts: Preview on an HTML, SVG or Mermaid block (numi/web/live/fragments.py) opens it in
// the panel beside the chat, a full-screen sheet on a phone. It runs in a frame of its own
// (numi/web/artifacts.py): sandboxed with scripts but no same origin, so what the model
// wrote can run and never touch this page. The page posts the source to the frame once it
// says it is ready, and trusts nothing else the frame says but a drawn diagram's SVG.
// ‹ n/m › walks the same artifact through the answer's versions (the artifacts API).
// Loaded on the first Preview (app.js), which this then handles, as it does every later one.

const Numi = window.Numi, {$, on} = Numi;
const panel = () => $("artifact-panel");
let current = null;  // {kind, lang, code, svg, opener, messageId, index, versions, n}
let frame = null;

const EXTENSIONS = {html: "html", svg: "svg", mermaid: "svg"};
const NAMES = {html: "HTML", svg: "SVG", mermaid: "Mermaid diagram"};

function blockSource(block) {
  return block.querySelector("pre")?.textContent || "";
}

// Which artifact of its message a block is: the page and the API count them alike.
function blockIndex(block) {
  const body = block.closest(".msg-body, .turn") || document;
  return [...body.querySelectorAll(".code-block[data-artifact]")].indexOf(block);
}

function setTab(name) {
  const preview = name === "preview";
  $("artifact-tab-preview").setAttribute("aria-selected", String(preview));
  $("artifact-tab-code").setAttribute("aria-selected", String(!preview));
  $("artifact-preview").hidden = !preview;
  $("artifact-code").hidden = preview;
}

function run() {
  const holder = $("artifact-preview");
  frame?.remove();
  frame = document.createElement("iframe");
  frame.setAttribute("sandbox", "allow-scripts");
  frame.setAttribute("referrerpolicy", "no-referrer");
  frame.title = (NAMES[current.kind] || "Artifact") + " preview";
  frame.className = "artifact-frame";
  frame.src = panel().dataset.frameUrl;
  panel().dataset.state = "loading";
  holder.replaceChildren(frame);
}

window.addEventListener("message", (event) => {
  if (!frame || event.source !== frame.contentWindow || !current) return;
  const data = event.data || {};
  if (data.type === "numi-artifact-ready" && !current.sent) {
    current.sent = true;
    panel().dataset.state = "sent";
    frame.contentWindow.postMessage({type: "numi-artifact", kind: current.kind, code: current.code}, "*");
  } else if (data.type === "numi-artifact-drawn" && current.kind === "mermaid" && typeof data.svg === "string") {
    current.svg = data.svg;
  }
});

function show(artifact) {
  current = Object.assign(current || {}, artifact, {sent: false, svg: null});
  $("artifact-title").textContent = NAMES[current.kind] || "Artifact";
  $("artifact-code").querySelector("code").textContent = current.code;
  renderVersions();
  run();
}

function renderVersions() {
  const versions = current.versions;
  $("artifact-versions").hidden = !versions || versions.length < 2;
  if (versions && versions.length > 1) {
    $("artifact-position").textContent = `${current.n}/${versions.length}`;
    $("artifact-prev").disabled = current.n <= 1;
    $("artifact-next").disabled = current.n >= versions.length;
  }
}

function open(button) {
  // An answer's code block, or a run_python output with script (its tool card): the latter
  // has no versions to walk, and is not counted among the answer's artifacts.
  const block = button.closest(".code-block, .code-sandboxed");
  const message = block.classList.contains("code-block") && block.closest("[data-message-id]");
  const messageId = message ? parseInt(message.getAttribute("data-message-id"), 10) : null;
  current = {opener: button, messageId, index: blockIndex(block), versions: null, n: 1};
  panel().hidden = false;
  document.querySelector(".layout")?.classList.add("artifact-open");
  // On a phone the panel is a sheet over the chat: what is behind it cannot be reached.
  if ($("main")) $("main").inert = Numi.narrow();
  setTab("preview");
  show({kind: block.dataset.artifact, lang: block.querySelector(".code-lang")?.textContent || "", code: blockSource(block)});
  $("artifact-close").focus();
  if (messageId) loadVersions(messageId);
}

// The same artifact in each version of the answer that has one at this place.
async function loadVersions(messageId, {newest = false, before = 0} = {}) {
  const route = $("transcript")?.dataset.artifactsUrl;
  const opened = current;
  if (!route) return;
  let body;
  try {
    const response = await fetch(Numi.urlFor(route, messageId), {headers: {Accept: "application/json"}});
    if (!response.ok) return;
    body = await response.json();
  } catch { return; }
  if (current !== opened) return;
  const versions = body.versions.map((v) => ({message_id: v.message_id, artifact: v.artifacts[opened.index]})).filter((v) => v.artifact && !v.artifact.error);
  const n = versions.findIndex((v) => v.message_id === messageId) + 1;
  if (!n) return;
  opened.versions = versions;
  if (newest) {
    if (versions.length <= before) return;
    opened.n = versions.length;
    return show(versions[versions.length - 1].artifact);
  }
  opened.n = n;
  renderVersions();
}

// A regeneration or an edit that finishes while the panel shows this answer's artifact:
// the new version's artifact is shown (once the page has swapped the saved answer in).
let refreshTimer = null;
on("htmx:oobAfterSwap", () => {
  if (!current?.messageId || panel()?.hidden) return;
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(async () => {
    // The panel may have closed (or shown another answer's artifact) in the meantime;
    // any swap counts here, the sidebar feed's included.
    const opened = current;
    if (!opened?.messageId || panel()?.hidden) return;
    await loadVersions(opened.messageId, {newest: true, before: opened.versions?.length || 1});
  }, 300);
});

function step(delta) {
  const versions = current?.versions;
  if (!versions) return;
  const n = Math.min(Math.max(current.n + delta, 1), versions.length);
  if (n === current.n) return;
  current.n = n;
  show(versions[n - 1].artifact);
}

function close() {
  if (panel().hidden) return;
  clearTimeout(refreshTimer);
  panel().hidden = true;
  frame?.remove();
  frame = null;
  document.querySelector(".layout")?.classList.remove("artifact-open");
  if ($("main")) $("main").inert = false;
  const back = current?.opener;
  current = null;
  if (back && back.isConnected) back.focus();
}

function download() {
  if (!current) return;
  const text = current.kind === "mermaid" ? current.svg : current.code;
  if (!text) return;
  const type = current.kind === "html" ? "text/html" : "image/svg+xml";
  const link = Object.assign(document.createElement("a"), {
    href: URL.createObjectURL(new Blob([text], {type})),
    download: `artifact.${EXTENSIONS[current.kind] || "txt"}`,
  });
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 0);
}

on("click", (event) => {
  const preview = Numi.hit(event, ".preview-artifact");
  if (preview) return open(preview);
  const target = Numi.hit(event, "#artifact-panel button");
  if (!target) return;
  ({
    "artifact-close": close,
    "artifact-tab-preview": () => setTab("preview"),
    "artifact-tab-code": () => setTab("code"),
    "artifact-prev": () => step(-1),
    "artifact-next": () => step(1),
    "artifact-download": download,
    "artifact-copy": () => Numi.copyWithFeedback(current?.code || "", target),
  })[target.id]?.();
});

// Esc closes the panel before it stops an answer (capture: before shortcuts.js sees it).
on("keydown", (event) => {
  if (event.key !== "Escape" || panel()?.hidden !== false || event.target.closest?.("dialog[open]")) return;
  event.preventDefault();
  event.stopPropagation();
  close();
}, true);

// app.js's first-use loader hands over a Preview clicked while this module loaded, when the
// page has swapped that button out since (its block is still readable from the button).
export const activate = open;
