#!/usr/bin/env python3
"""The README's benchmark picture: an SVG bar chart from gradd-bench's JSON lines.

For each model, the backward's time under gradd and the floor (the stock
backward's kernels replayed from one CUDA graph), each as a share of the
stock engine's, from `ratio` and `floor_ms / eager_median_ms`. Lines of a
model after its first (more rounds, swept shapes) are left out. No plotting
library: the SVG is written by hand.

    scripts/plot_bench.py docs/bench/h100-graphs-head.jsonl docs/bench-h100.svg "One H100"
"""

import json
import sys
from xml.sax.saxutils import escape

BAR = 14          # height of one bar
GAP = 10          # between models
LABEL = 110       # width of the model names
WIDTH = 420       # width of 100% of the stock engine's time
COLORS = {"gradd": "#2b6cb0", "floor": "#a0aec0"}


def rows(path):
    """(model, gradd share, floor share) per model, first line each."""
    seen = {}
    with open(path) as lines:
        for line in lines:
            d = json.loads(line)
            if d["model"] in seen or "ratio" not in d:
                continue
            floor = d.get("floor_ms")
            seen[d["model"]] = (d["ratio"], floor / d["eager_median_ms"] if floor else None)
    return [(model, *shares) for model, shares in seen.items()]


def svg(data, title):
    height = 40 + len(data) * (2 * BAR + GAP) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{LABEL + WIDTH + 80}" height="{height}" '
           'font-family="sans-serif" font-size="12">',
           f'<text x="4" y="18" font-size="14" font-weight="bold">{escape(title)}: '
           'backward time, share of the stock engine\'s</text>']
    y = 34
    for model, gradd, floor in data:
        out.append(f'<text x="4" y="{y + BAR + 4}">{escape(model)}</text>')
        for k, (name, share) in enumerate((("gradd", gradd), ("floor", floor))):
            if share is None:
                continue
            top = y + k * BAR
            out.append(f'<rect x="{LABEL}" y="{top}" width="{max(share * WIDTH, 1):.1f}" '
                       f'height="{BAR - 2}" fill="{COLORS[name]}"/>')
            out.append(f'<text x="{LABEL + share * WIDTH + 4:.1f}" y="{top + BAR - 4}">'
                       f'{share * 100:.0f}%</text>')
        y += 2 * BAR + GAP
    out.append(f'<line x1="{LABEL + WIDTH}" y1="30" x2="{LABEL + WIDTH}" y2="{y}" '
               'stroke="#c53030" stroke-dasharray="4"/>')
    out.append(f'<text x="{LABEL + WIDTH - 60}" y="{y + 14}" fill="#c53030">stock engine</text>')
    legend = y + 14
    for k, name in enumerate(("gradd", "floor")):
        out.append(f'<rect x="{LABEL + k * 90}" y="{legend - 10}" width="12" height="12" '
                   f'fill="{COLORS[name]}"/>')
        out.append(f'<text x="{LABEL + k * 90 + 16}" y="{legend}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    data = rows(sys.argv[1])
    if not data:
        sys.exit(f"gradd: no benchmark lines with a ratio in {sys.argv[1]}")
    with open(sys.argv[2], "w") as out:
        out.write(svg(data, sys.argv[3]))


if __name__ == "__main__":
    main()
