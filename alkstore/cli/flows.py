"""``alkstore flows``: a workflow's jobs as a tree with their states, and a batch's counts."""

from __future__ import annotations

from typing import Any

import click
from rich.markup import escape

from alkstore.cli import render
from alkstore.cli.base import Failed, _json_option, _open, _out, _run, _store_options
from alkstore.cli.jobs import _job_id
from alkstore.flowgraph import FlowGraph, read_flow

__all__ = ["flows"]

_STYLE = {
    "succeeded": "green",
    "dead": "red",
    "blocked": "yellow",
    "processing": "cyan",
    "pending": "white",
    "gone": "dim",
}


@click.group()
def flows() -> None:
    """Show workflows: jobs with dependencies (EnqueueOpts.after, alkstore.workflows)."""


def _graph(ctx: click.Context, job_id: str, url: str | None, schema: str | None) -> FlowGraph:
    ident = _job_id(job_id)

    async def go() -> FlowGraph:
        async with await _open(ctx, url, schema) as store:
            return await read_flow(store, ident)

    graph = _run(go())
    if graph.nodes[ident].state == "gone":
        raise Failed(f"no job {ident} (a finished job shows only while its result is kept)")
    return graph


def _json(graph: FlowGraph) -> dict[str, Any]:
    return {
        "root": graph.root,
        "truncated": graph.truncated,
        "nodes": [
            {"id": n.id, "queue": n.queue, "state": n.state, "last_error": n.last_error}
            for n in graph.nodes.values()
        ],
        "edges": [
            {"parent": p, "child": c, "policy": policy, "killed": killed}
            for p, c, policy, killed in graph.edges
        ],
    }


def tree_lines(graph: FlowGraph) -> list[str]:
    """The graph as indented lines (rich markup): every root, then each child under
    each of its parents (a job with several parents is drawn in full once)."""
    lines: list[str] = []
    drawn: set[int] = set()

    def draw(ident: int, depth: int, policy: str | None) -> None:
        node = graph.nodes[ident]
        style = _STYLE.get(node.state, "white")
        via = " [dim](runs anyway)[/dim]" if policy == "complete" else ""
        mark = "* " if ident == graph.root else ""
        error = f"  [dim]{escape(node.last_error or '')}[/dim]" if node.state == "dead" else ""
        again = " [dim](above)[/dim]" if ident in drawn else ""
        queue = escape(node.queue or "?")
        lines.append(
            f"{'  ' * depth}{mark}#{ident} {queue} [{style}]{node.state}[/{style}]"
            f"{via}{again}{error if not again else ''}"
        )
        if ident in drawn:
            return
        drawn.add(ident)
        for p, c, pol, _ in graph.edges:
            if p == ident:
                draw(c, depth + 1, pol)

    for root in graph.roots():
        draw(root, 0, None)
    if graph.truncated:
        lines.append("[dim]… cut: the workflow has more jobs than are read at once[/dim]")
    return lines


@flows.command("show")
@click.argument("job_id", metavar="ID")
@_json_option
@_store_options
@click.pass_context
def flows_show(
    ctx: click.Context, job_id: str, as_json: bool, url: str | None, schema: str | None
) -> None:
    """The workflow around job ID as a tree: each job with its state (* marks ID)."""
    graph = _graph(ctx, job_id, url, schema)
    if as_json:
        render.print_json(_json(graph))
        return
    for line in tree_lines(graph):
        _out().print(line)


@flows.command("counts")
@click.argument("job_id", metavar="ID")
@_json_option
@_store_options
@click.pass_context
def flows_counts(
    ctx: click.Context, job_id: str, as_json: bool, url: str | None, schema: str | None
) -> None:
    """The states of the jobs callback ID waits for (a batch's counts)."""
    graph = _graph(ctx, job_id, url, schema)
    ident = _job_id(job_id)
    counts = graph.counts(ident)
    total = sum(counts.values())
    if as_json:
        render.print_json({"job": ident, "total": total, **counts})
        return
    if not total:
        raise Failed(f"job {ident} waits for no job (not a batch callback, or it finished)")
    parts = ", ".join(f"{state} {n}" for state, n in sorted(counts.items()))
    _out().print(f"#{ident}: {total} job(s): {parts}")
