// The lsplat viewer page: a free camera, the view state sent to the server over a
// WebSocket, and the frames it streams back drawn on a canvas. Plain JavaScript,
// no build step; the server embeds this file.
'use strict';
(() => {
  const params = new URLSearchParams(location.search);
  const token = params.get('token') || '';
  const $ = (id) => document.getElementById(id);
  const canvas = $('view');
  const ctx2d = canvas.getContext('2d');

  // ---- small vector helpers (arrays of 3 numbers) ----
  const add = (a, b) => [a[0] + b[0], a[1] + b[1], a[2] + b[2]];
  const sub = (a, b) => [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
  const mul = (a, s) => [a[0] * s, a[1] * s, a[2] * s];
  const dot = (a, b) => a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
  const cross = (a, b) => [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
  const len = (a) => Math.sqrt(dot(a, a));
  const unit = (a) => { const n = len(a); return n > 0 ? mul(a, 1 / n) : [0, 0, 1]; };
  // Rotation of v about the unit axis k by angle t (Rodrigues).
  const rot = (v, k, t) => {
    const c = Math.cos(t), s = Math.sin(t);
    return add(add(mul(v, c), mul(cross(k, v), s)), mul(k, dot(k, v) * (1 - c)));
  };

  const state = {
    hello: null, mode: 'rgb', level: 1, query: null, threshold: 0.4, exact: false,
    lossless: params.get('lossless') === '1', size: 'camera', seq: 0, history: [],
    cam: null, snapped: 0, lastFull: null, lastHeader: null, frames: 0, errors: [],
    connected: false, closed: false, saves: 0,
  };

  // ---- the camera: eye, orthonormal axes (OpenCV: right, down, forward), intrinsics
  // of the training camera it started from, and an orbit target. `exact` holds the
  // training camera's pose while it is untouched, so it is sent bit for bit.
  function fromPose(p) {
    const [r0, r1, r2] = p.rotation;
    const t = p.translation;
    const eye = mul(add(add(mul(r0, t[0]), mul(r1, t[1])), mul(r2, t[2])), -1);
    const c = { eye, right: r0.slice(), down: r1.slice(), fwd: r2.slice(), intr: p, exact: p };
    const h = state.hello;
    const along = h ? dot(sub(h.centre, eye), c.fwd) : 1;
    c.target = add(eye, mul(c.fwd, along > 1e-6 ? along : (h ? h.radius : 1)));
    return c;
  }

  function orthonormalize(c) {
    c.fwd = unit(c.fwd);
    c.right = unit(sub(c.right, mul(c.fwd, dot(c.right, c.fwd))));
    c.down = cross(c.fwd, c.right);
    c.exact = null;
  }

  // The size and intrinsics of the frames.
  function intrinsics(c) {
    const p = c.intr;
    let w = p.width, h = p.height;
    if (state.size === 'window') {
      const r = canvas.getBoundingClientRect();
      const dpr = Math.min(window.devicePixelRatio || 1, 2);
      w = Math.max(16, Math.min(1920, Math.round(r.width * dpr)));
      h = Math.max(16, Math.min(1920, Math.round(r.height * dpr)));
    } else if (state.size === '720p') {
      w = 1280; h = 720;
    }
    if (w === p.width && h === p.height) return { width: w, height: h, fx: p.fx, fy: p.fy, cx: p.cx, cy: p.cy };
    const fy = p.fy * h / p.height;
    return { width: w, height: h, fx: fy * p.fx / p.fy, fy, cx: w / 2, cy: h / 2 };
  }

  function pose(c) {
    const k = intrinsics(c);
    if (c.exact && k.width === c.exact.width && k.height === c.exact.height) return c.exact;
    return {
      name: 'view', width: k.width, height: k.height, fx: k.fx, fy: k.fy, cx: k.cx, cy: k.cy,
      rotation: [c.right, c.down, c.fwd],
      translation: [-dot(c.right, c.eye), -dot(c.down, c.eye), -dot(c.fwd, c.eye)],
    };
  }

  const up = () => (state.hello ? state.hello.up : [0, 0, 1]);

  function orbit(dx, dy) {
    const c = state.cam, u = up();
    const yaw = -dx * 0.006, pitch = -dy * 0.006;
    let off = sub(c.eye, c.target);
    for (const k of ['right', 'down', 'fwd']) c[k] = rot(c[k], u, yaw);
    off = rot(off, u, yaw);
    // Keep away from the poles.
    const f2 = rot(c.fwd, c.right, pitch);
    if (Math.abs(dot(f2, u)) < 0.98) {
      off = rot(off, c.right, pitch);
      c.fwd = f2;
      c.down = rot(c.down, c.right, pitch);
    }
    c.eye = add(c.target, off);
    orthonormalize(c);
  }

  function pan(dx, dy) {
    const c = state.cam;
    const s = len(sub(c.target, c.eye)) / intrinsics(c).fy;
    const m = add(mul(c.right, -dx * s), mul(c.down, -dy * s));
    c.eye = add(c.eye, m);
    c.target = add(c.target, m);
    c.exact = null;
  }

  function zoom(f) {
    const c = state.cam;
    const off = sub(c.eye, c.target);
    const r = state.hello ? state.hello.radius : 1;
    const n = Math.max(1e-3 * r, Math.min(100 * r, len(off) * f));
    c.eye = add(c.target, mul(unit(off), n));
    c.exact = null;
  }

  function fly(dr, dd, df) {
    const c = state.cam;
    const s = (state.hello ? state.hello.radius : 1) * 0.03;
    const m = add(add(mul(c.right, dr * s), mul(c.down, dd * s)), mul(c.fwd, df * s));
    c.eye = add(c.eye, m);
    c.target = add(c.target, m);
    c.exact = null;
  }

  function look(yaw, pitch) {
    const c = state.cam;
    const d = len(sub(c.target, c.eye));
    for (const k of ['right', 'down', 'fwd']) c[k] = rot(c[k], up(), yaw);
    const f2 = rot(c.fwd, c.right, pitch);
    if (Math.abs(dot(f2, up())) < 0.98) {
      c.fwd = f2;
      c.down = rot(c.down, c.right, pitch);
    }
    orthonormalize(c);
    c.target = add(c.eye, mul(c.fwd, d));
  }

  function snap(i) {
    const cams = state.hello.cameras;
    state.snapped = ((i % cams.length) + cams.length) % cams.length;
    state.cam = fromPose(cams[state.snapped]);
    $('cameras').value = String(state.snapped);
    sendView(false);
  }

  // ---- the connection ----
  let ws = null;
  function connect() {
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const q = new URLSearchParams({ token });
    if (params.get('run')) q.set('run', params.get('run'));
    ws = new WebSocket(`${proto}//${location.host}/ws?${q}`);
    ws.binaryType = 'arraybuffer';
    ws.onopen = () => { state.connected = true; };
    ws.onclose = () => { state.connected = false; state.closed = true; status('disconnected: reload the page', true); };
    ws.onmessage = (ev) => (typeof ev.data === 'string' ? onText(JSON.parse(ev.data)) : onFrame(ev.data));
  }

  function send(msg) {
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(msg));
  }

  function sendView(moving) {
    if (!state.cam) return;
    state.seq += 1;
    send({
      type: 'view', seq: state.seq, camera: pose(state.cam), mode: state.mode, level: state.level,
      query: state.query, threshold: state.threshold, exact: state.exact, moving, lossless: state.lossless,
    });
  }

  // While the camera moves, previews at most every 40 ms; the full frame 120 ms after
  // the last move.
  let moveTimer = null, lastMoveSent = 0;
  function moved() {
    const now = performance.now();
    if (now - lastMoveSent > 40) {
      lastMoveSent = now;
      sendView(true);
    }
    clearTimeout(moveTimer);
    moveTimer = setTimeout(() => sendView(false), 120);
  }

  function status(text, error) {
    const s = $('status');
    s.textContent = text;
    s.classList.toggle('error', !!error);
  }

  function onText(m) {
    if (m.type === 'hello') return onHello(m);
    if (m.type === 'query') {
      const msg = $('query-msg');
      msg.textContent = m.ok ? '' : m.message;
      msg.classList.toggle('error', !m.ok);
      if (m.ok) {
        state.query = m.text;
        remember(m.text);
        if (state.mode === 'rgb' || state.mode === 'features') setMode('relevancy', false);
        sendView(false);
      }
      return undefined;
    }
    if (m.type === 'error') {
      state.errors.push(m.message);
      status(m.message, true);
    }
    return undefined;
  }

  function onHello(h) {
    state.hello = h;
    $('run').textContent = h.run;
    document.title = `${h.run} — lsplat viewer`;
    const runs = $('runs');
    runs.hidden = h.runs.length < 2;
    runs.innerHTML = '';
    for (const r of h.runs) runs.add(new Option(r, r, false, r === h.run));
    const lv = $('level');
    lv.innerHTML = '';
    for (const l of h.levels) lv.add(new Option(`${l.level}`, `${l.level}`));
    state.level = h.levels[0].level;
    lv.value = String(state.level);
    const cams = $('cameras');
    cams.innerHTML = '';
    h.cameras.forEach((c, i) => cams.add(new Option(c.name, String(i))));
    const dl = $('phrases');
    dl.innerHTML = '';
    for (const p of h.phrases) dl.append(new Option(p));
    try {
      state.history = JSON.parse(localStorage.getItem(`lsplat-history-${h.run}`) || '[]');
    } catch (e) {
      state.history = [];
    }
    drawHistory();
    updateControls();
    snap(0);
  }

  function currentLevel() {
    return state.hello.levels.find((l) => l.level === state.level) || state.hello.levels[0];
  }

  function updateControls() {
    const l = state.hello ? currentLevel() : null;
    for (const b of document.querySelectorAll('#modes button')) {
      b.classList.toggle('active', b.dataset.mode === state.mode);
      if (l && (b.dataset.mode === 'relevancy' || b.dataset.mode === 'segmentation')) b.disabled = !l.queries;
    }
    $('exact').disabled = !(l && l.table);
    $('query').disabled = !(l && l.queries);
    $('threshold-value').textContent = state.threshold.toFixed(2);
  }

  function setMode(m, send = true) {
    state.mode = m;
    updateControls();
    if (send) sendView(false);
  }

  function remember(q) {
    state.history = [q, ...state.history.filter((x) => x !== q)].slice(0, 20);
    try {
      localStorage.setItem(`lsplat-history-${state.hello.run}`, JSON.stringify(state.history));
    } catch (e) { /* storage may be off */ }
    drawHistory();
  }

  function drawHistory() {
    const ol = $('history');
    ol.innerHTML = '';
    for (const q of state.history) {
      const li = document.createElement('li');
      li.textContent = q;
      li.classList.toggle('current', q === state.query);
      li.onclick = () => ask(q);
      ol.append(li);
    }
  }

  function ask(text) {
    const t = text.trim();
    if (!t) return;
    $('query').value = t;
    send({ type: 'query', text: t });
  }

  async function onFrame(buf) {
    const n = new DataView(buf).getUint32(0, true);
    const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, 4, n)));
    const image = new Uint8Array(buf, 4 + n);
    const mime = header.format === 'png' ? 'image/png' : 'image/jpeg';
    if (header.kind === 'save') {
      state.saves += 1;
      state.lastSave = { header, image };
      const a = document.createElement('a');
      a.href = URL.createObjectURL(new Blob([image], { type: mime }));
      a.download = `${state.hello.run}_${header.mode}${header.query ? `_${header.query.replace(/\W+/g, '_')}` : ''}.png`;
      document.body.append(a);
      a.click();
      a.remove();
      return;
    }
    if (header.seq < (state.lastHeader ? state.lastHeader.seq : 0)) return;
    const bmp = await createImageBitmap(new Blob([image], { type: mime }));
    draw(bmp);
    state.frames += 1;
    state.lastHeader = header;
    if (header.kind === 'full') state.lastFull = { header, image };
    state.errors = [];
    const t = header.timings;
    status(`${header.kind} ${header.width}×${header.height}`);
    $('stats').textContent =
      `${header.kind} ${header.width}×${header.height} ${header.format}${header.quality ? ` q${header.quality}` : ''}\n` +
      `frame ${t.total.toFixed(1)} ms: raster ${t.rasterize.toFixed(1)}, relevancy ${t.relevancy.toFixed(1)}, ` +
      `shade ${t.shade.toFixed(1)}; encode ${header.encode_ms.toFixed(1)} ms` +
      (header.decode.vertices ? `\ndecoded ${header.decode.vertices} table vertices` : '') +
      (header.top !== null && header.top !== undefined ? `\nmax relevancy ${header.top.toFixed(3)}` : '') +
      `\n${state.hello.backend}`;
  }

  // The frame fitted into the canvas, letterboxed.
  let lastBitmap = null;
  function draw(bmp) {
    if (lastBitmap && lastBitmap !== bmp) lastBitmap.close();
    lastBitmap = bmp;
    const r = canvas.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.max(1, Math.round(r.width * dpr));
    canvas.height = Math.max(1, Math.round(r.height * dpr));
    const s = Math.min(canvas.width / bmp.width, canvas.height / bmp.height);
    const w = bmp.width * s, h = bmp.height * s;
    ctx2d.imageSmoothingEnabled = true;
    ctx2d.fillStyle = '#000';
    ctx2d.fillRect(0, 0, canvas.width, canvas.height);
    ctx2d.drawImage(bmp, (canvas.width - w) / 2, (canvas.height - h) / 2, w, h);
  }
  window.addEventListener('resize', () => {
    if (lastBitmap) draw(lastBitmap);
    if (state.size === 'window') moved();
  });

  // ---- input: pointers (mouse and touch), wheel, keys ----
  const pointers = new Map();
  let pinch = null;
  canvas.addEventListener('contextmenu', (e) => e.preventDefault());
  canvas.addEventListener('pointerdown', (e) => {
    canvas.setPointerCapture(e.pointerId);
    pointers.set(e.pointerId, { x: e.clientX, y: e.clientY, pan: e.button === 2 || e.shiftKey });
    canvas.focus();
  });
  canvas.addEventListener('pointermove', (e) => {
    const p = pointers.get(e.pointerId);
    if (!p || !state.cam) return;
    const dx = e.clientX - p.x, dy = e.clientY - p.y;
    p.x = e.clientX;
    p.y = e.clientY;
    if (pointers.size === 2) {
      const [a, b] = [...pointers.values()];
      const d = Math.hypot(a.x - b.x, a.y - b.y);
      if (pinch) zoom(pinch / Math.max(d, 1));
      pinch = d;
      pan(dx / 2, dy / 2);
    } else if (p.pan) {
      pan(dx, dy);
    } else {
      orbit(dx, dy);
    }
    moved();
  });
  const release = (e) => {
    pointers.delete(e.pointerId);
    pinch = null;
  };
  canvas.addEventListener('pointerup', release);
  canvas.addEventListener('pointercancel', release);
  canvas.addEventListener('wheel', (e) => {
    e.preventDefault();
    if (!state.cam) return;
    zoom(Math.exp(e.deltaY * 0.001));
    moved();
  }, { passive: false });

  const flyKeys = { w: [0, 0, 1], s: [0, 0, -1], a: [-1, 0, 0], d: [1, 0, 0], q: [0, 1, 0], e: [0, -1, 0] };
  const lookKeys = { ArrowLeft: [0.03, 0], ArrowRight: [-0.03, 0], ArrowUp: [0, -0.03], ArrowDown: [0, 0.03] };
  document.addEventListener('keydown', (e) => {
    if (!state.cam || e.target.tagName === 'INPUT' || e.target.tagName === 'TEXTAREA') return;
    const k = e.key.length === 1 ? e.key.toLowerCase() : e.key;
    if (flyKeys[k]) fly(...flyKeys[k]);
    else if (lookKeys[k]) look(...lookKeys[k]);
    else if (k === '+' || k === '=') zoom(0.9);
    else if (k === '-') zoom(1.1);
    else if (k === 'r') return snap(state.snapped);
    else if (k === '[') return snap(state.snapped - 1);
    else if (k === ']') return snap(state.snapped + 1);
    else if (k >= '1' && k <= '4') return setMode(['rgb', 'features', 'relevancy', 'segmentation'][k - 1]);
    else if (k === 'l') {
      const ls = state.hello.levels;
      const i = ls.findIndex((l) => l.level === state.level);
      state.level = ls[(i + 1) % ls.length].level;
      $('level').value = String(state.level);
      updateControls();
      return sendView(false);
    } else return undefined;
    e.preventDefault();
    moved();
    return undefined;
  });

  // ---- the panel ----
  for (const b of document.querySelectorAll('#modes button')) b.onclick = () => setMode(b.dataset.mode);
  $('level').onchange = (e) => { state.level = Number(e.target.value); updateControls(); sendView(false); };
  $('exact').onchange = (e) => { state.exact = e.target.checked; sendView(false); };
  $('query-form').onsubmit = (e) => { e.preventDefault(); ask($('query').value); };
  $('threshold').oninput = (e) => {
    state.threshold = Number(e.target.value);
    updateControls();
    if (state.mode === 'segmentation') moved();
  };
  $('cameras').onchange = (e) => snap(Number(e.target.value));
  $('size').onchange = (e) => { state.size = e.target.value; sendView(false); };
  $('runs').onchange = (e) => {
    const q = new URLSearchParams(location.search);
    q.set('run', e.target.value);
    location.search = q.toString();
  };
  $('copy').onclick = () => {
    const p = state.lastFull ? state.lastFull.header.camera : (state.cam ? pose(state.cam) : null);
    if (!p) return;
    const text = JSON.stringify(p, null, 1);
    $('pose').value = text;
    if (navigator.clipboard) navigator.clipboard.writeText(text).catch(() => {});
  };
  $('save').onclick = () => send({ type: 'save' });

  // For scripts and tests: the state, and the last full frame's bytes as base64.
  window.lsplatViewer = {
    state,
    pose: () => (state.cam ? pose(state.cam) : null),
    orbit: (dx, dy) => { orbit(dx, dy); sendView(false); },
    snap,
    setMode,
    lastFullBase64: () => {
      if (!state.lastFull) return null;
      let s = '';
      const b = state.lastFull.image;
      for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode.apply(null, b.subarray(i, i + 0x8000));
      return btoa(s);
    },
  };

  connect();
})();
