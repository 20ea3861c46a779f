// The faces overlay of the review viewer: the episode's detections and officers' added boxes drawn over the video
// at its current frame; the frame ranges and detection rows seek the video; the detections at the current frame
// are listed under the ranges, each with a Remove button for an ethics officer (posting the remove-detection form,
// whatever the frame: the page's table lists only the first 500); an ethics officer may drag a box on the video to
// add it as a keyframe line of the "Add a box" form. No inline script (CSP): data comes from data-faces-url and
// the viewer's review.json (for the frame rate).
(function () {
  "use strict";
  const section = document.getElementById("faces");
  const viewer = document.getElementById("viewer");
  const video = document.getElementById("episode-video");
  if (!section || !viewer) { return; }
  let faces = null, fps = 30;
  const byFrame = new Map();

  // A seek asked before the video's metadata is in (a page just loaded, on a slow connection or a busy machine)
  // is made once it is: a time set earlier is not always kept by the browser, and the viewer would stay at 0.
  const seek = function (frame) {
    if (!video) { return; }
    video.pause();
    const go = function () { video.currentTime = (frame + 0.5) / fps; };
    if (video.readyState >= HTMLMediaElement.HAVE_METADATA) { go(); }
    else { video.addEventListener("loadedmetadata", go, {once: true}); }
    video.scrollIntoView({block: "nearest"});
  };
  section.querySelectorAll(".faces-seek").forEach(function (button) {
    button.addEventListener("click", function () { seek(parseInt(button.dataset.frame, 10)); });
  });
  if (!video) { return; }

  const canvas = document.createElement("canvas");
  canvas.id = "faces-overlay";
  canvas.className = "faces-overlay";
  video.parentNode.classList.add("has-faces-overlay");
  video.parentNode.insertBefore(canvas, video.nextSibling);
  const ctx = canvas.getContext("2d");

  const interpolate = function (keyframes, frame) {
    if (frame < keyframes[0][0] || frame > keyframes[keyframes.length - 1][0]) { return null; }
    for (let i = 0; i < keyframes.length; i++) {
      const a = keyframes[i], b = keyframes[i + 1];
      if (frame === a[0] || !b) { return a.slice(1); }
      if (frame < b[0]) {
        const t = (frame - a[0]) / (b[0] - a[0]);
        return [1, 2, 3, 4].map(function (k) { return a[k] + (b[k] - a[k]) * t; });
      }
    }
    return null;
  };

  // Where the video's picture sits inside the element (letterboxed), in CSS pixels.
  const picture = function () {
    const w = video.clientWidth, h = video.clientHeight;
    const vw = video.videoWidth || (faces && faces.size ? faces.size[0] : w);
    const vh = video.videoHeight || (faces && faces.size ? faces.size[1] : h);
    const scale = Math.min(w / vw, h / vh);
    return {x: (w - vw * scale) / 2, y: (h - vh * scale) / 2, scale: scale};
  };

  const draw = function () {
    canvas.width = video.clientWidth; canvas.height = video.clientHeight;
    canvas.style.left = video.offsetLeft + "px"; canvas.style.top = video.offsetTop + "px";
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    if (!faces) { return; }
    const frame = Math.floor(video.currentTime * fps + 1e-6);
    const p = picture();
    const box = function (b, colour, dashed) {
      ctx.strokeStyle = colour; ctx.lineWidth = 2; ctx.setLineDash(dashed ? [4, 3] : []);
      ctx.strokeRect(p.x + b[0] * p.scale, p.y + b[1] * p.scale, (b[2] - b[0]) * p.scale, (b[3] - b[1]) * p.scale);
    };
    (byFrame.get(frame) || []).forEach(function (d) { box(d.box, d.removed ? "#888" : "#d11", d.removed); });
    faces.spans.forEach(function (span) {
      const b = interpolate(span.keyframes, frame);
      if (b) { box(b, "#0a7", false); }
    });
    if (dragging) { box(dragging.box, "#fa0", true); }
    listFrame(frame);
  };

  // The detections at the current frame, each removable by an ethics officer.
  const atFrame = document.getElementById("faces-at-frame");
  const removeForm = document.getElementById("faces-remove-at-frame");
  let listed = null;
  const listFrame = function (frame) {
    if (!atFrame || !faces || frame === listed) { return; }
    listed = frame;
    atFrame.querySelector(".faces-at-frame-number").textContent = frame;
    const list = atFrame.querySelector(".faces-at-frame-list");
    list.replaceChildren();
    const found = byFrame.get(frame) || [];
    atFrame.querySelector(".empty").hidden = found.length > 0;
    found.forEach(function (d) {
      const item = document.createElement("li");
      item.dataset.frame = d.frame; item.dataset.index = d.index;
      const text = document.createElement("span");
      text.className = "mono";
      text.textContent = "#" + d.index + " · " + d.box.join(" ") + " · score " + d.score;
      item.appendChild(text);
      if (d.removed) {
        item.className = "removed"; item.appendChild(document.createTextNode(" · removed"));
      } else if (removeForm) {
        const button = document.createElement("button");
        button.type = "button"; button.className = "small secondary";
        button.textContent = "Remove";
        button.addEventListener("click", function () {
          removeForm.elements.frame.value = d.frame; removeForm.elements.index.value = d.index;
          removeForm.submit();
        });
        item.appendChild(document.createTextNode(" "));
        item.appendChild(button);
      }
      list.appendChild(item);
    });
  };

  const load = function () {
    Promise.all([fetch(section.dataset.facesUrl, {credentials: "same-origin"}).then(function (r) { return r.json(); }),
                 fetch(viewer.dataset.dataUrl, {credentials: "same-origin"}).then(function (r) { return r.json(); })])
      .then(function (answers) {
        faces = answers[0]; fps = answers[1].fps || fps;
        byFrame.clear();
        (faces.detections || []).forEach(function (d) {
          if (!byFrame.has(d.frame)) { byFrame.set(d.frame, []); }
          byFrame.get(d.frame).push(d);
        });
        draw();
      })
      .catch(function () { /* the section's lists still work without the overlay */ });
  };

  // Drawing a box (ethics officers: the add-box form is on the page).
  const form = document.getElementById("faces-add-box");
  let drawing = false, dragging = null;
  if (form) {
    const toggle = document.createElement("button");
    toggle.type = "button"; toggle.className = "small secondary"; toggle.id = "faces-draw";
    toggle.textContent = "Draw a box on the video";
    form.insertBefore(toggle, form.querySelector("button[type=submit]"));
    toggle.addEventListener("click", function () {
      drawing = !drawing;
      canvas.classList.toggle("drawing", drawing);
      toggle.textContent = drawing ? "Stop drawing" : "Draw a box on the video";
      if (drawing) { video.pause(); }
    });
    const point = function (event) {
      const rect = canvas.getBoundingClientRect(), p = picture();
      return [Math.max(0, (event.clientX - rect.left - p.x) / p.scale), Math.max(0, (event.clientY - rect.top - p.y) / p.scale)];
    };
    canvas.addEventListener("mousedown", function (event) {
      if (!drawing) { return; }
      const start = point(event);
      dragging = {start: start, box: [start[0], start[1], start[0], start[1]]};
    });
    canvas.addEventListener("mousemove", function (event) {
      if (!dragging) { return; }
      const q = point(event), s = dragging.start;
      dragging.box = [Math.min(s[0], q[0]), Math.min(s[1], q[1]), Math.max(s[0], q[0]), Math.max(s[1], q[1])];
      draw();
    });
    canvas.addEventListener("mouseup", function () {
      if (!dragging) { return; }
      const b = dragging.box.map(function (v) { return Math.round(v); });
      dragging = null;
      if (b[2] - b[0] >= 2 && b[3] - b[1] >= 2) {
        const frame = Math.floor(video.currentTime * fps + 1e-6);
        const area = form.querySelector("textarea");
        area.value = (area.value.trim() ? area.value.trim() + "\n" : "") + [frame].concat(b).join(" ");
      }
      draw();
    });
  }

  ["timeupdate", "seeked", "loadedmetadata"].forEach(function (name) { video.addEventListener(name, draw); });
  window.addEventListener("resize", draw);
  const tick = function () { if (!video.paused) { draw(); } window.requestAnimationFrame(tick); };
  window.requestAnimationFrame(tick);
  load();
}());
