#include "examples/serve/page.h"

#include <fmt/format.h>

namespace nabla::serve {

namespace {

constexpr const char* kHead = R"html(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>nabla-serve</title>
<style>
body { font: 15px/1.4 system-ui, sans-serif; max-width: 52rem; margin: 2rem auto; color: #222; }
textarea { width: 100%; height: 7rem; font: inherit; }
button { font: inherit; padding: .3rem 1.2rem; margin: .5rem 0; }
#label { font-size: 1.6rem; font-weight: 600; }
.bar { display: flex; align-items: center; gap: .5rem; margin: 2px 0; }
.bar span { width: 6rem; text-align: right; }
.bar div { background: #3b7dd8; height: .9rem; }
#heatmap { font-family: ui-monospace, monospace; white-space: pre-wrap; line-height: 1.8;
           border: 1px solid #ddd; padding: .5rem; }
#heatmap span { border-radius: 2px; }
#error { color: #b00020; }
canvas { border: 1px solid #999; image-rendering: pixelated; touch-action: none; }
</style></head><body>
<h1>nabla-serve</h1>
)html";

constexpr const char* kLangIdBody = R"html(
<p>Type a text in one of the model's languages; the server names the language.</p>
<textarea id="input">Die Gedanken sind frei, wer kann sie erraten?</textarea><br>
<button id="go">Identify</button>
)html";

constexpr const char* kVitBody = R"html(
<p>Draw a piece of clothing (white on black, like Fashion-MNIST) and classify it.</p>
<canvas id="draw" width="280" height="280"></canvas><br>
<button id="clear">Clear</button> <button id="go">Classify</button>
)html";

// Shared script: predict(), the probability bars and the heatmap; `kind` is set before it.
constexpr const char* kScript = R"html(
<div id="error"></div>
<div id="label"></div>
<div id="probabilities"></div>
<h3 id="heat-title">Attention (last layer, averaged over heads and positions)</h3>
<div id="heatmap"></div>
<div id="selftest"></div>
<script>
if (kind === 'vit')
  $('heat-title').textContent = 'Attention (last layer, CLS token to each patch, mean of heads)';
function show(r) {
  $('label').textContent = r.label;
  const probs = $('probabilities');
  probs.innerHTML = '';
  for (const [name, p] of Object.entries(r.probabilities).sort((a, b) => b[1] - a[1])) {
    const row = document.createElement('div');
    row.className = 'bar';
    row.innerHTML = '<span></span><div></div><small></small>';
    row.children[0].textContent = name;
    row.children[1].style.width = (p * 30) + 'rem';
    row.children[2].textContent = (100 * p).toFixed(1) + '%';
    probs.appendChild(row);
  }
  const heat = $('heatmap');
  heat.innerHTML = '';
  // Colour by rank between the lowest and highest weight: they are often close to uniform.
  const w = r.attention.weights, lo = Math.min(...w), span = Math.max(...w) - lo || 1;
  const alpha = (v) => (0.08 + 0.92 * (v - lo) / span).toFixed(3);
  if (kind === 'langid') {
    r.attention.tokens.forEach((ch, i) => {
      const s = document.createElement('span');
      s.className = 'cell';
      s.textContent = ch;
      s.title = w[i].toFixed(4);
      s.style.background = `rgba(230, 80, 30, ${alpha(w[i])})`;
      heat.appendChild(s);
    });
  } else {  // one cell per patch, over the image that was sent
    const side = Math.round(Math.sqrt(w.length));
    heat.style.display = 'grid';
    heat.style.gridTemplateColumns = `repeat(${side}, ${12 / side}rem)`;
    heat.style.width = '12rem';
    heat.style.padding = '0';  // the cells lie exactly over the image's patches
    heat.style.background = `url(${sentPicture}) 0 0 / 100% 100%`;
    w.forEach((v) => {
      const s = document.createElement('span');
      s.className = 'cell';
      s.style.height = `${12 / side}rem`;
      s.title = v.toFixed(4);
      s.style.background = `rgba(230, 80, 30, ${(0.85 * alpha(v)).toFixed(3)})`;
      heat.appendChild(s);
    });
  }
}
async function predict(payload) {
  $('error').textContent = '';
  const res = await fetch('/v1/predict', {method: 'POST',
      headers: {'Content-Type': 'application/json'}, body: JSON.stringify(payload)});
  const r = await res.json();
  if (!res.ok) throw new Error(r.error || res.statusText);
  show(r);
  return r;
}
let sentImage = null, sentPicture = '';  // vit: the 28x28 values sent and the drawing
async function submit() {
  try {
    if (kind === 'langid') return await predict({text: $('input').value, attention: true});
    sentImage = pixels();
    sentPicture = canvas.toDataURL();
    return await predict({image: sentImage, attention: true});
  } catch (e) { $('error').textContent = e.message; throw e; }
}
$('go').addEventListener('click', () => submit().catch(() => {}));
// Self-test: langid types the text into the box, vit draws the named shape with pointer events
// on the canvas; then the same submit() as the button, and a report of what the page shows.
const selftest = new URLSearchParams(location.search).get('selftest');
if (selftest !== null) {
  const report = (text) => { $('selftest').textContent = 'selftest: ' + text; };
  (async () => {
    if (kind === 'langid') $('input').value = selftest;
    else drawShape(selftest);
    const r = await submit();
    const cells = document.querySelectorAll('#heatmap .cell').length;
    const shown = $('label').textContent, bars = $('probabilities').children.length;
    if (sentImage) $('selftest').dataset.image = JSON.stringify(sentImage);
    const ink = sentImage ? ` ink=${sentImage.flat().filter((v) => v > 0.5).length}` : '';
    report(cells > 0 && shown === r.label ? `ok label=${shown} cells=${cells} bars=${bars}${ink}`
                                          : `failed label=${shown} cells=${cells}`);
  })().catch((e) => report('failed ' + e.message));
}
</script>
)html";

constexpr const char* kVitScript = R"html(
<script>
const canvas = $('draw'), ctx = canvas.getContext('2d');
function clearCanvas() { ctx.fillStyle = '#000'; ctx.fillRect(0, 0, 280, 280); }
clearCanvas();
$('clear').addEventListener('click', clearCanvas);
let down = false;
canvas.addEventListener('pointerdown', () => { down = true; });
window.addEventListener('pointerup', () => { down = false; });
canvas.addEventListener('pointermove', (e) => {
  if (!down) return;
  ctx.fillStyle = '#fff';
  ctx.beginPath();
  ctx.arc(e.offsetX, e.offsetY, 12, 0, 2 * Math.PI);
  ctx.fill();
});
// Self-test shapes: strokes in 28x28 pixel coordinates, drawn through the pointer handlers above
// (synthetic pointer events carry client coordinates; the handlers read offsetX / offsetY).
const kShapes = {
  trouser: [[[10, 1], [18, 1]], [[14, 1], [14, 9]], [[10.5, 1], [10.5, 27]],
            [[12.3, 1], [12.3, 27]], [[15.7, 1], [15.7, 27]], [[17.5, 1], [17.5, 27]]],
  tshirt: [[[3, 9], [9, 3], [19, 3], [25, 9]], [[5, 10], [10, 6], [18, 6], [23, 10]],
           [[9, 5], [9, 25]], [[11, 6], [11, 25]], [[13, 6], [13, 25]], [[15, 6], [15, 25]],
           [[17, 6], [17, 25]], [[19, 5], [19, 25]]],
};
function drawShape(name) {
  const strokes = kShapes[name];
  if (!strokes) throw new Error(`no shape '${name}' (${Object.keys(kShapes).join(', ')})`);
  const box = canvas.getBoundingClientRect();
  const left = box.left + canvas.clientLeft, top = box.top + canvas.clientTop;
  const at = (type, x, y) => canvas.dispatchEvent(
      new PointerEvent(type, {bubbles: true, clientX: left + 10 * x, clientY: top + 10 * y}));
  clearCanvas();
  for (const stroke of strokes) {
    at('pointerdown', ...stroke[0]);
    for (let i = 1; i < stroke.length; ++i) {
      const [x0, y0] = stroke[i - 1], [x1, y1] = stroke[i];
      const steps = Math.ceil(Math.hypot(x1 - x0, y1 - y0) * 2.5);  // every 4 canvas pixels
      for (let t = 0; t <= steps; ++t)
        at('pointermove', x0 + (x1 - x0) * t / steps, y0 + (y1 - y0) * t / steps);
    }
    at('pointerup', ...stroke[stroke.length - 1]);
  }
}
// 28x28 averages of the 280x280 canvas, in [0, 1].
function pixels() {
  const d = ctx.getImageData(0, 0, 280, 280).data, rows = [];
  for (let y = 0; y < 28; ++y) {
    const row = [];
    for (let x = 0; x < 28; ++x) {
      let s = 0;
      for (let dy = 0; dy < 10; ++dy)
        for (let dx = 0; dx < 10; ++dx) s += d[4 * ((y * 10 + dy) * 280 + x * 10 + dx)];
      row.push(s / (100 * 255));
    }
    rows.push(row);
  }
  return rows;
}
</script>
)html";

}  // namespace

std::string page_html(ModelKind kind) {
  const bool langid = kind == ModelKind::LangId;
  std::string html = kHead;
  html += langid ? kLangIdBody : kVitBody;
  html += fmt::format(
      "<script>const kind = '{}';\nconst $ = (id) => document.getElementById(id);</script>\n",
      langid ? "langid" : "vit");
  // The canvas helpers before the shared script: its selftest calls pixels() at once.
  if (!langid) html += kVitScript;
  html += kScript;
  html += "</body></html>\n";
  return html;
}

}  // namespace nabla::serve
