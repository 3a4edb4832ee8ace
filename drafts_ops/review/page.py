"""The review page: one self-contained HTML document (inline style and script, nothing
from the internet) that lists the candidates, shows one in detail and labels it."""

from __future__ import annotations

from drafts_ops.review.labels import LABELS

_STYLE = """
body{font:14px system-ui,sans-serif;margin:0;display:flex;height:100vh}
#list{flex:1 1 55%;overflow:auto;padding:8px;border-right:1px solid #ccc}
#detail{flex:1 1 45%;overflow:auto;padding:8px}
table{border-collapse:collapse;width:100%}
th,td{padding:2px 6px;border-bottom:1px solid #eee;text-align:right;white-space:nowrap}
th{cursor:pointer;background:#f4f4f4;position:sticky;top:0}
td.l{text-align:left} tr.sel{background:#ffe9a8} tr:hover{background:#f0f6ff}
.filters input{width:5em} .filters label{margin-right:8px}
.lab-burst{color:#0a0;font-weight:bold} .lab-rfi{color:#c00;font-weight:bold}
.lab-noise{color:#666} .lab-unsure{color:#a60}
#keys{color:#555;font-size:12px} #status{color:#06c;min-height:1.2em}
#image{max-width:100%;border:1px solid #ddd;min-height:200px}
"""

_SCRIPT = """
var rows = [], shown = [], current = -1, sortKey = 'snr', sortUp = false;
var LABELS = %(labels)s;
function $(id){ return document.getElementById(id); }
function num(id){ var v = parseFloat($(id).value); return isNaN(v) ? null : v; }
function load(){
  fetch('/api/candidates').then(function(r){ return r.json(); }).then(function(doc){
    rows = doc.candidates; $('roots').textContent = doc.roots.join(', '); render();
  });
}
function keep(c){
  var lo = num('snr'), d0 = num('dmlo'), d1 = num('dmhi'), w = num('wmax'),
      t0 = num('tlo'), t1 = num('thi'), p0 = num('plo'), p1 = num('phi'),
      beam = $('beam').value.trim(), lab = $('label').value;
  if (lo !== null && c.snr < lo) return false;
  if (d0 !== null && c.dm < d0) return false;
  if (d1 !== null && c.dm > d1) return false;
  if (w !== null && c.width_ms > w) return false;
  if (t0 !== null && c.t < t0) return false;
  if (t1 !== null && c.t > t1) return false;
  var p = c.prob === null ? -1 : c.prob;
  if (p0 !== null && p < p0) return false;
  if (p1 !== null && p > p1) return false;
  if (beam && String(c.beam) !== beam) return false;
  if (lab === 'unlabelled' && c.label) return false;
  if (lab !== 'any' && lab !== 'unlabelled' && c.label !== lab) return false;
  return true;
}
function value(c, key){
  if (key === 'uncertainty') return c.prob === null ? 1 : -Math.abs(c.prob - 0.5);
  return c[key] === null ? -1 : c[key];
}
function render(){
  var id = current >= 0 && shown[current] ? shown[current].id : null;
  shown = rows.filter(keep);
  shown.sort(function(a, b){
    var x = value(a, sortKey), y = value(b, sortKey);
    var c = (typeof x === 'string') ? String(x).localeCompare(String(y)) : x - y;
    return sortUp ? c : -c;
  });
  var body = $('rows'); body.innerHTML = '';
  shown.forEach(function(c, i){
    var tr = document.createElement('tr'); tr.dataset.id = c.id;
    tr.innerHTML = '<td class="l">' + esc(c.file) + '</td><td>' + esc(c.beam) + '</td><td>'
      + c.t.toFixed(4) + '</td><td>' + c.dm.toFixed(1) + '</td><td>' + c.snr.toFixed(1)
      + '</td><td>' + c.width_ms.toFixed(2) + '</td><td>'
      + (c.prob === null ? '' : c.prob.toFixed(3)) + '</td><td class="l lab-' + c.label + '">'
      + esc(c.label) + '</td>';
    tr.onclick = function(){ select(i); };
    body.appendChild(tr);
  });
  $('count').textContent = shown.length + ' of ' + rows.length;
  var again = shown.findIndex(function(c){ return c.id === id; });
  select(again >= 0 ? again : (shown.length ? 0 : -1), true);
}
function esc(s){ return String(s).replace(/[&<>"']/g, function(ch){
  return {'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[ch]; }); }
function select(i, quiet){
  var trs = $('rows').rows;
  if (current >= 0 && trs[current]) trs[current].className = '';
  current = i;
  if (i < 0 || !shown[i]) { $('title').textContent = 'no candidate'; return; }
  trs[i].className = 'sel';
  if (!quiet) trs[i].scrollIntoView({block: 'nearest'});
  var c = shown[i];
  $('title').textContent = c.file + '  t ' + c.t.toFixed(4) + ' s  DM ' + c.dm.toFixed(1)
    + '  S/N ' + c.snr.toFixed(1) + (c.label ? '  [' + c.label + ']' : '');
  $('note').value = c.note || '';
  image();
  fetch('/api/candidate/' + encodeURIComponent(c.id)).then(function(r){ return r.json(); })
    .then(function(p){
      var links = Object.keys(p.links || {}).map(function(k){
        return '<a href="' + p.links[k] + '" target="_blank">' + k + '</a>'; }).join(' ');
      $('links').innerHTML = links;
      $('prov').textContent = JSON.stringify({observation: p.observation, run: p.run,
                                              candidate: p.candidate}, null, 1);
    });
}
function image(){
  if (current < 0) return;
  var c = shown[current];
  $('image').src = '/api/image/' + encodeURIComponent(c.id) + '.png?subbands='
    + $('subbands').value + '&smooth=' + $('smooth').value;
}
function label(name){
  if (current < 0) return;
  var c = shown[current];
  fetch('/api/label', {method: 'POST', headers: {'Content-Type': 'application/json'},
    body: JSON.stringify({id: c.id, label: name, note: $('note').value})})
    .then(function(r){ return r.json().then(function(doc){ return [r.ok, doc]; }); })
    .then(function(res){
      if (!res[0]) { $('status').textContent = 'not saved: ' + res[1].error; return; }
      c.label = name; c.note = res[1].note;
      $('status').textContent = 'saved ' + name + ' for ' + c.id;
      var next = current + 1; render();
      var at = shown.findIndex(function(x){ return x.id === c.id; });
      select(at >= 0 ? Math.min(at + 1, shown.length - 1) : Math.min(next - 1, shown.length - 1));
    });
}
document.addEventListener('keydown', function(e){
  if (e.target.tagName === 'INPUT' || e.target.tagName === 'SELECT') {
    if (e.key === 'Escape') e.target.blur();
    return;
  }
  var keys = {b: 'burst', r: 'rfi', n: 'noise', u: 'unsure'};
  if (keys[e.key]) { label(keys[e.key]); e.preventDefault(); }
  else if (e.key === 'j' || e.key === 'ArrowDown') {
    select(Math.min(current + 1, shown.length - 1)); e.preventDefault(); }
  else if (e.key === 'k' || e.key === 'ArrowUp') {
    select(Math.max(current - 1, 0)); e.preventDefault(); }
  else if (e.key === '/') { $('note').focus(); e.preventDefault(); }
});
document.querySelectorAll('th[data-k]').forEach(function(th){
  th.onclick = function(){
    var k = th.dataset.k; sortUp = (sortKey === k) ? !sortUp : true; sortKey = k; render();
  };
});
document.querySelectorAll('.filters input, .filters select').forEach(function(el){
  el.addEventListener('input', render);
});
$('uncertain').onclick = function(){ sortKey = 'uncertainty'; sortUp = false; render(); };
$('subbands').onchange = image; $('smooth').onchange = image;
load();
"""

