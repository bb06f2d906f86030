// Numi's one small script: what HTML and htmx cannot do on their own — the resume cursor,
// Enter to send, autoscroll, the connection indicator. No eval, no inline handlers (the
// page's CSP forbids both). Everything else is htmx and server-rendered fragments.
(function () {
  "use strict";

  var stickToBottom = true;

  function transcript() { return document.getElementById("transcript"); }
  function isRunning() {
    var controls = document.getElementById("composer-controls");
    return controls && controls.getAttribute("data-running") === "1";
  }
  function setConnection(state) {
    var dot = document.getElementById("connection");
    if (dot) dot.setAttribute("data-state", state);
    document.body.setAttribute("data-connection", state);
  }
  function newRequestId() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    return "r-" + Date.now().toString(36) + "-" + Math.random().toString(36).slice(2);
  }
  function scrollToBottom() {
    var t = transcript();
    if (t) t.scrollTop = t.scrollHeight;
  }

  // --- the live connection ---------------------------------------------------------------

  // On every (re)connect, tell the server what this page already shows, so it replays
  // exactly the missed events (or a snapshot of the running turn).
  document.addEventListener("htmx:wsOpen", function (event) {
    var cursor = document.getElementById("event-cursor");
    var lastEventId = cursor ? cursor.getAttribute("data-event-id") : "";
    var lastMessageId = 0;
    document.querySelectorAll("#transcript [data-message-id]").forEach(function (el) {
      var id = parseInt(el.getAttribute("data-message-id"), 10);
      if (id > lastMessageId) lastMessageId = id;
    });
    var turns = document.querySelectorAll("#transcript .turn[data-turn-id]");
    var lastTurn = turns.length ? turns[turns.length - 1] : null;
    var liveTurn = lastTurn && lastTurn.querySelector(".turn-live") ? lastTurn.getAttribute("data-turn-id") : null;
    event.detail.socketWrapper.sendImmediately(JSON.stringify({
      type: "resume",
      last_event_id: lastEventId || null,
      last_message_id: lastMessageId,
      turn_id: liveTurn
    }));
    setConnection("open");
  });
  document.addEventListener("htmx:wsClose", function () { setConnection("closed"); });
  document.addEventListener("htmx:wsError", function () { setConnection("closed"); });
  document.addEventListener("htmx:wsConnecting", function () { setConnection("connecting"); });

  // A send gets a request id (so a retried send is recognised) and the user's time zone.
  document.addEventListener("htmx:wsConfigSend", function (event) {
    var params = event.detail.parameters;
    if (params.type !== "send") return;
    var input = document.getElementById("composer-input");
    if (!params.message || !params.message.trim() || isRunning()) {
      event.preventDefault();
      return;
    }
    params.request_id = newRequestId();
    try { params.timezone = Intl.DateTimeFormat().resolvedOptions().timeZone; } catch (e) { /* old browser */ }
    params.tz_offset = -new Date().getTimezoneOffset();
    delete event.detail.headers;
    if (input) input.value = "";
    stickToBottom = true;
  });
  document.addEventListener("htmx:wsConfigSend", function (event) {
    // Stop and approve carry only what they need, not the composer's text.
    var params = event.detail.parameters;
    if (params.type === "stop" || params.type === "approve") {
      delete params.message;
      delete event.detail.headers;
    }
  });

  // Follow the answer while the reader is at the bottom; stop when they scroll up.
  document.addEventListener("scroll", function (event) {
    var t = event.target;
    if (t && t.id === "transcript") {
      stickToBottom = t.scrollHeight - t.scrollTop - t.clientHeight < 80;
    }
  }, true);
  document.addEventListener("htmx:wsAfterMessage", function () {
    if (stickToBottom) scrollToBottom();
  });

  // Enter sends, Shift+Enter makes a new line.
  document.addEventListener("keydown", function (event) {
    if (event.target && event.target.id === "composer-input" && event.key === "Enter" &&
        !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      var form = document.getElementById("composer");
      if (form && !isRunning()) form.requestSubmit();
      return;
    }
    if (event.key === "Escape") {
      var rename = event.target.closest && event.target.closest(".rename-form");
      if (rename) {
        var cancel = rename.querySelector(".rename-cancel");
        if (cancel) cancel.click();
      }
    }
  });

  // --- small things -----------------------------------------------------------------------

  // Toasts disappear after a while.
  document.addEventListener("htmx:afterSwap", function (event) {
    if (event.detail.target && event.detail.target.id === "toasts") {
      var toasts = event.detail.target;
      setTimeout(function () {
        if (toasts.firstElementChild) toasts.firstElementChild.remove();
      }, 6000);
    }
  });

  // Focus a rename field when it appears.
  document.addEventListener("htmx:load", function (event) {
    var input = event.detail.elt.querySelector && event.detail.elt.querySelector(".rename-form input[name=title]");
    if (input) { input.focus(); input.select(); }
  });

  // Open a chat at its newest message.
  document.addEventListener("DOMContentLoaded", function () {
    // A link to one message (search hit, outline) opens on it; otherwise at the newest.
    var target = location.hash.indexOf("#msg-") === 0 && document.getElementById(location.hash.slice(1));
    if (target) {
      stickToBottom = false;
      target.scrollIntoView({block: "center"});
      target.classList.add("jumped");
    } else {
      scrollToBottom();
    }
    var input = document.getElementById("composer-input");
    if (input) input.focus();
  });
})();

