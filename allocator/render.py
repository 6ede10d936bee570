"""Draw plans as the article's figure: GPUs as rows, steps as columns, a colour per job.

Several plans of one scenario stack top to bottom (fast above fifo), realtime hatched.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch

MAX_HEIGHT_IN = 60.0
PATCH_CELLS = 20_000  # above this, cells are pixels of one image (no hatching)


def render_png(plans: list[dict]) -> bytes:
    """PNG bytes for plan dicts (as written by `gpuplan plan`), one panel each."""
    ids = sorted({c for p in plans for row in p["grid"] for c in row if c is not None})
    palette = [plt.get_cmap(name)(k) for name in ("tab20", "tab20b", "tab20c") for k in range(20)]
    colour = {job: palette[i % len(palette)] for i, job in enumerate(ids)}
    kinds = {}
    for p in plans:
        kinds.update(p.get("kinds", {}))
    G = len(plans[0]["grid"][0]) if plans and plans[0]["grid"] else 1
    fig_h = sum(0.25 * (len(p["grid"][0]) if p["grid"] else 1) + 0.9 for p in plans) + 0.8
    # a large cluster is drawn smaller, never taller than the PNG can hold
    fig, axes = plt.subplots(len(plans), 1, figsize=(12, min(MAX_HEIGHT_IN, max(2.5, fig_h))),
                             squeeze=False)
    for ax, plan in zip(axes[:, 0], plans, strict=True):
        grid = plan["grid"]
        T = len(grid)
        G = len(grid[0]) if T else G
        if T * G > PATCH_CELLS:  # one image, not a patch per cell: a large grid in seconds
            image = np.ones((G, T, 4))
            for t, row in enumerate(grid):
                for g, job in enumerate(row):
                    if job is not None and g < G:
                        image[g, t] = colour[job]
            ax.imshow(image, aspect="auto", extent=(0, T, G, 0), interpolation="nearest")
        for t, row in enumerate(grid if T * G <= PATCH_CELLS else []):
            for g, job in enumerate(row):
                if job is None:
                    continue
                realtime = kinds.get(job) == "realtime"
                ax.add_patch(plt.Rectangle((t, g), 1, 1, facecolor=colour[job],
                                           edgecolor="white", linewidth=0.5,
                                           hatch="//" if realtime else None))
        m = plan.get("metrics", {})
        ax.set_title(f"{plan.get('policy', '?')}: utilization {100 * m.get('utilization', 0):.1f}%"
                     f", value {m.get('value', 0):g}, realtime shortfall "
                     f"{m.get('rt_shortfall', 0)}", fontsize=10, loc="left")
        ax.set_xlim(0, T)
        ax.set_ylim(G, 0)
        ax.set_xlabel("step")
        ax.set_ylabel("GPU")
        ax.set_xticks(range(0, T + 1, max(1, T // 12)))
        ax.set_yticks(range(0, G, max(1, G // 16)))
    handles = [Patch(facecolor=colour[j], hatch="//" if kinds.get(j) == "realtime" else None,
                     label=j) for j in ids[:40]]
    fig.legend(handles=handles, loc="lower center", ncol=min(8, max(1, len(handles))),
               fontsize=7, frameon=False)
    name = plans[0].get("scenario", "") if plans else ""
    fig.suptitle(f"gpuplan: {name}", fontsize=12)
    fig.tight_layout(rect=(0, 0.08, 1, 0.97))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()
