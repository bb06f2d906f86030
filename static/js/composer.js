// The composer never loses what was typed: the text and attachment chips stay until the
// server accepts the send (#composer-feedback carries `accepted` or the refusal), and a
// draft per chat (localStorage) survives navigation and reloads. It also grows with its
// text, sends on Enter, and uploads files picked, dropped or pasted. File names are set
// with textContent only: they are untrusted text.
(function () {
  "use strict";

  var Numi = window.Numi = window.Numi || {};
  var pending = null;  // the request id of a send not yet accepted or refused
  var pendingTimer = null;

  function form() { return document.getElementById("composer"); }
  function input() { return document.getElementById("composer-input"); }
  function chips() { return document.getElementById("composer-attachments"); }
  function draftKey() { var f = form(); return f ? "numi:draft:" + f.getAttribute("data-chat-id") : null; }
  function newRequestId() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    return "r-" + Date.now().toString(36) + "-" + Math.random().toString(36).slice(2);
  }

  // --- autogrow: up to 40 % of the visible height, then it scrolls ------------------------

  function grow() {
    var el = input();
    if (!el) return;
    var limit = Math.round((window.visualViewport ? window.visualViewport.height : window.innerHeight) * 0.4);
    el.style.height = "auto";
    el.style.height = Math.min(el.scrollHeight + 2, limit) + "px";
  }
  Numi.growComposer = grow;

  // --- drafts -----------------------------------------------------------------------------

  function saveDraft() {
    var key = draftKey();
    if (!key) return;
    var list = [];
    (chips() ? chips().querySelectorAll(".attachment-chip[data-attachment-id]") : []).forEach(function (li) {
      list.push({id: li.dataset.attachmentId, name: li.dataset.name, size: +li.dataset.size || 0, thumb: li.dataset.thumb || ""});
    });
    var text = input() ? input().value : "";
    try {
      if (text || list.length) localStorage.setItem(key, JSON.stringify({text: text, chips: list}));
      else localStorage.removeItem(key);
    } catch (e) { /* private mode or full storage: drafts are a nicety */ }
  }
  function restoreDraft() {
    var key = draftKey();
    if (!key || !input()) return;
    var draft = null;
    try { draft = JSON.parse(localStorage.getItem(key) || "null"); } catch (e) { draft = null; }
    if (!draft) return;
    if (typeof draft.text === "string" && !input().value) input().value = draft.text;
    (Array.isArray(draft.chips) ? draft.chips : []).forEach(function (c) {
      if (!c || !/^\d+$/.test(String(c.id))) return;
      var li = addChip(String(c.name || "file"), "", null, c.thumb && /^\/api\/attachments\/\d+\/thumbnail$/.test(c.thumb) ? c.thumb : "");
      uploaded(li, {id: +c.id, size: +c.size || 0, filename: c.name, thumbnail_url: li.dataset.thumb});
    });
    grow();
  }
  function clearComposer() {
    if (input()) input().value = "";
    if (chips()) chips().textContent = "";
    var key = draftKey();
    try { if (key) localStorage.removeItem(key); } catch (e) { /* see saveDraft */ }
    grow();
  }

  // --- sending ----------------------------------------------------------------------------

  function release() { pending = null; clearTimeout(pendingTimer); if (form()) form().classList.remove("sending"); }

  document.addEventListener("htmx:wsConfigSend", function (event) {
    var params = event.detail.parameters;
    if (params.type !== "send") return;
    var box = chips();
    if (!params.message || !params.message.trim() || Numi.isRunning() || pending ||
        (box && box.querySelector(".uploading"))) {
      event.preventDefault();
      return;
    }
    params.request_id = pending = newRequestId();
    try { params.timezone = Intl.DateTimeFormat().resolvedOptions().timeZone; } catch (e) { /* old browser */ }
    params.tz_offset = -new Date().getTimezoneOffset();
    var ids = params.attachments === undefined ? [] : [].concat(params.attachments);
    params.attachments = ids.map(function (id) { return parseInt(id, 10); });
    delete event.detail.headers;
    var feedback = document.getElementById("composer-feedback");
    if (feedback) feedback.textContent = "";
    form().classList.add("sending");
    // No answer at all (a dead socket that never comes back): let the person try again.
    clearTimeout(pendingTimer);
    pendingTimer = setTimeout(release, 30000);
  });

  // The server's word on the send: accepted clears the composer; a refusal leaves the text
  // and chips where they are, with the reason beside them.
  document.addEventListener("htmx:wsAfterMessage", function () {
    var feedback = document.getElementById("composer-feedback");
    if (!feedback) return;
    var accepted = feedback.getAttribute("data-accepted");
    if (accepted) {
      feedback.removeAttribute("data-accepted");
      if (accepted === pending) { release(); clearComposer(); }
    } else if (feedback.getAttribute("data-code") && pending) {
      release();
      if (input()) input().focus();
    }
  });

  document.addEventListener("keydown", function (event) {
    if (event.target && event.target.id === "composer-input" && event.key === "Enter" &&
        !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (form() && !Numi.isRunning()) form().requestSubmit();
    }
  });
  document.addEventListener("input", function (event) {
    if (event.target && event.target.id === "composer-input") { grow(); saveDraft(); }
  });
  window.addEventListener("resize", grow);

  // --- attachments ------------------------------------------------------------------------

  function addChip(text, className, list, thumb) {
    var li = document.createElement("li");
    li.className = "attachment-chip " + (className || "");
    li.dataset.name = text;
    if (thumb) {
      var img = document.createElement("img");
      img.className = "chip-thumb";
      img.alt = "";
      img.src = thumb;
      li.appendChild(img);
    }
    var name = document.createElement("span");
    name.className = "attachment-name";
    name.textContent = text;
    li.appendChild(name);
    (list || chips()).appendChild(li);
    return li;
  }

  function uploaded(li, attachment) {
    li.classList.remove("uploading");
    li.dataset.attachmentId = String(attachment.id);
    li.dataset.size = String(attachment.size || 0);
    if (attachment.thumbnail_url) li.dataset.thumb = attachment.thumbnail_url;
    var size = document.createElement("span");
    size.className = "attachment-size";
    size.textContent = attachment.size < 1024 ? attachment.size + " bytes" : (attachment.size / 1024).toFixed(1) + " KB";
    li.appendChild(size);
    var hidden = document.createElement("input");
    hidden.type = "hidden";
    hidden.name = "attachments";
    hidden.value = String(attachment.id);
    li.appendChild(hidden);
    var remove = document.createElement("button");
    remove.type = "button";
    remove.className = "attachment-remove";
    remove.setAttribute("aria-label", "Remove " + (li.dataset.name || "attachment"));
    remove.textContent = "×";
    li.appendChild(remove);
  }

  // `list` and `url`: the chip list and upload URL of another form (an edited message);
  // by default the composer's.
  function upload(files, list, url) {
    var f = form();
    var own = !list;
    list = list || chips();
    url = url || (f && f.dataset.uploadUrl);
    if (!list || !url || !files) return;
    Array.prototype.forEach.call(files, function (file) {
      var preview = /^image\//.test(file.type || "") && window.URL ? URL.createObjectURL(file) : "";
      var li = addChip(file.name || "file", "uploading", list, preview);
      var body = new FormData();
      body.append("file", file, file.name || "pasted");
      fetch(url, {method: "POST", body: body, credentials: "same-origin"})
        .then(function (response) {
          return response.json().then(function (data) { return {ok: response.ok, data: data}; });
        })
        .then(function (result) {
          if (!result.ok) throw new Error((result.data && result.data.error && result.data.error.message) || "Upload failed.");
          uploaded(li, result.data.attachments[0]);
          if (own) saveDraft();
        })
        .catch(function (error) {
          li.classList.remove("uploading");
          li.classList.add("failed");
          li.querySelector(".attachment-name").textContent = (file.name || "file") + ": " + error.message;
          setTimeout(function () { li.remove(); }, 8000);
        });
    });
  }

  document.addEventListener("click", function (event) {
    var target = event.target;
    if (!target.closest) return;
    if (target.closest("#attach-button")) {
      var picker = document.getElementById("composer-file");
      if (picker) picker.click();
      return;
    }
    var remove = target.closest(".attachment-remove");
    if (remove) {
      var chip = remove.closest(".attachment-chip");
      var inComposer = chip && chip.closest("#composer");
      chip.remove();
      if (inComposer) { saveDraft(); if (input()) input().focus(); }
    }
  });
  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target && target.id === "composer-file") {
      upload(target.files);
      target.value = "";
      if (input()) input().focus();
    } else if (target && target.classList && target.classList.contains("attach-input")) {
      var edit = target.closest("form");
      upload(target.files, edit && edit.querySelector(".attach-chips"), target.dataset.uploadUrl);
      target.value = "";
    }
  });
  document.addEventListener("dragover", function (event) {
    if (form() && event.dataTransfer && Array.prototype.indexOf.call(event.dataTransfer.types, "Files") >= 0) {
      event.preventDefault();
      form().classList.add("drop-target");
    }
  });
  document.addEventListener("dragleave", function () { if (form()) form().classList.remove("drop-target"); });
  document.addEventListener("drop", function (event) {
    if (!form() || !event.dataTransfer || !event.dataTransfer.files.length) return;
    event.preventDefault();
    form().classList.remove("drop-target");
    upload(event.dataTransfer.files);
  });
  document.addEventListener("paste", function (event) {
    if (!event.target || event.target.id !== "composer-input" || !event.clipboardData) return;
    var files = event.clipboardData.files;
    if (files && files.length) {
      event.preventDefault();
      upload(files);
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    restoreDraft();
    grow();
  });
})();
