// Copy buttons: a code block's text (.copy-code, in partials/_md_blocks.html) and a
// message's markdown source (.copy-message, its data-markdown attribute). One delegated
// listener, so buttons added by streamed fragments work too; no inline handlers (CSP).

const Numi = window.Numi;

function copy(text) {
  if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
  // Pages served over plain http on another host have no Clipboard API.
  const area = Object.assign(document.createElement("textarea"), {value: text, readOnly: true});
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.appendChild(area);
  area.select();
  const ok = document.execCommand("copy");
  area.remove();
  return ok ? Promise.resolve() : Promise.reject(new Error("copy refused"));
}

function confirm(button, label) {
  button.dataset.label = button.dataset.label || button.textContent;
  button.textContent = label;
  clearTimeout(button.copyTimer);
  button.copyTimer = setTimeout(() => { button.textContent = button.dataset.label; }, 1500);
}

Numi.on("click", (event) => {
  const button = Numi.hit(event, ".copy-code, .copy-message");
  if (!button) return;
  const pre = button.classList.contains("copy-code") && button.closest(".code-block").querySelector("pre");
  copy(pre ? pre.textContent : button.dataset.markdown || "").then(() => confirm(button, "Copied"), () => confirm(button, "Copy failed"));
});
