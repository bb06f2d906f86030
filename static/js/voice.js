// Voice: dictation into the message box and "Read aloud" for answers (numi/web/voice.py).
// Dictation records with MediaRecorder (its time and level shown; Esc or × cancels), sends the
// recording to /api/audio/transcriptions and puts the text in the box, not sent. Read aloud
// plays /api/audio/speech; with no voice endpoint (`voice_off`) the browser's
// speechSynthesis reads instead. Nothing is kept: the recording lives in this page only.

const Numi = window.Numi, {$, on} = Numi;
let recording = null;  // {recorder, stream, chunks, size, started, timer, audio, cancelled}
let playing = null;    // {button, audio | utterance}

function feedback(message, code) {
  const box = $("composer-feedback");
  if (!box) return;
  box.textContent = message;
  if (code) box.setAttribute("data-code", code);
  else box.removeAttribute("data-code");
}

function showRecorder(on) {
  const button = $("mic-button");
  $("recorder").hidden = !on;
  $("recorder-cancel").hidden = !on;
  button.setAttribute("aria-pressed", on ? "true" : "false");
  button.setAttribute("aria-label", on ? "Stop and transcribe" : "Dictate");
  button.classList.toggle("recording", on);
}

function tick() {
  const seconds = Math.floor((Date.now() - recording.started) / 1000);
  $("recorder-time").textContent = Math.floor(seconds / 60) + ":" + String(seconds % 60).padStart(2, "0");
  if (recording.analyser) {
    const samples = new Uint8Array(recording.analyser.fftSize);
    recording.analyser.getByteTimeDomainData(samples);
    const peak = samples.reduce((max, v) => Math.max(max, Math.abs(v - 128)), 0) / 128;
    $("recorder-level").style.width = Math.round(Math.min(1, peak * 1.5) * 100) + "%";
  }
}

async function start() {
  if (!navigator.mediaDevices?.getUserMedia || !window.MediaRecorder) {
    feedback("This browser cannot record audio here (it needs https or localhost).", "microphone_refused");
    return;
  }
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({audio: true});
  } catch (error) {
    feedback(error?.name === "NotFoundError" ? "No microphone was found." : "The browser refused the microphone. Allow it for this site to dictate.", "microphone_refused");
    return;
  }
  const type = ["audio/webm;codecs=opus", "audio/ogg;codecs=opus", "audio/mp4"].find((t) => MediaRecorder.isTypeSupported(t));
  const recorder = new MediaRecorder(stream, type ? {mimeType: type} : undefined);
  const limit = parseInt($("mic-button").dataset.maxBytes, 10) || 0;
  recording = {recorder, stream, chunks: [], size: 0, started: Date.now(), cancelled: false};
  try {
    recording.audio = new AudioContext();
    recording.analyser = recording.audio.createAnalyser();
    recording.audio.createMediaStreamSource(stream).connect(recording.analyser);
  } catch (error) { recording.analyser = null; }
  recorder.ondataavailable = (event) => {
    if (!event.data.size || !recording) return;
    recording.chunks.push(event.data);
    recording.size += event.data.size;
    // Stop before the upload limit: the part recorded so far is still sent.
    if (limit && recording.size > limit * 0.9 && recorder.state === "recording") recorder.stop();
  };
  recorder.onstop = () => finish(recorder.mimeType || type || "audio/webm");
  recorder.start(1000);
  recording.timer = setInterval(tick, 100);
  feedback("");
  showRecorder(true);
}

function release() {
  clearInterval(recording.timer);
  recording.stream.getTracks().forEach((t) => t.stop());
  recording.audio?.close();
  showRecorder(false);
  const done = recording;
  recording = null;
  return done;
}

function stop(cancel) {
  if (!recording) return;
  recording.cancelled = cancel;
  if (recording.recorder.state !== "inactive") recording.recorder.stop();
  else finish();
}

