"""The dashboard's static assets: its stylesheet, icon and the one small script."""

from __future__ import annotations

__all__ = ["ICON", "LIVE_JS", "STYLE"]

STYLE = """
:root{--fg:#1d232b;--muted:#6b7580;--line:#dde2e7;--ok:#2f9e62;--bad:#d2483c;--acc:#2b6cb0}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);
background:#f6f8fa}
header{display:flex;gap:1.5rem;align-items:center;padding:.6rem 1.2rem;background:#1d232b;
color:#fff}
header a{color:#c9d4df;text-decoration:none;margin-right:1rem}
header a.on,header a:hover{color:#fff;text-decoration:underline}
.brand{font-size:1.1rem}
.who{margin-left:auto}
main{padding:1rem 1.5rem}
h1{font-size:1.4rem;margin:.3rem 0 1rem}h2{font-size:1.1rem;margin:1.4rem 0 .5rem}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid var(--line)}
th,td{padding:.35rem .6rem;border-bottom:1px solid var(--line);text-align:left;
vertical-align:top}
th{background:#eef1f4;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td.bad a{color:var(--bad);font-weight:600}
td.err{color:var(--bad);font-size:.9em}
a{color:var(--acc)}
code{font:12.5px ui-monospace,SFMono-Regular,Menlo,monospace}
pre{background:#fff;border:1px solid var(--line);padding:.8rem;overflow:auto;max-height:28rem;
font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;white-space:pre-wrap}
pre.error{border-color:#f0c2bd;background:#fff7f6}
.state{padding:.05rem .45rem;border-radius:.7rem;font-size:.85em;background:#e8ecf0}
.state.pending{background:#dcebff}.state.processing{background:#fff0c2}
.state.dead{background:#ffd9d4}.state.delayed{background:#e9e3ff}
.badge{padding:.1rem .5rem;border-radius:.7rem;background:#55606b;color:#fff;font-size:.85em}
.badge.ok{background:var(--ok)}.badge.bad{background:var(--bad)}
tr.gone{color:var(--muted)}
.muted{color:var(--muted)}
.flash{background:#e7f3ec;border:1px solid #b7dcc6;padding:.5rem .8rem}
.flash.bad{background:#fff0ee;border-color:#f0c2bd}
form.inline{display:inline}
button{font:inherit;padding:.25rem .7rem;border:1px solid #9aa5b1;border-radius:.3rem;
background:#fff;cursor:pointer}
button:hover{background:#eef1f4}button.danger{border-color:var(--bad);color:var(--bad)}
button[disabled]{opacity:.5;cursor:not-allowed}
.lookup input{width:7rem;padding:.2rem .4rem}
.filters{margin:.4rem 0 .8rem}
nav.pages{margin:.6rem 0}p.cut{margin:.2rem 0}
.stats{display:flex;gap:2rem;align-items:baseline;margin:.3rem 0 .5rem;flex-wrap:wrap}
.stats b{font-size:1.3rem}
.legend i{display:inline-block;width:.8rem;height:.8rem;margin:0 .3rem 0 .8rem}
.legend i.ok,rect.ok{background:var(--ok);fill:var(--ok)}
.legend i.bad,rect.bad{background:var(--bad);fill:var(--bad)}
.chart-box{position:relative;margin:.3rem 0 1rem}
svg.chart{display:block;width:100%;height:16rem;background:#fff;border:1px solid var(--line)}
svg.chart line.grid{stroke:var(--line);stroke-width:1;vector-effect:non-scaling-stroke}
.chart-empty{position:absolute;top:6rem;width:100%;text-align:center;margin:0}
.axis{display:flex;justify-content:space-between;color:var(--muted);font-size:.8em}
nav.ranges a{margin-left:.5rem;padding:.05rem .4rem;border:1px solid var(--line);
border-radius:.3rem;text-decoration:none}nav.ranges a.on{background:var(--acc);color:#fff}
.queue-flow{display:flex;gap:1rem;align-items:center}
form.limits{margin:.6rem 0;display:flex;gap:.8rem;flex-wrap:wrap;align-items:center}
form.limits input{width:6rem;padding:.2rem .4rem}
td.holds a{margin-right:.4rem}
dl{display:grid;grid-template-columns:10rem 1fr;gap:.2rem 1rem;background:#fff;
border:1px solid var(--line);padding:.8rem;margin:0}
dt{color:var(--muted)}dd{margin:0}
footer{padding:1rem 1.5rem;color:var(--muted);font-size:.85em}
"""

ICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16">'
    '<rect width="16" height="16" rx="3" fill="#1d232b"/>'
    '<rect x="3" y="9" width="2" height="4" fill="#2f9e62"/>'
    '<rect x="7" y="5" width="2" height="8" fill="#2f9e62"/>'
    '<rect x="11" y="3" width="2" height="10" fill="#d2483c"/></svg>'
)

LIVE_JS = """
// Refresh every [data-live] element in place from a fresh copy of this page.
(function () {
  var every = Number(document.body.dataset.refreshMs || 0);
  if (!every) return;
  function tick() {
    fetch(location.href, {headers: {"Accept": "text/html"}, cache: "no-store",
                          credentials: "same-origin"})
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        if (text === null) return;
        var doc = new DOMParser().parseFromString(text, "text/html");
        document.querySelectorAll("[data-live]").forEach(function (el) {
          var fresh = doc.getElementById(el.id);
          if (fresh && fresh.innerHTML !== el.innerHTML) el.innerHTML = fresh.innerHTML;
        });
        var stamp = document.getElementById("updated");
        if (stamp) stamp.textContent = new Date().toLocaleTimeString();
      })
      .catch(function () {})
      .then(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
})();
"""