_BODY = """
<div id="list">
 <h2>Candidates <small id="count"></small></h2>
 <p id="roots" style="color:#666;font-size:12px"></p>
 <p class="filters">
  <label>S/N &ge; <input id="snr"></label><label>DM <input id="dmlo"> &ndash;
  <input id="dmhi"></label><label>width &le; <input id="wmax"> ms</label>
  <label>t <input id="tlo"> &ndash; <input id="thi"> s</label>
  <label>P(burst) <input id="plo"> &ndash; <input id="phi"></label>
  <label>beam <input id="beam"></label>
  <label>label <select id="label"><option>any</option><option>unlabelled</option>%(options)s
  </select></label>
  <button id="uncertain" title="classifier probability nearest 0.5 first">most uncertain
  first</button>
 </p>
 <table><thead><tr><th data-k="file">file</th><th data-k="beam">beam</th><th data-k="t">t (s)
 </th><th data-k="dm">DM</th><th data-k="snr">S/N</th><th data-k="width_ms">width (ms)</th>
 <th data-k="prob">P(burst)</th><th data-k="label">label</th></tr></thead>
 <tbody id="rows"></tbody></table>
</div>
<div id="detail">
 <h3 id="title"></h3>
 <p id="keys">keys: <b>b</b> burst, <b>r</b> RFI, <b>n</b> noise, <b>u</b> unsure (with the note
 below), <b>j</b>/<b>k</b> or arrows next/previous, <b>/</b> note, Esc leaves a field</p>
 <p>note <input id="note" size="50"> <span id="status"></span></p>
 <p>sub-bands <select id="subbands"><option>auto</option><option>4</option><option>8</option>
 <option>16</option><option>32</option><option>64</option><option>256</option></select>
 smoothing <select id="smooth"><option>auto</option><option>1</option><option>2</option>
 <option>4</option><option>8</option><option>16</option></select> <span id="links"></span></p>
 <img id="image" alt="detail of the candidate">
 <pre id="prov" style="font-size:11px;white-space:pre-wrap"></pre>
</div>
"""


def review_page() -> str:
    """The page's HTML."""
    options = "".join(f"<option>{name}</option>" for name in LABELS)
    labels = "[" + ",".join(f"'{name}'" for name in LABELS) + "]"
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>drafts-ops review"
            f"</title><style>{_STYLE}</style></head><body>{_BODY % {'options': options}}"
            f"<script>{_SCRIPT % {'labels': labels}}</script></body></html>\n")  # fmt: skip
