"""The real-time demand profile: an hour-of-week shape times a recalibrated level.

Why this method (measured in docs/profile.md): with one or two weeks of hourly history,
MSTL cannot fit a 168-hour season and Holt-Winters must be refitted to move; a robust
hour-of-week shape (hour-of-day medians plus shrunk weekday deviations, in log space) under
an exponentially smoothed level, a Theil-Sen trend over daily levels and a short-memory
AR(1) deviation forecast better, survive gaps, and fold in a new hour in microseconds.
The upper quantile is the centre plus the empirical quantile of recent one-step errors,
widened by horizon as the fit's own multi-step errors say, and nudged online (adaptive
conformal) so that its coverage returns to `quantile` when volatility changes.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from allocator.core.errors import InputError
from allocator.core.timeparse import parse_times
from forecasting.traffic import GAP_FRACTION, GAP_MIN_COUNT, hourly, validate_traffic

WEEK = 168
DAY = 24


def hour_of_week(hours: pd.DatetimeIndex) -> np.ndarray:
    """Hour-of-week index, 0 = Monday 00:00 UTC (FORECASTING.md)."""
    hours = pd.DatetimeIndex(hours)
    if hours.tz is not None:
        hours = hours.tz_convert("UTC")
    return (hours.dayofweek * DAY + hours.hour).to_numpy(dtype=np.int64)


def mask_gaps(values: np.ndarray, gap_fraction: float) -> np.ndarray:
    """Hours below `gap_fraction` of the service's 24 h rolling median become NaN (S, T)."""
    frame = pd.DataFrame(values.T)
    local = frame.rolling(DAY, center=True, min_periods=1).median().to_numpy().T
    out = values.astype(float, copy=True)
    with np.errstate(invalid="ignore"):
        out[(out < gap_fraction * local) & (local >= GAP_MIN_COUNT)] = np.nan
    return out


