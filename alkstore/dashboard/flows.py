"""The dashboard's workflow page: the graph around a job, drawn as SVG, nodes by state.

A layered drawing: each job sits in the column of its longest path from a root
(so every edge points right), jobs of a column stacked by id. Colours are SVG
presentation attributes (the page's CSP allows no inline style), and each node
links to its job page.
"""

from __future__ import annotations

from collections.abc import Callable

from alkstore.dashboard.html import esc
from alkstore.flowgraph import FlowGraph

__all__ = ["STATE_COLOURS", "flow_body"]

STATE_COLOURS = {
    "succeeded": "#2e7d32",
    "pending": "#546e7a",
    "processing": "#0277bd",
    "blocked": "#f9a825",
    "dead": "#c62828",
    "gone": "#9e9e9e",
}
_W, _H, _GAP_X, _GAP_Y, _PAD = 150, 44, 70, 18, 12


def _columns(graph: FlowGraph) -> dict[int, int]:
    """Each node's column: the length of its longest path from a root."""
    col = {n: 0 for n in graph.nodes}
    parents = {n: graph.parents(n) for n in graph.nodes}
    for _ in range(len(graph.nodes)):  # relax (a DAG settles within n rounds)
        changed = False
        for n, ps in parents.items():
            want = max((col[p] + 1 for p in ps if p in col), default=0)
            if want > col[n]:
                col[n], changed = want, True
        if not changed:
            break
    return col


def flow_body(graph: FlowGraph, job_url: Callable[[int], str]) -> str:
    """The page's body: a legend, the SVG graph and the list of dead jobs' errors."""
    col = _columns(graph)
    stacks: dict[int, list[int]] = {}
    for n in sorted(graph.nodes):
        stacks.setdefault(col[n], []).append(n)
    pos = {}
    for c, members in stacks.items():
        for row, n in enumerate(members):
            pos[n] = (_PAD + c * (_W + _GAP_X), _PAD + row * (_H + _GAP_Y))
    width = _PAD * 2 + (max(stacks, default=0) + 1) * (_W + _GAP_X) - _GAP_X
    height = _PAD * 2 + max((len(m) for m in stacks.values()), default=1) * (_H + _GAP_Y) - _GAP_Y
    parts = [
        f'<svg class="flow" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="workflow of job {graph.root}">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#607d8b"/></marker>'
        "</defs>",
    ]
    for parent, child, policy, _ in graph.edges:
        if parent not in pos or child not in pos:
            continue
        (x1, y1), (x2, y2) = pos[parent], pos[child]
        dash = ' stroke-dasharray="5,4"' if policy == "complete" else ""
        parts.append(
            f'<path class="edge" data-parent="{parent}" data-child="{child}" '
            f'd="M{x1 + _W},{y1 + _H // 2} C{x1 + _W + _GAP_X // 2},{y1 + _H // 2} '
            f'{x2 - _GAP_X // 2},{y2 + _H // 2} {x2},{y2 + _H // 2}" fill="none" '
            f'stroke="#607d8b" stroke-width="1.5"{dash} marker-end="url(#arrow)"/>'
        )
    for n, (x, y) in sorted(pos.items()):
        node = graph.nodes[n]
        colour = STATE_COLOURS.get(node.state, "#9e9e9e")
        ring = ' stroke="#000" stroke-width="3"' if n == graph.root else ""
        parts.append(
            f'<a href="{esc(job_url(n))}"><g class="node" data-id="{n}" '
            f'data-state="{esc(node.state)}"><title>{esc(node.last_error or node.state)}</title>'
            f'<rect x="{x}" y="{y}" width="{_W}" height="{_H}" rx="6" fill="{colour}"{ring}/>'
            f'<text x="{x + 8}" y="{y + 18}" fill="#fff" font-size="13" '
            f'font-weight="bold">#{n} {esc((node.queue or "?")[:14])}</text>'
            f'<text x="{x + 8}" y="{y + 35}" fill="#fff" font-size="12">{esc(node.state)}</text>'
            "</g></a>"
        )
    parts.append("</svg>")
    legend = " ".join(
        f'<span class="badge" data-legend="{s}">'
        f'<svg width="10" height="10"><rect width="10" height="10" fill="{c}"/></svg> {s}</span>'
        for s, c in STATE_COLOURS.items()
    )
    dead = [graph.nodes[n] for n in sorted(graph.nodes) if graph.nodes[n].state == "dead"]
    errors = "".join(
        f'<li><a href="{esc(job_url(d.id))}">#{d.id}</a> {esc(d.last_error or "")}</li>'
        for d in dead
    )
    cut = '<p class="flash">cut: more jobs than are read at once</p>' if graph.truncated else ""
    waits = graph.counts(graph.root)  # a batch callback's counts: the states of its parents
    counts = (
        f'<p id="flow-counts">job {graph.root} waits for {sum(waits.values())} job(s): '
        + ", ".join(f"{esc(state)} {n}" for state, n in sorted(waits.items()))
        + "</p>"
        if waits
        else ""
    )
    return (
        f"<p>{len(graph.nodes)} job(s), {len(graph.edges)} edge(s); a dashed edge runs "
        f'anyway. {legend}</p>{counts}{cut}<div class="flowgraph">{"".join(parts)}</div>'
        + (f'<h2>Dead</h2><ul class="flow-dead">{errors}</ul>' if errors else "")
    )