function finish(type) {
  const done = release();
  if (done.cancelled) { feedback("Dictation cancelled."); return; }
  const blob = new Blob(done.chunks, {type: (type || "audio/webm").split(";")[0]});
  if (!blob.size) { feedback("Nothing was recorded."); return; }
  const body = new FormData();
  body.append("file", blob, "speech." + (blob.type.split("/")[1] || "webm"));
  const button = $("mic-button");
  button.disabled = true;
  feedback("Transcribing…");
  fetch(button.dataset.url, {method: "POST", body, credentials: "same-origin"})
    .then((r) => r.json().then((data) => {
      if (!r.ok) throw Object.assign(new Error(data.error?.message || "Transcription failed."), {code: data.error?.code});
      insert(data.text || "");
      feedback("");
    }))
    .catch((error) => feedback(error.code ? error.message : "Numi could not be reached to transcribe.", error.code || "offline"))
    .finally(() => { button.disabled = false; });
}

function insert(text) {
  const box = $("composer-input");
  if (!box || !text) return;
  const before = box.value.slice(0, box.selectionStart), after = box.value.slice(box.selectionEnd);
  const joined = (before && !/\s$/.test(before) ? " " : "") + text.trim();
  box.value = before + joined + after;
  box.selectionStart = box.selectionEnd = (before + joined).length;
  box.dispatchEvent(new Event("input", {bubbles: true}));  // the draft and the box's height
  box.focus();
}

on("click", (event) => {
  if (Numi.hit(event, "#recorder-cancel")) { stop(true); $("mic-button").focus(); return; }
  if (!Numi.hit(event, "#mic-button")) return;
  if (recording) stop(false);
  else start();
});
// Esc cancels a recording, before the other Esc uses (menus, stopping the answer).
addEventListener("keydown", (event) => {
  if (event.key !== "Escape" || !recording) return;
  event.preventDefault();
  event.stopPropagation();
  stop(true);
}, true);

// --- Read aloud ---

function stopPlaying() {
  if (!playing) return;
  if (playing.audio) { playing.audio.pause(); URL.revokeObjectURL(playing.audio.src); }
  if (playing.utterance) speechSynthesis.cancel();
  Numi.say(playing.button, null);
  playing = null;
}

function speakInBrowser(button, text) {
  if (!window.speechSynthesis) throw new Error("This browser cannot read aloud.");
  const utterance = new SpeechSynthesisUtterance(text);
  utterance.onend = utterance.onerror = () => { if (playing?.utterance === utterance) stopPlaying(); };
  playing = {button, utterance};
  Numi.say(button, "Stop reading", "playing");
  speechSynthesis.speak(utterance);
}

on("click", (event) => {
  const button = Numi.hit(event, ".read-aloud");
  if (!button) return;
  const wasMine = playing?.button === button;
  stopPlaying();
  if (wasMine) return;
  const text = button.closest(".msg")?.querySelector(".msg-body")?.innerText.trim().slice(0, 4096);
  if (!text) return;
  Numi.say(button, "Loading…");
  fetch(button.dataset.speechUrl, {method: "POST", credentials: "same-origin", headers: {"Content-Type": "application/json"}, body: JSON.stringify({text})})
    .then(async (r) => {
      if (r.ok) return r.blob();
      const data = await r.json().catch(() => ({}));
      throw Object.assign(new Error(data.error?.message || "Reading aloud failed."), {code: data.error?.code});
    })
    .then((blob) => {
      const audio = new Audio(URL.createObjectURL(blob));
      audio.onended = () => { if (playing?.audio === audio) stopPlaying(); };
      playing = {button, audio};
      Numi.say(button, "Stop reading", "playing");
      return audio.play();
    })
    .catch((error) => {
      Numi.say(button, null);
      // No voice endpoint, or no network: the browser's own voice reads it.
      if (error.code === "voice_off" || !error.code) {
        try { speakInBrowser(button, text); return; } catch (e) { error = e; }
      }
      feedback(error.message, error.code);
    });
});