// --- attachments: picker, drag and drop, paste (issue 5) ---------------------------------
// Each file is uploaded at once (POST /api/upload); its chip carries a hidden
// `attachments` input, so the composer's ws-send includes the ids. Names are set with
// textContent only: a file name is untrusted text.
(function () {
  "use strict";

  function composer() { return document.getElementById("composer"); }
  function chips() { return document.getElementById("composer-attachments"); }

  function addChip(text, className, list) {
    var li = document.createElement("li");
    li.className = "attachment-chip " + (className || "");
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
    var size = document.createElement("span");
    size.className = "attachment-size";
    size.textContent = attachment.size < 1024 ? attachment.size + " bytes" : (attachment.size / 1024).toFixed(1) + " KB";
    li.appendChild(size);
    var input = document.createElement("input");
    input.type = "hidden";
    input.name = "attachments";
    input.value = String(attachment.id);
    li.appendChild(input);
    var remove = document.createElement("button");
    remove.type = "button";
    remove.className = "attachment-remove";
    remove.setAttribute("aria-label", "Remove attachment");
    remove.textContent = "×";
    li.appendChild(remove);
  }

  // `list` and `url`: the chip list and upload URL of another form (an edited message);
  // by default the composer's.
  function upload(files, list, url) {
    var form = composer();
    list = list || chips();
    url = url || (form && form.dataset.uploadUrl);
    if (!list || !url || !files) return;
    Array.prototype.forEach.call(files, function (file) {
      var li = addChip(file.name || "file", "uploading", list);
      var body = new FormData();
      body.append("file", file, file.name || "pasted");
      fetch(url, { method: "POST", body: body, credentials: "same-origin" })
        .then(function (response) {
          return response.json().then(function (data) { return { ok: response.ok, data: data }; });
        })
        .then(function (result) {
          if (!result.ok) throw new Error((result.data && result.data.error && result.data.error.message) || "Upload failed.");
          uploaded(li, result.data.attachments[0]);
        })
        .catch(function (error) {
          li.classList.remove("uploading");
          li.classList.add("failed");
          li.querySelector(".attachment-name").textContent = (file.name || "file") + ": " + error.message;
          setTimeout(function () { li.remove(); }, 8000);
        });
    });
  }

  document.addEventListener("change", function (event) {
    if (event.target && event.target.id === "composer-file") {
      upload(event.target.files);
      event.target.value = "";
    } else if (event.target && event.target.classList && event.target.classList.contains("attach-input")) {
      var form = event.target.closest("form");
      upload(event.target.files, form && form.querySelector(".attach-chips"), event.target.dataset.uploadUrl);
      event.target.value = "";
    }
  });
  document.addEventListener("click", function (event) {
    var remove = event.target.closest && event.target.closest(".attachment-remove");
    if (remove) remove.closest(".attachment-chip").remove();
  });
  document.addEventListener("dragover", function (event) {
    if (composer() && event.dataTransfer && Array.prototype.indexOf.call(event.dataTransfer.types, "Files") >= 0) {
      event.preventDefault();
      composer().classList.add("drop-target");
    }
  });
  document.addEventListener("dragleave", function () {
    if (composer()) composer().classList.remove("drop-target");
  });
  document.addEventListener("drop", function (event) {
    if (!composer() || !event.dataTransfer || !event.dataTransfer.files.length) return;
    event.preventDefault();
    composer().classList.remove("drop-target");
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

  // A send carries the ids as numbers; an upload still running holds the send back.
  document.addEventListener("htmx:wsConfigSend", function (event) {
    var params = event.detail.parameters;
    if (params.type !== "send" || event.defaultPrevented) return;
    var box = chips();
    if (box && box.querySelector(".uploading")) {
      event.preventDefault();
      return;
    }
    var ids = params.attachments === undefined ? [] : [].concat(params.attachments);
    params.attachments = ids.map(function (id) { return parseInt(id, 10); });
    if (box) box.textContent = "";
  });
})();
