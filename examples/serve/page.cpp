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
<h3>Attention (last layer, averaged over heads and positions)</h3>
<div id="heatmap"></div>
<div id="selftest"></div>
<script>
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
  } else {
    const side = Math.round(Math.sqrt(w.length));
    heat.style.display = 'grid';
    heat.style.gridTemplateColumns = `repeat(${side}, 2rem)`;
    w.forEach((v) => {
      const s = document.createElement('span');
      s.className = 'cell';
      s.style.height = '2rem';
      s.style.background = `rgba(230, 80, 30, ${alpha(v)})`;
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
async function submit(text) {
  try {
    return await predict(kind === 'langid' ? {text: text ?? $('input').value, attention: true}
                                           : {image: pixels(), attention: true});
  } catch (e) { $('error').textContent = e.message; throw e; }
}
$('go').addEventListener('click', () => submit().catch(() => {}));
const selftest = new URLSearchParams(location.search).get('selftest');
if (selftest !== null) {
  if (kind === 'langid') $('input').value = selftest;
  submit(selftest).then((r) => {
    const cells = document.querySelectorAll('#heatmap .cell').length;
    const shown = $('label').textContent;
    $('selftest').textContent = cells > 0 && shown === r.label
        ? `selftest: ok label=${shown} cells=${cells} bars=${$('probabilities').children.length}`
        : `selftest: failed label=${shown} cells=${cells}`;
  }, (e) => { $('selftest').textContent = 'selftest: failed ' + e.message; });
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
