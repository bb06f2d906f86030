// Compare (partials/_compare_picker.html, _compare_lanes.html): the picker's count and its
// limit of 4, and on a phone which lane tab is in view. Lanes stream as server HTML.
const $ = (id) => document.getElementById(id);
const boxes = () => [...document.querySelectorAll("#compare-picker input[name=compare]")];

function update() {
  const checked = boxes().filter((box) => box.checked).length;
  $("compare-count").textContent = checked ? ` · ${checked}` : "";
  $("compare-picker").toggleAttribute("data-active", checked > 0);
  boxes().forEach((box) => { box.disabled = !box.checked && checked >= 4; });
}
document.addEventListener("change", (event) => {
  if (event.target.closest?.("#compare-picker")) update();
});

// One compare per send: the checked routes go with it, then the picker is cleared.
document.addEventListener("htmx:wsConfigSend", (event) => {
  const p = event.detail.parameters;
  if (p.type !== "send" || p.compare === undefined || event.defaultPrevented) return;
  boxes().forEach((box) => { box.checked = false; });
  $("compare-picker").open = false;
  update();
});

// A phone swipes lanes sideways: the tab of the lane in view is marked.
document.addEventListener("scroll", (event) => {
  const lanes = event.target;
  if (!lanes.classList?.contains("compare-lanes")) return;
  const index = Math.round(lanes.scrollLeft / Math.max(1, lanes.clientWidth));
  lanes.parentElement.querySelectorAll(".compare-tab").forEach((tab, i) => {
    tab.setAttribute("aria-current", i === index ? "true" : "false");
  });
}, true);