def robust_season(z: np.ndarray, how: np.ndarray, date: np.ndarray, shrink: float,
                  shrink_days: float) -> tuple[np.ndarray, np.ndarray]:
    """Log-space season: hour-of-day medians, a weekday effect, hour-of-week residuals.

    Returns (hod (S, 24), wk (S, 168)), each centred; the season of slot k is
    hod[k % 24] + wk[k]. The weekday effect (the mean of daily medians per weekday) is
    shrunk by n / (n + shrink_days) over the n weeks that show it, the remaining per-slot
    deviation by n / (n + shrink): one week cannot tell a quiet Sunday from a level wobble.
    A Theil-Sen line, then a centred one-week rolling median take trend and level out
    first; near the ends, where a window would be cut short (and hold more weekdays than
    weekend), the nearest whole-week median stands in.
    """
    n_hours = z.shape[1]
    lined = z - theil_sen(daily_levels(z))[:, None] * np.arange(n_hours)
    level = pd.DataFrame(lined.T).rolling(WEEK, center=True, min_periods=1).median()
    half = WEEK // 2
    if n_hours > WEEK:
        level.iloc[:half] = np.nan
        level.iloc[n_hours - half + 1:] = np.nan
        level = level.ffill().bfill()
    else:
        with _quiet():
            level.iloc[:] = np.nanmedian(lined, axis=1)
    u = lined - level.to_numpy().T
    hod_idx, dow_idx = how % DAY, how // DAY
    n_services = z.shape[0]
    hod = np.zeros((n_services, DAY))
    dow = np.zeros((n_services, 7))
    wk = np.zeros((n_services, WEEK))
    with np.errstate(all="ignore"), _quiet():
        for h in range(DAY):
            cols = hod_idx == h
            if cols.any():
                hod[:, h] = np.nanmedian(u[:, cols], axis=1)
        hod = np.nan_to_num(hod)
        hod -= hod.mean(axis=1, keepdims=True)
        rest = u - hod[:, hod_idx]
        dates = np.unique(date)
        daily = np.stack([np.nanmedian(rest[:, date == d], axis=1) for d in dates], axis=1)
        weekday = np.array([dow_idx[date == d][0] for d in dates])
        counts = np.zeros((n_services, 7))
        within = np.full((n_services, 7), np.nan)
        for d in range(7):
            vals = daily[:, weekday == d]
            if vals.shape[1]:
                counts[:, d] = np.sum(~np.isnan(vals), axis=1)
                dow[:, d] = np.nan_to_num(np.nanmean(vals, axis=1))
                if vals.shape[1] > 1:
                    within[:, d] = np.nanvar(vals, axis=1, ddof=1)
        dow -= dow.mean(axis=1, keepdims=True)
        dow *= _weekday_shrinkage(dow, counts, within, shrink_days)[:, None]
        rest = rest - dow[:, dow_idx]
        for k in range(WEEK):
            cols = how == k
            if cols.any():
                vals = rest[:, cols]
                n = np.sum(~np.isnan(vals), axis=1)
                wk[:, k] = np.nan_to_num(np.nanmean(vals, axis=1)) * n / (n + shrink)
    wk -= wk.mean(axis=1, keepdims=True)
    return hod, wk + dow[:, np.arange(WEEK) // DAY]


def _weekday_shrinkage(dow: np.ndarray, counts: np.ndarray, within: np.ndarray,
                       shrink_days: float) -> np.ndarray:
    """How much of the weekday effect to believe, per service, in [0, 1].

    With two or more weeks, empirical Bayes: the share of the spread between weekdays not
    explained by the same weekday's week-to-week noise. With one week the noise cannot be
    measured, so the prior n / (n + shrink_days) applies.
    """
    n = np.maximum(np.nanmean(np.where(counts > 0, counts, np.nan), axis=1), 1.0)
    prior = n / (n + shrink_days)
    noise = np.nanmean(within, axis=1)
    between = np.var(dow, axis=1, ddof=1)
    signal = np.maximum(between - noise / n, 0.0)
    with np.errstate(all="ignore"):
        eb = signal / (signal + noise / n)
    return np.where(np.isfinite(noise) & np.isfinite(eb), eb, prior)


def daily_levels(dev: np.ndarray) -> np.ndarray:
    """Median deseasonalised log level of each whole day, (S, days); NaN for all-gap days."""
    n_days = dev.shape[1] // DAY
    with _quiet():
        return np.nanmedian(dev[:, : n_days * DAY].reshape(dev.shape[0], n_days, DAY), axis=2)


def theil_sen(daily: np.ndarray) -> np.ndarray:
    """Per-hour trend: the median of pairwise slopes between days (a dip or gap barely moves it)."""
    n_days = daily.shape[1]
    if n_days < 2:
        return np.zeros(daily.shape[0])
    i, j = np.triu_indices(n_days, k=1)
    with np.errstate(all="ignore"), _quiet():
        slope = np.nanmedian((daily[:, j] - daily[:, i]) / ((j - i) * DAY), axis=1)
    return np.nan_to_num(slope)


class _quiet:
    """Silence numpy's all-NaN slice warnings: all-gap slices are expected and handled."""

    def __enter__(self) -> None:
        import warnings

        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc: Any) -> None:
        self._ctx.__exit__(*exc)


