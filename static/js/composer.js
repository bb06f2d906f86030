// The composer keeps text and chips until the server accepts the send (#composer-feedback),
// keeps a draft per chat, grows, and uploads files. File names are untrusted: textContent.
(function () {
  "use strict";

  var Numi = window.Numi = window.Numi || {};
  var pending = null, pendingTimer = null;  // the request id of a send not yet answered
  var on = document.addEventListener.bind(document);
  function $(id) { return document.getElementById(id); }
  function form() { return $("composer"); }
  function input() { return $("composer-input"); }
  function chips() { return $("composer-attachments"); }
  function draftKey() { return form() && "numi:draft:" + form().getAttribute("data-chat-id"); }

  function grow() {
    var el = input();
    if (!el) return;
    var visible = window.visualViewport ? visualViewport.height : innerHeight;
    el.style.height = "auto";
    el.style.height = Math.min(el.scrollHeight + 2, Math.round(visible * 0.4)) + "px";
  }

  function saveDraft() {
    var key = draftKey(), list = [], text = input() ? input().value : "";
    if (!key) return;
    chips().querySelectorAll(".attachment-chip[data-attachment-id]").forEach(function (li) {
      list.push({id: li.dataset.attachmentId, name: li.dataset.name, size: +li.dataset.size || 0, thumb: li.dataset.thumb || ""});
    });
    try {
      if (text || list.length) localStorage.setItem(key, JSON.stringify({text: text, chips: list}));
      else localStorage.removeItem(key);
    } catch (e) { /* private mode or full storage: drafts are a nicety */ }
  }
  function restoreDraft() {
    var key = draftKey(), draft = null;
    if (!key || !input()) return;
    try { draft = JSON.parse(localStorage.getItem(key) || "null"); } catch (e) { /* unreadable: no draft */ }
    if (!draft) return;
    if (typeof draft.text === "string" && !input().value) input().value = draft.text;
    (Array.isArray(draft.chips) ? draft.chips : []).forEach(function (c) {
      if (!c || !/^\d+$/.test(c.id)) return;
      var thumb = /^\/api\/attachments\/\d+\/thumbnail$/.test(c.thumb) ? c.thumb : "";
      uploaded(addChip(String(c.name || "file"), "", null, thumb), {id: c.id, size: +c.size || 0, thumbnail_url: thumb});
    });
  }
  function clearComposer() {
    input().value = "";
    chips().textContent = "";
    try { localStorage.removeItem(draftKey()); } catch (e) { /* see saveDraft */ }
    grow();
  }

  function release() { pending = null; clearTimeout(pendingTimer); }

  on("htmx:wsConfigSend", function (event) {
    var p = event.detail.parameters;
    if (p.type !== "send") return;
    if (!p.message || !p.message.trim() || Numi.isRunning() || pending || chips().querySelector(".uploading")) {
      event.preventDefault();
      return;
    }
    p.request_id = pending = crypto.randomUUID ? crypto.randomUUID() : "r-" + Date.now() + Math.random().toString(36).slice(2);
    try { p.timezone = Intl.DateTimeFormat().resolvedOptions().timeZone; } catch (e) { /* old browser */ }
    p.tz_offset = -new Date().getTimezoneOffset();
    p.attachments = [].concat(p.attachments === undefined ? [] : p.attachments).map(function (id) { return parseInt(id, 10); });
    delete event.detail.headers;
    $("composer-feedback").textContent = "";
    clearTimeout(pendingTimer);
    pendingTimer = setTimeout(release, 30000);  // no word at all: let the person try again
  });

  // Accepted empties the composer; a refusal leaves it as it was, the reason beside it.
  on("htmx:wsAfterMessage", function () {
    var feedback = $("composer-feedback"), accepted = feedback && feedback.getAttribute("data-accepted");
    if (accepted) {
      feedback.removeAttribute("data-accepted");
      if (accepted === pending) { release(); clearComposer(); }
    } else if (feedback && feedback.getAttribute("data-code") && pending) {
      release();
      input().focus();
    }
  });

  on("keydown", function (event) {
    if (event.target.id === "composer-input" && event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (!Numi.isRunning()) form().requestSubmit();
    }
  });
  on("input", function (event) { if (event.target.id === "composer-input") { grow(); saveDraft(); } });
  addEventListener("resize", grow);

  function el(tag, className, text) {
    var node = document.createElement(tag);
    node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function addChip(name, className, list, thumb) {
    var li = el("li", "attachment-chip " + className);
    li.dataset.name = name;
    if (thumb) {
      var img = el("img", "chip-thumb");
      img.alt = "";
      img.src = thumb;
      li.appendChild(img);
    }
    li.appendChild(el("span", "attachment-name", name));
    (list || chips()).appendChild(li);
    return li;
  }
  function uploaded(li, a) {
    li.classList.remove("uploading");
    li.dataset.attachmentId = a.id;
    li.dataset.size = a.size || 0;
    if (a.thumbnail_url) li.dataset.thumb = a.thumbnail_url;
    li.appendChild(el("span", "attachment-size", a.size < 1024 ? a.size + " bytes" : (a.size / 1024).toFixed(1) + " KB"));
    var hidden = el("input", "");
    hidden.type = "hidden";
    hidden.name = "attachments";
    hidden.value = a.id;
    li.appendChild(hidden);
    var remove = el("button", "attachment-remove", "×");
    remove.type = "button";
    remove.setAttribute("aria-label", "Remove " + li.dataset.name);
    li.appendChild(remove);
  }

  // `list`, `url`: an edit form's chips and upload URL; by default the composer's.
  function upload(files, list, url) {
    var own = !list;
    list = list || chips();
    url = url || form().dataset.uploadUrl;
    Array.prototype.forEach.call(files, function (file) {
      var li = addChip(file.name || "file", "uploading", list, /^image\//.test(file.type) ? URL.createObjectURL(file) : "");
      var body = new FormData();
      body.append("file", file, file.name || "pasted");
      fetch(url, {method: "POST", body: body, credentials: "same-origin"})
        .then(function (r) { return r.json().then(function (data) { return {ok: r.ok, data: data}; }); })
        .then(function (r) {
          if (!r.ok) throw new Error((r.data.error && r.data.error.message) || "Upload failed.");
          uploaded(li, r.data.attachments[0]);
          if (own) saveDraft();
        })
        .catch(function (error) {
          li.className = "attachment-chip failed";
          li.querySelector(".attachment-name").textContent = (file.name || "file") + ": " + error.message;
          setTimeout(function () { li.remove(); }, 8000);
        });
    });
  }

  on("click", function (event) {
    var t = event.target.closest ? event.target : null, remove = t && t.closest(".attachment-remove");
    if (t && t.closest("#attach-button")) $("composer-file").click();
    if (!remove) return;
    var chip = remove.closest(".attachment-chip"), own = chip.closest("#composer");
    chip.remove();
    if (own) { saveDraft(); input().focus(); }
  });
  on("change", function (event) {
    var t = event.target;
    if (t.id === "composer-file") {
      upload(t.files);
      input().focus();
    } else if (t.classList.contains("attach-input")) {
      upload(t.files, t.closest("form").querySelector(".attach-chips"), t.dataset.uploadUrl);
    } else {
      return;
    }
    t.value = "";
  });
  function hasFiles(event) { return form() && event.dataTransfer && Array.prototype.indexOf.call(event.dataTransfer.types, "Files") >= 0; }
  on("dragover", function (event) {
    if (!hasFiles(event)) return;
    event.preventDefault();
    form().classList.add("drop-target");
  });
  on("dragleave", function () { if (form()) form().classList.remove("drop-target"); });
  on("drop", function (event) {
    if (!hasFiles(event) || !event.dataTransfer.files.length) return;
    event.preventDefault();
    form().classList.remove("drop-target");
    upload(event.dataTransfer.files);
  });
  on("paste", function (event) {
    var files = event.target.id === "composer-input" && event.clipboardData && event.clipboardData.files;
    if (files && files.length) {
      event.preventDefault();
      upload(files);
    }
  });

  on("DOMContentLoaded", function () { restoreDraft(); grow(); });
})();
