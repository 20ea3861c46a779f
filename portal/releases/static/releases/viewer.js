// The release review viewer: the silent video, a timeline of segments, gap rows and removed retries, plots of
// both pinch distances and the tracking flags (uPlot), and both hands drawn in 2D, all following the video.
// Data comes from one JSON endpoint (the page's data-data-url). No inline script or style: positions are set
// through the CSSOM, which the Content-Security-Policy allows.
(function () {
  "use strict";
  const root = document.getElementById("viewer");
  if (!root) { return; }
  const video = document.getElementById("episode-video");
  const clockLabel = document.getElementById("clock");
  const playButton = document.getElementById("play");
  const COLORS = { left: "#0b5cad", right: "#d9730d", head: "#2f7d32", playhead: "#c62828" };

  // A segment's annotations as people read them ("grip: power; note: slipped"), not as raw JSON.
  function annotationsText(annotations) {
    if (!annotations || typeof annotations !== "object") { return ""; }
    return Object.keys(annotations).map(function (key) {
      const value = annotations[key];
      const shown = value !== null && typeof value === "object" ? JSON.stringify(value) : String(value);
      return key.replace(/_/g, " ") + ": " + shown;
    }).join("; ");
  }

  function fail(message) {
    const box = document.getElementById("viewer-error");
    box.textContent = message;
    box.hidden = false;
  }

  fetch(root.getAttribute("data-data-url"), { headers: { Accept: "application/json" } })
    .then(function (r) { return r.ok ? r.json() : r.json().then(function (b) { throw new Error(b.detail || r.status); }); })
    .then(start)
    .catch(function (error) { fail("The episode's data could not be loaded: " + error.message); });

  function start(data) {
    const fps = data.fps;
    const duration = data.length / fps;
    const times = data.frames.map(function (f) { return f / fps; });
    const lastFrame = data.length - 1;

    // --- the clock: the video's time, or a timer of our own for an episode without video --------------
    let ownTime = 0, ownPlaying = false, ownStarted = 0, rate = 1;
    const clock = {
      now: function () {
        if (video) { return video.currentTime; }
        if (ownPlaying) { ownTime = Math.min(duration, ownTime + rate * (performance.now() - ownStarted) / 1000); ownStarted = performance.now(); }
        return ownTime;
      },
      playing: function () { return video ? !video.paused && !video.ended : ownPlaying; },
      seek: function (seconds) {
        const t = Math.max(0, Math.min(lastFrame / fps, seconds));
        // before the video's metadata is in, the time is set once it is (as faces.js's seek does)
        if (!video) { ownTime = t; }
        else if (video.readyState >= HTMLMediaElement.HAVE_METADATA) { video.currentTime = t + 0.5 / fps; }
        else { video.addEventListener("loadedmetadata", function () { video.currentTime = t + 0.5 / fps; }, {once: true}); }
        update();
      },
      toggle: function () {
        if (video) { if (video.paused) { video.play(); } else { video.pause(); } }
        else { ownPlaying = !ownPlaying; ownStarted = performance.now(); if (ownPlaying) { loop(); } }
        update();
      },
    };
    const frameAt = function (t) { return Math.max(0, Math.min(lastFrame, Math.floor(t * fps + 1e-6))); };
    const sampleAt = function (frame) { return Math.max(0, Math.min(times.length - 1, Math.round(frame / data.step))); };

    // --- timeline --------------------------------------------------------------------------------------
    const timeline = document.getElementById("timeline");
    const lanes = {};
    ["segments", "gaps", "retries"].forEach(function (name) {
      const lane = document.createElement("div");
      lane.className = "lane lane-" + name;
      timeline.appendChild(lane);
      lanes[name] = lane;
    });
    const share = function (frame) { return (100 * frame / data.length) + "%"; };
    data.segments.forEach(function (segment, number) {
      const block = document.createElement("div");
      block.className = "segment " + (number % 2 ? "odd" : "even");
      block.setAttribute("data-outcome", segment.outcome || "");
      block.style.left = share(segment.frame_index_from);
      block.style.width = share(segment.frame_index_to - segment.frame_index_from);
      block.textContent = segment.task + " · " + segment.outcome;
      block.title = segment.task + " (cycle " + segment.cycle + ", repetition " + segment.repetition + ", take " +
        segment.take + "): " + segment.outcome + ", frames " + segment.frame_index_from + "–" + (segment.frame_index_to - 1) +
        (annotationsText(segment.annotations) ? "; " + annotationsText(segment.annotations) : "");
      lanes.segments.appendChild(block);
    });
    data.gaps.forEach(function (gap) {
      const block = document.createElement("div");
      block.className = "gap";
      block.style.left = share(gap[0]);
      block.style.width = share(Math.max(gap[1] - gap[0], data.length / 400));
      block.title = "gap rows, frames " + gap[0] + "–" + (gap[1] - 1);
      lanes.gaps.appendChild(block);
    });
    data.removed.forEach(function (removed) {
      const mark = document.createElement("div");
      mark.className = "retry";
      mark.style.left = share(removed.frame);
      mark.textContent = "▼";
      mark.title = removed.source_frames + " source frames removed before frame " + removed.frame + " (retries or idle time)";
      lanes.retries.appendChild(mark);
    });
    const playhead = document.createElement("div");
    playhead.className = "playhead";
    timeline.appendChild(playhead);
    timeline.addEventListener("click", function (event) {
      const box = timeline.getBoundingClientRect();
      clock.seek(((event.clientX - box.left) / box.width) * duration);
    });

    // --- plots (uPlot) -----------------------------------------------------------------------------------
    const playheadPlugin = {
      hooks: {
        draw: [function (u) {
          const x = u.valToPos(clock.now(), "x", true);
          const ctx = u.ctx;
          ctx.save();
          ctx.strokeStyle = COLORS.playhead;
          ctx.lineWidth = 2 * devicePixelRatio;
          ctx.beginPath();
          ctx.moveTo(x, u.bbox.top);
          ctx.lineTo(x, u.bbox.top + u.bbox.height);
          ctx.stroke();
          ctx.restore();
        }],
      },
    };
    const width = Math.max(320, timeline.clientWidth);
    const timeAxis = { label: "seconds", values: function (u, ticks) { return ticks.map(function (v) { return v.toFixed(1); }); } };
    const pinchPlot = new uPlot({
      width: width, height: 220, title: "Pinch distance (m)", plugins: [playheadPlugin],
      cursor: { drag: { x: false, y: false } }, scales: { x: { time: false } }, legend: { live: false },
      series: [{}, { label: "left hand", stroke: COLORS.left, width: 1.5 }, { label: "right hand", stroke: COLORS.right, width: 1.5 }],
      axes: [timeAxis, { size: 56 }],
    }, [times, data.pinch.left_hand, data.pinch.right_hand], document.getElementById("pinch-plot"));
    const stepped = uPlot.paths.stepped({ align: 1 });
    const lift = function (values, base) { return values.map(function (v) { return base + 0.8 * v; }); };
    const names = { 0.4: "right", 1.4: "left", 2.4: "head" };
    const trackingPlot = new uPlot({
      width: width, height: 200, title: "Tracking (up: tracked)", plugins: [playheadPlugin],
      cursor: { drag: { x: false, y: false } }, scales: { x: { time: false }, y: { range: [-0.2, 3] } }, legend: { live: false },
      series: [{},
        { label: "head", stroke: COLORS.head, width: 1.5, paths: stepped },
        { label: "left hand", stroke: COLORS.left, width: 1.5, paths: stepped },
        { label: "right hand", stroke: COLORS.right, width: 1.5, paths: stepped }],
      axes: [timeAxis, { size: 56, splits: function () { return [0.4, 1.4, 2.4]; },
        values: function (u, ticks) { return ticks.map(function (v) { return names[v] || ""; }); } }],
    }, [times, lift(data.tracked.head, 2), lift(data.tracked.left_hand, 1), lift(data.tracked.right_hand, 0)],
    document.getElementById("tracking-plot"));
    [pinchPlot, trackingPlot].forEach(function (plot) {
      plot.over.addEventListener("click", function (event) { clock.seek(plot.posToVal(event.offsetX, "x")); });
    });

    // --- hands in 2D (front view) -------------------------------------------------------------------------
    const canvas = document.getElementById("hands");
    const ctx = canvas.getContext("2d");
    const bounds = { minX: Infinity, maxX: -Infinity, minY: Infinity, maxY: -Infinity };
    const widen = function (x, y) {
      bounds.minX = Math.min(bounds.minX, x); bounds.maxX = Math.max(bounds.maxX, x);
      bounds.minY = Math.min(bounds.minY, y); bounds.maxY = Math.max(bounds.maxY, y);
    };
    ["left_hand", "right_hand"].forEach(function (hand) {
      data.hands[hand].forEach(function (points, s) {
        if (!data.tracked[hand][s]) { return; }
        for (let j = 0; j < points.length; j += 2) { widen(points[j], points[j + 1]); }
      });
    });
    data.head[0].forEach(function (x, s) { if (data.tracked.head[s]) { widen(x, data.head[1][s]); } });
    if (!isFinite(bounds.minX)) { widen(-0.5, 0.5); widen(0.5, 2); }
    // The left half shows the scene (head and both hands over the whole episode's extent); the right half
    // each hand close up, 25 cm across, centred on its wrist, so the fingers can be told apart.
    const half = canvas.width / 2, margin = 20;
    const scale = Math.min((half - 2 * margin) / Math.max(0.05, bounds.maxX - bounds.minX),
      (canvas.height - 2 * margin) / Math.max(0.05, bounds.maxY - bounds.minY));
    const scene = {
      x: function (x) { return margin + (x - bounds.minX) * scale; },
      y: function (y) { return canvas.height - margin - (y - bounds.minY) * scale; },
      dot: 2.5,
    };
    const closeUp = function (points, top) {
      const box = canvas.height / 2, zoom = (box - 16) / 0.25;
      return {
        x: function (x) { return half + half / 2 + (x - points[0]) * zoom; },
        y: function (y) { return top + box / 2 - (y - points[1]) * zoom; },
        dot: 3,
      };
    };

    function drawHand(points, color, view) {
      ctx.strokeStyle = color;
      ctx.fillStyle = color;
      ctx.lineWidth = 2;
      data.bones.forEach(function (bone) {
        ctx.beginPath();
        ctx.moveTo(view.x(points[2 * bone[0]]), view.y(points[2 * bone[0] + 1]));
        ctx.lineTo(view.x(points[2 * bone[1]]), view.y(points[2 * bone[1] + 1]));
        ctx.stroke();
      });
      for (let j = 0; j < points.length; j += 2) {
        ctx.beginPath();
        ctx.arc(view.x(points[j]), view.y(points[j + 1]), view.dot, 0, 2 * Math.PI);
        ctx.fill();
      }
    }

    function drawHands(s) {
      ctx.clearRect(0, 0, canvas.width, canvas.height);
      ctx.font = "12px system-ui, sans-serif";
      ctx.strokeStyle = "#d8dee6";
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(half, 0); ctx.lineTo(half, canvas.height);
      ctx.moveTo(half, canvas.height / 2); ctx.lineTo(canvas.width, canvas.height / 2);
      ctx.stroke();
      [["left_hand", COLORS.left, "left hand", 0], ["right_hand", COLORS.right, "right hand", canvas.height / 2]]
        .forEach(function (hand) {
          const points = data.hands[hand[0]][s];
          ctx.fillStyle = "#5b6675";
          ctx.fillText(hand[2] + (data.tracked[hand[0]][s] ? "" : ": not tracked"), half + 8, hand[3] + 16);
          if (!data.tracked[hand[0]][s]) { return; }
          drawHand(points, hand[1], scene);
          drawHand(points, hand[1], closeUp(points, hand[3]));
        });
      ctx.fillStyle = "#5b6675";
      ctx.fillText("scene", 8, 16);
      if (data.tracked.head[s]) {
        ctx.strokeStyle = COLORS.head;
        ctx.lineWidth = 2;
        ctx.beginPath();
        ctx.arc(scene.x(data.head[0][s]), scene.y(data.head[1][s]), 9, 0, 2 * Math.PI);
        ctx.stroke();
      }
    }

    // --- segments table ---------------------------------------------------------------------------------
    const body = document.querySelector("#segments tbody");
    data.segments.forEach(function (segment) {
      const row = document.createElement("tr");
      [segment.frame_index_from + "–" + (segment.frame_index_to - 1), segment.task,
        segment.cycle + " / " + segment.repetition + " / " + segment.take, segment.outcome, String(segment.gap_frames),
        annotationsText(segment.annotations) || "—"]
        .forEach(function (text) { const cell = document.createElement("td"); cell.textContent = text; row.appendChild(cell); });
      row.addEventListener("click", function () { clock.seek(segment.frame_index_from / fps); });
      body.appendChild(row);
    });

    // --- keeping everything in step ---------------------------------------------------------------------
    function update() {
      const t = clock.now();
      const frame = frameAt(t);
      playhead.style.left = share(frame);
      clockLabel.textContent = "frame " + frame + " of " + lastFrame + " · " + t.toFixed(2) + " s";
      root.setAttribute("data-frame", String(frame));
      playButton.textContent = clock.playing() ? "Pause" : "Play";
      pinchPlot.redraw(false, false);
      trackingPlot.redraw(false, false);
      drawHands(sampleAt(frame));
    }
    function loop() {
      update();
      if (clock.playing()) { requestAnimationFrame(loop); }
    }
    if (video) {
      ["play", "seeked", "timeupdate", "pause", "loadeddata"].forEach(function (name) {
        video.addEventListener(name, function () { if (name === "play") { loop(); } else { update(); } });
      });
    }
    playButton.addEventListener("click", clock.toggle);
    // Playback speed (the video's own rate, or our timer's) and full screen of the whole viewer, so the plots
    // and hands stay beside the video.
    const speed = document.getElementById("speed");
    if (speed) {
      speed.addEventListener("change", function () {
        clock.now();  // our timer: count the time played so far at the old rate
        rate = parseFloat(speed.value) || 1;
        if (video) { video.playbackRate = rate; }
        update();
      });
    }
    const fullscreenButton = document.getElementById("fullscreen");
    const toggleFullscreen = function () {
      if (document.fullscreenElement) { document.exitFullscreen(); }
      else if (root.requestFullscreen) { root.requestFullscreen(); }
    };
    if (fullscreenButton) {
      fullscreenButton.addEventListener("click", toggleFullscreen);
      document.addEventListener("fullscreenchange", function () {
        fullscreenButton.textContent = document.fullscreenElement ? "Leave full screen" : "Full screen";
      });
    }
    document.addEventListener("keydown", function (event) {
      const tag = (event.target.tagName || "").toLowerCase();
      if (tag === "input" || tag === "textarea" || tag === "select" || event.altKey || event.ctrlKey || event.metaKey) { return; }
      const go = function (name) { const url = root.getAttribute(name); if (url) { window.location.assign(url); } };
      if (event.key === " ") { clock.toggle(); }
      else if (event.key === "ArrowRight") { if (video) { video.pause(); } clock.seek((frameAt(clock.now()) + 1) / fps); }
      else if (event.key === "ArrowLeft") { if (video) { video.pause(); } clock.seek((frameAt(clock.now()) - 1) / fps); }
      else if (event.key === "n" || event.key === "N") { go("data-next-url"); }
      else if (event.key === "f" || event.key === "F") { toggleFullscreen(); }
      else if (event.key === "p" || event.key === "P") { go("data-previous-url"); }
      else { return; }
      event.preventDefault();
    });
    root.setAttribute("data-length", String(data.length));
    root.setAttribute("data-ready", "1");
    update();
  }
})();
