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

// The search: a route stays in the list while every word typed is in its model's name or
// its endpoint's; a ticked route always stays, so what goes with the send is in view.
const routes = () => [...document.querySelectorAll("#compare-picker .compare-route")];
function filter(search) {
  const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
  let matches = 0;
  routes().forEach((route) => {
    const match = words.every((word) => route.dataset.words.includes(word));
    route.hidden = !match && !route.querySelector("input").checked;
    if (match) matches += 1;
  });
  search.parentElement.querySelector(".compare-none").hidden = matches > 0;
}
document.addEventListener("input", (event) => {
  if (event.target.matches?.(".compare-search")) filter(event.target);
});
document.addEventListener("keydown", (event) => {
  const search = event.target.closest?.(".compare-search");
  if (!search) return;
  if (event.key === "Enter") {
    // Not the composer's send: Enter ticks the first match that is not ticked yet.
    event.preventDefault();
    const box = routes().filter((route) => !route.hidden).map((route) => route.querySelector("input"))
      .find((input) => !input.checked && !input.disabled);
    box?.click();
  } else if (event.key === "Escape") {
    // Esc clears the search first, then closes the picker (and never stops a turn).
    event.preventDefault();
    event.stopPropagation();
    if (search.value) { search.value = ""; filter(search); } else {
      $("compare-picker").open = false;
      $("compare-picker").querySelector("summary").focus();
    }
  }
}, true);  // before shortcuts.js, whose Esc would close the whole "+" menu
// Opened, the search has the focus where there is a keyboard (a phone's would cover the list).
document.addEventListener("toggle", (event) => {
  if (event.target.id === "compare-picker" && event.target.open && matchMedia("(hover: hover)").matches) {
    event.target.querySelector(".compare-search")?.focus();
  }
}, true);

// One compare per send: the checked routes go with it, then the picker is cleared.
document.addEventListener("htmx:wsConfigSend", (event) => {
  const p = event.detail.parameters;
  if (p.type !== "send" || p.compare === undefined || event.defaultPrevented) return;
  boxes().forEach((box) => { box.checked = false; });
  const search = $("compare-picker").querySelector(".compare-search");
  search.value = "";
  filter(search);
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
