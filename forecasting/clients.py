"""ServeGen's per-client hourly series: the selection rule, the bundled subset, their sizing.

One ServeGen client looks like one small team's service: idle most hours, short bursts,
volumes from a few requests to a billion over two weeks. `data/traffic/clients/SELECTION.md`
fixes which clients the evaluation uses (written before any result); `select_clients`
is that rule in code, `client_services` the per-client sizing, `clients_wide` the hourly
frame every replay reads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from allocator.core.errors import InputError
from allocator.core.timeparse import parse_time
from forecasting.traffic import SERVEGEN_ANCHOR, ServiceConfig, read_table

CLIENT_COLUMNS = ("hour", "pool", "client", "requests")
SEED = 20250303
PEAKS = (6, 12, 24, 48)
HEADROOM = 0.2
PER_DECILE = (5, 2)  # reported, tuning


@dataclass(frozen=True)
class Selection:
    """The chosen clients (service names "pool/client"), each in ascending volume order."""

    reported: tuple[str, ...]
    tuning: tuple[str, ...]


def load_clients(path: str) -> pd.DataFrame:
    """Read a per-client hourly table (hour, pool, client, requests) and check it."""
    frame = read_table(path)
    missing = [c for c in CLIENT_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", file=str(path),
                         field=missing[0])
    out = frame.loc[:, list(CLIENT_COLUMNS)].copy()
    hours = pd.to_numeric(out["hour"], errors="coerce")
    counts = pd.to_numeric(out["requests"], errors="coerce")
    bad = hours.isna() | (hours < 0) | (hours != np.floor(hours))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(f"row {row + 2}: hour must be a whole number >= 0", file=str(path),
                         field="hour")
    bad = counts.isna() | (counts < 0) | np.isinf(counts)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(f"row {row + 2}: requests must be a count >= 0", file=str(path),
                         field="requests")
    out["hour"], out["requests"] = hours.astype(int), counts.astype(float)
    out["service"] = out["pool"].astype(str) + "/" + out["client"].astype(str)
    if out.duplicated(["service", "hour"]).any():
        row = int(np.flatnonzero(out.duplicated(["service", "hour"]))[0])
        raise InputError(f"row {row + 2}: a second row for this client and hour",
                         file=str(path), field="hour")
    return out


def clients_wide(rows: pd.DataFrame, anchor: str = SERVEGEN_ANCHOR) -> pd.DataFrame:
    """Requests per UTC hour, one column per client; hour 0 = `anchor` (a Monday, as pooled).

    A missing (client, hour) row is an idle hour: the upstream derivation wrote every hour,
    and a client with no requests in an hour simply sent none.
    """
    wide = rows.pivot(index="hour", columns="service", values="requests")
    wide = wide.reindex(range(int(rows["hour"].max()) + 1)).fillna(0.0)
    wide.index = parse_time(anchor, "anchor") + pd.to_timedelta(wide.index, unit="h")
    wide.index.name = "hour"
    return wide


def select_clients(rows: pd.DataFrame) -> Selection:
    """SELECTION.md steps 1-3: eligible clients, volume deciles, a seeded draw per decile."""
    wide = clients_wide(rows)
    first, second = wide.iloc[:168], wide.iloc[168:336]
    eligible = [s for s in wide.columns
                if (first[s] > 0).any() and (second[s] > 0).any()]
    totals = wide[eligible].sum()
    ordered = sorted(eligible, key=lambda s: (totals[s], *s.split("/", 1)))
    rng = np.random.default_rng(SEED)
    reported, tuning = [], []
    n_rep, n_tune = PER_DECILE
    for decile in np.array_split(np.array(ordered, dtype=object), 10):
        drawn = list(decile[rng.permutation(len(decile))])
        reported += drawn[:n_rep]
        tuning += drawn[n_rep: n_rep + n_tune]
    key = {s: i for i, s in enumerate(ordered)}
    return Selection(tuple(sorted(reported, key=key.__getitem__)),
                     tuple(sorted(tuning, key=key.__getitem__)))


def client_services(wide: pd.DataFrame, names: list[str] | tuple[str, ...]
                    ) -> dict[str, ServiceConfig]:
    """SELECTION.md step 4: each client sized so its 14-day peak hour needs P GPUs."""
    totals = wide[list(names)].sum()
    ordered = sorted(names, key=lambda s: (totals[s], *s.split("/", 1)))
    out = {}
    for j, name in enumerate(ordered):
        peak_gpus = PEAKS[j % len(PEAKS)]
        rate = float(wide[name].max()) / ((1 - HEADROOM) * peak_gpus)
        out[name] = ServiceConfig(service=name, requests_per_gpu_hour=_sig(rate, 4),
                                  headroom=HEADROOM, min_gpus=1,
                                  swap_limit=max(4, peak_gpus // 4), priority=1.0)
    return out


def _sig(value: float, digits: int) -> float:
    """Round to `digits` significant figures (SERVICES.json stays readable)."""
    return float(f"{value:.{digits - 1}e}")


def services_json(configs: dict[str, ServiceConfig]) -> str:
    """SERVICES.json text for these configs, one service per line."""
    lines = []
    for c in configs.values():
        lines.append(
            f'  {{"service": "{c.service}", "requests_per_gpu_hour": {c.requests_per_gpu_hour:g}, '
            f'"headroom": {c.headroom:g}, "min_gpus": {c.min_gpus}, '
            f'"swap_limit": {c.swap_limit}, "priority": {c.priority:g}}}')
    return '{"services": [\n' + ",\n".join(lines) + "\n]}\n"


def subset_csv(rows: pd.DataFrame, selection: Selection) -> str:
    """The bundled subset: the source's own rows for the selected clients, unchanged."""
    keep = set(selection.reported) | set(selection.tuning)
    part = rows.loc[rows["service"].isin(keep), list(CLIENT_COLUMNS)]
    return part.to_csv(index=False, float_format="%.1f")