class DemandProfile(BaseEstimator):
    """Per-service hour-of-week request profile with level, trend and AR(1) deviation.

    fit(X) takes traffic rows (timestamp, service, requests) at any resolution; predict(X)
    gives the central requests per hour for rows (timestamp, service), predict_upper(X) the
    `quantile` upper curve; update(new_rows) folds in new hours without refitting.

    Parameters: `quantile` the service level of the upper curve; `alpha` how fast the level
    follows new hours (0.1 absorbs 92 % of a shift within a day); `trend_days` the daily
    levels the Theil-Sen trend reads; `phi` damping of the trend's extrapolation per hour;
    `gamma` how fast an hour-of-week slot learns from what the level did not absorb;
    `shrink` / `shrink_days` the prior weight (in weeks of evidence) pulling hour-of-week
    and weekday effects towards none; `clip` the sigmas beyond which an isolated jump is
    clipped; `window` the one-step errors the quantile is read from; `horizon` the hours
    over which the band's widening is measured; `adapt` the adaptive-conformal step;
    `gap_fraction` below this share of the last day's median rate an hour is a gap; `floor` the
    count offset of the log transform, as a share of the service's median non-zero hour
    (at least one request), so an idle hour sits a few log units below a busy one rather
    than ten; `trend_z` the Mann-Kendall z-score a run of daily levels must reach before
    its trend is extrapolated (sparse and bursty days rarely do).
    """

    def __init__(self, quantile: float = 0.95, alpha: float = 0.1, trend_days: int = 14,
                 phi: float = 0.98, gamma: float = 0.05, shrink: float = 5.0,
                 shrink_days: float = 0.5,
                 clip: float = 4.0, window: int = 336, horizon: int = DAY,
                 adapt: float = 0.05, gap_fraction: float = GAP_FRACTION,
                 floor: float = 0.05, trend_z: float = 1.645) -> None:
        self.quantile = quantile
        self.alpha = alpha
        self.trend_days = trend_days
        self.phi = phi
        self.gamma = gamma
        self.shrink = shrink
        self.shrink_days = shrink_days
        self.clip = clip
        self.window = window
        self.horizon = horizon
        self.adapt = adapt
        self.gap_fraction = gap_fraction
        self.floor = floor
        self.trend_z = trend_z

    # ------------------------------------------------------------ fitting

    def fit(self, X: pd.DataFrame, y: object = None) -> DemandProfile:
        """Fit from traffic rows; `y` is unused (scikit-learn signature)."""
        return self.fit_hourly(hourly(validate_traffic(X), self.gap_fraction))

    def fit_hourly(self, wide: pd.DataFrame) -> DemandProfile:
        """Fit from requests per hour: index = consecutive UTC hours, one column per service."""
        self._check_params()
        if len(wide) == 0:
            raise InputError("no hours to fit", field="requests")
        wide = _consecutive_hours(wide)
        self.services_ = [str(c) for c in wide.columns]
        self._index = {s: i for i, s in enumerate(self.services_)}
        how = hour_of_week(wide.index)
        y = mask_gaps(wide.to_numpy(float).T, self.gap_fraction)
        for i, service in enumerate(self.services_):
            if np.all(np.isnan(y[i])):
                raise InputError("no usable traffic (all hours empty or gaps)",
                                 job=service, field="requests")
        self.floor_ = _count_floor(y, self.floor)
        z = self._log(y)
        date = ((wide.index - wide.index[0].floor("D")) // pd.Timedelta(days=1)).to_numpy()
        self.hod_, self.wk_ = robust_season(z, how, date, self.shrink, self.shrink_days)
        season = self._season(how)
        dev = z - season
        with _quiet():
            first = np.nanmedian(dev[:, :DAY], axis=1)
            level0 = np.where(np.isnan(first), np.nanmedian(dev, axis=1), first)
        days = daily_levels(dev)[:, -self.trend_days:]
        trend0, no_ar = self._trend(days), np.zeros(len(z))
        # Three passes: the robust scale of deviations, then the AR(1) memory, then the state.
        e = self._pass(z, season, level0, trend0, no_ar, np.full(len(z), np.inf)).dev
        with _quiet():
            med = np.nanmedian(e, axis=1, keepdims=True)
            sigma = 1.4826 * np.nanmedian(np.abs(e - med), axis=1)
        self.sigma_ = np.where(np.isfinite(sigma) & (sigma > 0), sigma, 0.1)
        memoryless = self._pass(z, season, level0, trend0, no_ar, self.sigma_)
        self.rho_ = _ar1(memoryless.ar, memoryless.dev)
        trace = self._pass(z, season, level0, trend0, self.rho_, self.sigma_)
        warm = min(DAY, z.shape[1] // 4)
        self._calibrate(z, how, trace.level, trace.trend, trace.ar, trace.eps, warm)
        self.fit_quality_ = self._quality(y, z, season, trace.level, trace.trend, trace.ar, warm)
        self.offset_ = np.zeros(len(self.services_))
        self._days = days if days.shape[1] else np.full((len(z), 1), np.nan)
        # The hours seen since the last midnight (deviation from season) and the last
        # day of counts: the daily level the trend reads, and the local rate gaps are
        # judged against, come from observations, never from the model's own forecast.
        self._today = np.full((len(z), DAY), np.nan)
        n_today = int(wide.index[-1].hour) + 1
        if n_today < DAY:
            take = min(n_today, z.shape[1])
            self._today[:, n_today - take: n_today] = dev[:, -take:]
        self._recent = np.full((len(z), DAY), np.nan)
        raw = wide.to_numpy(float).T[:, -DAY:]
        self._recent[:, : raw.shape[1]] = raw
        self._recent_pos = raw.shape[1] % DAY
        self._week = np.full((len(z), WEEK), np.nan)  # oldest first, newest last
        kept = y[:, -WEEK:]
        self._week[:, WEEK - kept.shape[1]:] = kept
        self.last_hour_ = pd.Timestamp(wide.index[-1])
        self.n_hours_ = int(z.shape[1])
        return self

    def _check_params(self) -> None:
        if not 0.5 <= self.quantile < 1:
            raise ValueError("quantile must be in [0.5, 1)")
        if not (0 < self.alpha <= 1 and self.trend_days >= 2 and 0 < self.phi <= 1):
            raise ValueError("need 0 < alpha <= 1, trend_days >= 2, 0 < phi <= 1")
        if self.window < 10 or self.horizon < 1:
            raise ValueError("window must be >= 10 and horizon >= 1")
        if not (self.floor >= 0 and self.trend_z >= 0):
            raise ValueError("floor and trend_z must be >= 0")

    def _log(self, y: np.ndarray) -> np.ndarray:
        """Requests -> model scale: log(y + floor_), floor_ per service (S,) or row (S, 1)."""
        floor = self.floor_ if np.ndim(y) == 1 else self.floor_[:, None]
        return np.log(y + floor)

    def _exp(self, z: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Model scale -> requests, never below 0 (`rows` picks services for a 1-D z)."""
        floor = self.floor_ if rows is None else self.floor_[rows]
        if np.ndim(z) == 2 and rows is None:
            floor = floor[:, None]
        return np.maximum(np.exp(z) - floor, 0.0)

    def _trend(self, days: np.ndarray) -> np.ndarray:
        """Theil-Sen slope of daily levels, kept only where Mann-Kendall says it is a trend.

        A burst, a switch-on or a quiet day tilts a median of pairwise slopes through a
        week of levels; extrapolated over a day and compounded by the hourly recursion, that
        tilt was what multiplied sparse services' forecasts. A slope is used only when the
        days rise (or fall) consistently enough: |z| >= trend_z.
        """
        return np.where(np.abs(mann_kendall_z(days)) >= self.trend_z, theil_sen(days), 0.0)

    def _season(self, how: np.ndarray) -> np.ndarray:
        return self.hod_[:, how % DAY] + self.wk_[:, how]

    def _pass(self, z: np.ndarray, season: np.ndarray, level: np.ndarray, trend: np.ndarray,
              rho: np.ndarray, sigma: np.ndarray) -> _Trace:
        """Run the recursion over history with the season held fixed (it was fitted in batch)."""
        n_services, n_hours = z.shape
        trace = _Trace(*(np.full((n_services, n_hours), np.nan) for _ in _Trace._fields))
        state = RecursiveState(level.copy(), trend.copy(), np.zeros(n_services),
                       np.zeros(n_services))
        for t in range(n_hours):
            e, eps = state.step(z[:, t], season[:, t], rho, sigma, self.alpha, self.clip)
            trace.dev[:, t], trace.eps[:, t] = e, eps
            trace.ar[:, t], trace.level[:, t], trace.trend[:, t] = (state.dev, state.level,
                                                                    state.trend)
        self._state = state
        return trace

    def _calibrate(self, z: np.ndarray, how: np.ndarray, levels: np.ndarray,
                   trends: np.ndarray, dev: np.ndarray, eps: np.ndarray, warm: int) -> None:
        """One-step error buffer for the quantile, plus how much wider it gets by horizon."""
        n_services, n_hours = z.shape
        self._buf = np.full((n_services, self.window), np.nan)
        recent = eps[:, warm:][:, -self.window:]
        self._buf[:, : recent.shape[1]] = recent
        self._pos = recent.shape[1] % self.window
        with _quiet():
            q1 = np.nanquantile(eps[:, warm:], self.quantile, axis=1) if n_hours > warm else None
            delta = np.zeros((n_services, self.horizon))
            for h in range(1, self.horizon + 1):
                if n_hours - warm - h < 10 or q1 is None:
                    break
                src = slice(warm, n_hours - h)
                pred = (levels[:, src] + _phisum(self.phi, h) * trends[:, src]
                        + self._season(how[warm + h:]) + self.rho_[:, None] ** h * dev[:, src])
                qh = np.nanquantile(z[:, warm + h:] - pred, self.quantile, axis=1)
                delta[:, h - 1] = np.nan_to_num(qh - q1)
        # Never narrower further ahead; past the last measured horizon it stays at its widest.
        self.delta_ = np.maximum.accumulate(np.maximum(delta, 0.0), axis=1)

    def _quality(self, y: np.ndarray, z: np.ndarray, season: np.ndarray, levels: np.ndarray,
                 trends: np.ndarray, dev: np.ndarray, warm: int) -> dict[str, dict[str, float]]:
        """In-sample one-step quality per service: WAPE of the centre, coverage of the upper."""
        quality = {}
        pred = (levels[:, :-1] + trends[:, :-1] + season[:, 1:]
                + self.rho_[:, None] * dev[:, :-1])
        upper = pred + self._q1()[:, None]
        actual = y[:, 1:]
        for i, service in enumerate(self.services_):
            ok = ~np.isnan(actual[i])
            ok[: max(warm - 1, 0)] = False
            hours_known = int(np.sum(~np.isnan(y[i])))
            entry: dict[str, float] = {"hours": int(y.shape[1]),
                                       "gap_hours": int(y.shape[1] - hours_known)}
            if ok.any():
                a = actual[i, ok]
                c = self._exp(pred[i, ok], np.full(ok.sum(), i))
                u = self._exp(upper[i, ok], np.full(ok.sum(), i))
                entry["wape"] = round(float(np.sum(np.abs(a - c)) / max(np.sum(a), 1e-9)), 4)
                entry["coverage"] = round(float(np.mean(a <= u)), 4)
                entry["pinball"] = round(float(pinball(a, u, self.quantile)), 2)
            quality[service] = entry
        return quality

    # ------------------------------------------------------------ recalibration

    def update(self, new_rows: pd.DataFrame) -> DemandProfile:
        """Fold in traffic rows newer than the last hour seen; older hours are ignored."""
        check_is_fitted(self, "services_")
        rows = validate_traffic(new_rows)
        unknown = sorted(set(rows["service"]) - set(self.services_))
        if unknown:
            raise InputError("not in the fitted profile; refit to add a service",
                             job=unknown[0], field="service")
        return self.update_hourly(hourly(rows, self.gap_fraction))

    def update_hourly(self, wide: pd.DataFrame) -> DemandProfile:
        """Fold in requests per hour (index = UTC hours, columns = services); gaps may be NaN."""
        check_is_fitted(self, "services_")
        wide = _consecutive_hours(wide)
        wide = wide.loc[wide.index > self.last_hour_]
        if wide.empty:
            return self
        full = pd.date_range(self.last_hour_ + pd.Timedelta(hours=1), wide.index[-1],
                             freq="h", tz="UTC")
        values = np.full((len(self.services_), len(full)), np.nan)
        cols = [self._index[str(c)] for c in wide.columns]
        pos = full.get_indexer(wide.index)
        values[np.ix_(cols, pos)] = wide.to_numpy(float).T
        for t, k in enumerate(hour_of_week(full)):
            self._update_one(values[:, t], int(k))
        self.last_hour_ = full[-1]
        self.n_hours_ += len(full)
        return self

    def _update_one(self, y: np.ndarray, k: int) -> None:
        season = self.hod_[:, k % DAY] + self.wk_[:, k]
        state = self._state
        # A gap is judged against the last day's observed counts, as in fit (mask_gaps):
        # judged against the forecast, a forecast that overshot would call every real hour
        # a gap, never see it, and never come down.
        self._recent[:, self._recent_pos] = y
        self._recent_pos = (self._recent_pos + 1) % DAY
        with _quiet():
            local = np.nanmedian(self._recent, axis=1)
        with np.errstate(invalid="ignore"):
            gap = (y < self.gap_fraction * local) & (local >= GAP_MIN_COUNT)
            y = np.where(gap, np.nan, y)
        self._week[:, :-1] = self._week[:, 1:]
        self._week[:, -1] = y
        z = self._log(y)
        upper = (state.level + state.trend + season + self.rho_ * state.dev
                 + self._q1() + self.delta_[:, 0] + self.offset_)
        _, eps = state.step(z, season, self.rho_, self.sigma_, self.alpha, self.clip)
        seen = ~np.isnan(eps)
        if seen.any():
            # Adaptive conformal step: each miss widens the band, each hit narrows it a
            # little, so coverage returns to `quantile` when volatility changes.
            miss = (z[seen] > upper[seen]).astype(float)
            self.offset_[seen] = np.clip(
                self.offset_[seen] + self.adapt * (miss - (1 - self.quantile)), -0.5, 2.0)
            # The season learns from what the level did not absorb (Holt-Winters' gamma).
            self.wk_[seen, k] += self.gamma * state.dev[seen]
            self._buf[seen, self._pos] = eps[seen]
            self._pos = (self._pos + 1) % self.window
        self._today[:, k % DAY] = z - season
        if k % DAY == DAY - 1:
            # A day has closed: the median of its observed deviations from the season joins
            # the daily history the trend is read from (as in fit). The smoothed level would
            # carry the trend's own extrapolation back into it and confirm it.
            with _quiet():
                closed = np.nanmedian(self._today, axis=1)
            days = np.concatenate([self._days, closed[:, None]], axis=1)
            self._days = days[:, -self.trend_days:]
            state.trend = self._trend(self._days)
            self._today[:] = np.nan

    # ------------------------------------------------------------ prediction

    def trailing_peak(self, ahead: int = 0) -> np.ndarray:
        """Per service, the largest hourly count seen in the 168 hours before the hour
        `ahead` hours after the next one (gaps excluded).

        With `ahead` > 0 only the seen hours still inside that window count: the least the
        trailing-week peak will then be (hours not seen yet can only raise it). Beyond six
        days ahead the last day seen stands in.
        """
        check_is_fitted(self, "services_")
        keep = WEEK - min(max(int(ahead), 0), WEEK - DAY)
        with _quiet():
            return np.nan_to_num(np.nanmax(self._week[:, -keep:], axis=1))

    def _q1(self) -> np.ndarray:
        with _quiet():
            q = np.nanquantile(self._buf, self.quantile, axis=1)
        enough = np.sum(~np.isnan(self._buf), axis=1) >= 10
        return np.where(enough & np.isfinite(q), np.maximum(q, 0.0), 0.5)

    def forecast_hours(self, hours: pd.DatetimeIndex) -> tuple[np.ndarray, np.ndarray]:
        """Central and upper requests per hour, (services, hours), for these UTC hours."""
        check_is_fitted(self, "services_")
        hours = pd.DatetimeIndex(hours).floor("h")
        if hours.tz is None:
            hours = hours.tz_localize("UTC")
        ahead = np.asarray((hours - self.last_hour_) / pd.Timedelta(hours=1), dtype=int)
        state = self._state
        season = self._season(hour_of_week(hours))
        h = np.maximum(ahead, 0)
        phisum = np.array([_phisum(self.phi, int(x)) for x in h])
        centre = (state.level[:, None] + state.trend[:, None] * phisum + season
                  + self.rho_[:, None] ** h * state.dev[:, None])
        widen = self.delta_[:, np.clip(h, 1, self.horizon) - 1] * (h >= 1)
        upper = centre + np.maximum(self._q1() + self.offset_, 0.0)[:, None] + widen
        return self._exp(centre), self._exp(upper)

    def forecast(self, start: pd.Timestamp | str, steps: int,
                 step_minutes: int = 60) -> tuple[np.ndarray, np.ndarray]:
        """Central and upper rate (requests per hour) per plan step, (services, steps).

        A step covering parts of several hours takes the largest of them: capacity must
        cover the busiest minute of the step.
        """
        start = _utc(start)
        step = pd.Timedelta(minutes=step_minutes)
        first = start.floor("h")
        last = (start + step * steps - pd.Timedelta(seconds=1)).floor("h")
        hours = pd.date_range(first, last, freq="h")
        centre, upper = self.forecast_hours(hours)
        out_c = np.empty((len(self.services_), steps))
        out_u = np.empty_like(out_c)
        for j in range(steps):
            lo = int(((start + step * j).floor("h") - first) / pd.Timedelta(hours=1))
            hi = int(((start + step * (j + 1) - pd.Timedelta(seconds=1)).floor("h") - first)
                     / pd.Timedelta(hours=1))
            out_c[:, j] = centre[:, lo: hi + 1].max(axis=1)
            out_u[:, j] = upper[:, lo: hi + 1].max(axis=1)
        return out_c, out_u

    def _rows(self, X: pd.DataFrame, upper: bool) -> np.ndarray:
        check_is_fitted(self, "services_")
        stamps = parse_times(X["timestamp"], "timestamp")
        out = np.empty(len(X))
        for service, idx in X.groupby("service", sort=False).indices.items():
            if service not in self._index:
                raise InputError("not in the fitted profile", job=str(service), field="service")
            centre, up = self.forecast_hours(pd.DatetimeIndex(stamps.iloc[idx]))
            out[idx] = (up if upper else centre)[self._index[service]]
        return out

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Central requests per hour for rows (timestamp, service)."""
        return self._rows(X, upper=False)

    def predict_upper(self, X: pd.DataFrame) -> np.ndarray:
        """Upper (`quantile`) requests per hour for rows (timestamp, service)."""
        return self._rows(X, upper=True)

    def profile(self, service: str, upper: bool = False) -> np.ndarray:
        """The 168-hour profile at the current level (hour 0 = Monday 00:00 UTC)."""
        check_is_fitted(self, "services_")
        if service not in self._index:
            raise InputError("not in the fitted profile", job=service, field="service")
        i = self._index[service]
        curve = self._state.level[i] + self.hod_[i, np.arange(WEEK) % DAY] + self.wk_[i]
        if upper:
            curve = curve + max(self._q1()[i] + self.offset_[i], 0.0) + self.delta_[i, -1]
        return self._exp(curve, np.full(len(curve), i))


class _Trace(NamedTuple):
    """Per service and hour, what one pass of the recursion leaves after each hour."""

    dev: np.ndarray  # deviation from level + trend + season (e)
    ar: np.ndarray  # the AR(1) deviation state after the hour (a)
    eps: np.ndarray  # the one-step innovation: dev less the AR forecast of it
    level: np.ndarray
    trend: np.ndarray


class RecursiveState:
    """The recursive part of the model for all services at once: level, trend, AR deviation."""

    def __init__(self, level: np.ndarray, trend: np.ndarray, dev: np.ndarray,
                 exceed: np.ndarray) -> None:
        self.level, self.trend, self.dev, self.exceed = level, trend, dev, exceed

    def step(self, z: np.ndarray, season: np.ndarray, rho: np.ndarray, sigma: np.ndarray,
             alpha: float, clip: float) -> tuple[np.ndarray, ...]:
        """Advance one hour; NaN z (a gap) just carries level, trend and a decaying deviation.

        An isolated jump beyond `clip` sigma is clipped before it moves the level; a second
        one in the same direction is taken at face value, so real level shifts get through.
        """
        base = self.level + self.trend
        e = z - (base + season)
        eps = e - rho * self.dev
        seen = ~np.isnan(e)
        limit = clip * sigma
        with np.errstate(invalid="ignore"):
            big = seen & (np.abs(e) > limit)
        e0 = np.nan_to_num(e)
        sign = np.sign(e0)
        isolated = big & (self.exceed != sign)
        ec = np.where(isolated, np.clip(e0, -limit, limit), e0)
        self.exceed = np.where(big, sign, 0.0)
        self.level = np.where(seen, base + alpha * ec, base)
        self.dev = np.where(seen, (1 - alpha) * ec, rho * self.dev)
        return e, eps


def mann_kendall_z(daily: np.ndarray) -> np.ndarray:
    """Per row, Mann-Kendall's z for a monotone trend over the finite days (0 below 3 days)."""
    out = np.zeros(daily.shape[0])
    for r, row in enumerate(daily):
        x = row[np.isfinite(row)]
        n = len(x)
        if n < 3:
            continue
        i, j = np.triu_indices(n, k=1)
        s = float(np.sum(np.sign(x[j] - x[i])))
        var = n * (n - 1) * (2 * n + 5) / 18.0
        out[r] = np.sign(s) * max(abs(s) - 1.0, 0.0) / np.sqrt(var)
    return out


def _count_floor(y: np.ndarray, share: float) -> np.ndarray:
    """Per service, `share` of its median non-zero hour, at least one request."""
    with _quiet():
        positive = np.where(y > 0, y, np.nan)
        med = np.nan_to_num(np.nanmedian(positive, axis=1), nan=1.0)
    return np.maximum(share * med, 1.0)


def _ar1(dev: np.ndarray, e: np.ndarray) -> np.ndarray:
    """How much of this hour's unexplained deviation persists into the next, in [0, 0.98]."""
    x, y = dev[:, :-1], e[:, 1:]
    ok = ~(np.isnan(x) | np.isnan(y))
    num = np.sum(np.where(ok, x * y, 0.0), axis=1)
    den = np.sum(np.where(ok, x * x, 0.0), axis=1)
    with np.errstate(all="ignore"):
        rho = np.where(den > 0, num / den, 0.0)
    return np.clip(np.nan_to_num(rho), 0.0, 0.98)


def _phisum(phi: float, h: int) -> float:
    """phi + phi^2 + ... + phi^h: how far the trend is extrapolated h hours ahead (damped)."""
    if h <= 0:
        return 0.0
    if phi == 1:
        return float(h)
    return phi * (1 - phi**h) / (1 - phi)


def pinball(actual: np.ndarray, predicted: np.ndarray, quantile: float) -> float:
    """Mean pinball (quantile) loss: the proper score for an upper-quantile forecast."""
    diff = np.asarray(actual, float) - np.asarray(predicted, float)
    return float(np.mean(np.maximum(quantile * diff, (quantile - 1) * diff)))


def _consecutive_hours(wide: pd.DataFrame) -> pd.DataFrame:
    """UTC hour index with every hour present (missing ones become all-gap rows)."""
    index = pd.DatetimeIndex(wide.index)
    index = index.tz_localize("UTC") if index.tz is None else index.tz_convert("UTC")
    wide = wide.set_axis(index.floor("h"), axis=0)
    if wide.index.has_duplicates:
        wide = wide.groupby(level=0).mean()
    if len(wide) == 0:
        return wide
    return wide.reindex(pd.date_range(wide.index.min(), wide.index.max(), freq="h"))


def _utc(value: pd.Timestamp | str) -> pd.Timestamp:
    from allocator.core.timeparse import to_utc

    return to_utc(value, "start")
