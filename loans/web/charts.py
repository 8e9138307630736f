"""Every Plotly figure of the pages, built from plain rows as plain dicts (Plotly's JSON).

Dicts rather than plotly.graph_objects: the figures are few and fixed, and validating a few
thousand points through graph_objects costs more than the rest of the page. Times are sent as
wall-clock strings in the contract's time zone, because Plotly has no notion of zones.
"""

from datetime import datetime
from html import escape
from zoneinfo import ZoneInfo

from django.conf import settings
from django.utils.translation import gettext as _

from loans.maths.figures import PeriodFigures
from metering.usage import GpuDay

COLOURS = {
    "ideal": "#8a94a6",
    "remaining": "#1f5fbf",
    "forecast": "#e07b00",
    "band": "rgba(224,123,0,0.18)",
    "overage": "rgba(200,30,30,0.10)",
    "allocated": "#1f5fbf",
    "busy": "#2e9e5b",
    "idle": "rgba(31,95,191,0.15)",
    "base": "#6b46c1",
    "max": "#c53030",
}
CONFIG = {"displaylogo": False, "responsive": True}


def wall(moment: datetime, zone: ZoneInfo) -> str:
    return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M")


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def plain(text: str) -> str:
    """Text an agent or a user wrote, as Plotly shows it: Plotly reads a subset of HTML in its
    strings (links, line breaks), so a GPU model of `<a href=...>` would be a link; escaped,
    it is shown as written."""
    return escape(text, quote=False)


def _layout(title: str, y_title: str, **extra) -> dict:
    layout = {
        # Titles start on the left: Plotly's toolbar sits top right and never covers one.
        "title": {"text": title, "x": 0, "xanchor": "left", "font": {"size": 15}},
        "margin": {"l": 60, "r": 20, "t": 40, "b": 40},
        "height": 340,
        "hovermode": "x unified",
        "legend": {"orientation": "h", "y": -0.15},
        "yaxis": {"title": {"text": y_title}, "zeroline": True},
        "xaxis": {"type": "date", "tickformat": "%m-%d"},
    }
    layout.update(extra)
    return layout


def burndown_figure(figures: PeriodFigures, zone: ZoneInfo) -> dict:
    """Remaining committed GPU-hours against the ideal line, the forecast inside its P10-P90
    band, and the region below zero shaded as overage."""
    curve = figures.burndown
    x = [wall(p, zone) for p in curve.points]
    values = [v for series in (curve.remaining, curve.forecast_p10, curve.ideal)
              for v in series if v is not None]
    bottom = min([0.0, *values])
    ideal = {"type": "scatter", "mode": "lines", "name": _("Ideal"), "x": x,
             "y": [_r(v) for v in curve.ideal], "line": {"color": COLOURS["ideal"],
                                                          "dash": "dot"}}
    remaining = {"type": "scatter", "mode": "lines", "name": _("Remaining"), "x": x,
                 "y": [_r(v) for v in curve.remaining],
                 "line": {"color": COLOURS["remaining"], "width": 3}}
    forecast = [
        {"type": "scatter", "mode": "lines", "name": _("Forecast P10"), "x": x,
         "y": [_r(v) for v in curve.forecast_p10], "line": {"width": 0},
         "showlegend": False, "hoverinfo": "skip"},
        {"type": "scatter", "mode": "lines", "name": _("Forecast P10–P90"), "x": x,
         "y": [_r(v) for v in curve.forecast_p90], "line": {"width": 0},
         "fill": "tonexty", "fillcolor": COLOURS["band"]},
        {"type": "scatter", "mode": "lines", "name": _("Forecast"), "x": x,
         "y": [_r(v) for v in curve.forecast],
         "line": {"color": COLOURS["forecast"], "dash": "dash"}},
    ]
    # An ended period has nothing left to forecast: its legend lists no forecast.
    ahead = figures.now < figures.period.end
    data = [ideal, *(forecast if ahead else []), remaining]
    shapes = []
    if bottom < 0:
        shapes.append({
            "type": "rect", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": bottom * 1.05,
            "y1": 0, "fillcolor": COLOURS["overage"], "line": {"width": 0}, "layer": "below",
        })
    annotations = [{
        "xref": "paper", "x": 1, "xanchor": "right", "yref": "y", "y": bottom * 0.5,
        "text": _("overage"), "showarrow": False, "font": {"color": COLOURS["max"]},
    }] if bottom < 0 else []
    return {"data": data, "layout": _layout(
        _("Committed GPU-hours remaining"), _("GPU-hours"), shapes=shapes,
        annotations=annotations)}


def cumulative_figure(figures: PeriodFigures, zone: ZoneInfo) -> dict:
    """Cumulative allocated (paid for) against busy (productive) GPU-hours: the gap is idle."""
    allocated, busy = figures.cumulative()
    x = [wall(h.hour, zone) for h in figures.hours]
    data = [
        {"type": "scatter", "mode": "lines", "name": _("Busy"), "x": x,
         "y": [_r(v) for v in busy], "line": {"color": COLOURS["busy"]}},
        {"type": "scatter", "mode": "lines", "name": _("Allocated"), "x": x,
         "y": [_r(v) for v in allocated], "line": {"color": COLOURS["allocated"]},
         "fill": "tonexty", "fillcolor": COLOURS["idle"]},
    ]
    return {"data": data, "layout": _layout(
        _("Cumulative GPU-hours: allocated and busy"), _("GPU-hours"),
        **_whole_period(figures, zone, _("GPU-hours")))}


def _whole_period(figures: PeriodFigures, zone: ZoneInfo, y_title: str) -> dict:
    """Axes framed on the whole period and from zero: a period a few hours old (or with no
    usage yet) reads as the start of its month, not as -1 to 1 over one repeated day."""
    return {"xaxis": {"type": "date", "tickformat": "%m-%d",
                      "range": [wall(figures.period.start, zone), wall(figures.period.end, zone)]},
            "yaxis": {"title": {"text": y_title}, "zeroline": True, "rangemode": "tozero"}}


def hourly_figure(figures: PeriodFigures, zone: ZoneInfo) -> dict:
    """GPU-hours in each hour (the average GPUs held) against the base and max quotas."""
    x = [wall(h.hour, zone) for h in figures.hours]
    terms = figures.terms
    edges = [wall(figures.period.start, zone), wall(figures.period.end, zone)]
    data = [
        {"type": "scatter", "mode": "lines", "name": _("Allocated"), "x": x,
         "y": [_r(h.allocated_gpu_hours) for h in figures.hours],
         "line": {"color": COLOURS["allocated"], "shape": "hv"}},
        {"type": "scatter", "mode": "lines", "name": _("Busy"), "x": x,
         "y": [_r(h.busy_gpu_hours) for h in figures.hours],
         "line": {"color": COLOURS["busy"], "shape": "hv"}},
        {"type": "scatter", "mode": "lines", "name": _("Base quota"), "x": edges,
         "y": [terms.base_quota_gpus] * len(edges),
         "line": {"color": COLOURS["base"], "dash": "dash"}},
        {"type": "scatter", "mode": "lines", "name": _("Max quota"), "x": edges,
         "y": [terms.max_quota_gpus] * len(edges),
         "line": {"color": COLOURS["max"], "dash": "dash"}},
    ]
    return {"data": data, "layout": _layout(_("GPU-hours per hour"), _("GPUs"),
                                            **_whole_period(figures, zone, _("GPUs")))}


HEATMAP_ROW_PX = 18  # a GPU's row: room for its label at the axis' font, every row named
NOT_HELD = "#e5e7eb"


def heatmap_figure(days: list[GpuDay], labels: dict[int, str]) -> dict:
    """Utilisation of each GPU the tenant held, by local day; grey where it was not held,
    named in the legend; every GPU's row labelled."""
    order = {gpu: i for i, gpu in enumerate(labels)}  # labels come in node and index order
    gpus = sorted({d.gpu_id for d in days}, key=lambda gpu: (order.get(gpu, len(order)), gpu))
    dates = sorted({d.day for d in days})
    row, column = {g: i for i, g in enumerate(gpus)}, {d: i for i, d in enumerate(dates)}
    z = [[None] * len(dates) for _gpu in gpus]
    held = [[None] * len(dates) for _gpu in gpus]
    for d in days:
        util = d.utilisation_pct
        z[row[d.gpu_id]][column[d.day]] = None if util is None else round(util, 1)
        held[row[d.gpu_id]][column[d.day]] = round(d.allocated_gpu_hours, 2)
    data = [{
        "type": "heatmap", "name": _("Utilisation"),
        "x": [d.isoformat() for d in dates], "y": [plain(labels.get(g, str(g))) for g in gpus],
        "z": z, "customdata": held, "zmin": 0, "zmax": 100, "colorscale": "Viridis",
        "colorbar": {"title": {"text": "%"}},
        "hovertemplate": _("%{y}<br>%{x}: %{z}% busy over %{customdata} GPU-h held")
        + "<extra></extra>",
    }]
    idle = [[1 if util is None else None for util in row] for row in z]
    if any(any(row) for row in idle):  # a legend entry only where the chart shows it
        name = _("Not held")
        data.append({
            "type": "heatmap", "name": name, "x": data[0]["x"], "y": data[0]["y"], "z": idle,
            "zmin": 0, "zmax": 1, "showscale": False, "showlegend": True,
            "colorscale": [[0, NOT_HELD], [1, NOT_HELD]],
            "hovertemplate": "%{y}<br>%{x}: " + name + "<extra></extra>"})
    names = data[0]["y"]
    height = min(1200, max(240, 100 + HEATMAP_ROW_PX * len(gpus)))
    return {"data": data, "layout": _layout(
        _("Utilisation by GPU and day"), "", height=height, hovermode="closest",
        yaxis={"automargin": True, "autorange": "reversed", "type": "category",
               "tickmode": "array", "tickvals": names, "ticktext": names})}


def periods_figure(rows: list, zone: ZoneInfo) -> dict:
    """The whole contract: committed, allocated and busy GPU-hours of each period."""
    x = [row.period.start.astimezone(zone).strftime("%Y-%m-%d") for row in rows]
    data = [
        {"type": "bar", "name": _("Committed"), "x": x,
         "y": [float(r.committed_gpu_hours) for r in rows], "marker": {"color": COLOURS["ideal"]}},
        {"type": "bar", "name": _("Allocated"), "x": x,
         "y": [float(r.used_gpu_hours) for r in rows], "marker": {"color": COLOURS["allocated"]}},
        {"type": "bar", "name": _("Busy"), "x": x,
         "y": [float(r.busy_gpu_hours) for r in rows], "marker": {"color": COLOURS["busy"]}},
    ]
    return {"data": data, "layout": _layout(
        _("GPU-hours by period"), _("GPU-hours"), barmode="group",
        xaxis={"type": "category"}, hovermode="x")}


def commitment_figure(rec) -> dict | None:
    """Expected cost per period against the commitment, with its P10-P90 band over the
    history's windows, and the recommended, current and rule-of-thumb commitments marked.
    None where the advice has no curve (a sharing group's pooled advice prices the group)."""
    curve = rec.evidence.get("curve", [])
    if not curve:
        return None
    x = [p[0] for p in curve]
    costs = {c: e for c, e, _low, _high in curve}
    data = [
        {"type": "scatter", "mode": "lines", "name": _("P10"), "x": x,
         "y": [p[2] for p in curve], "line": {"width": 0}, "showlegend": False,
         "hoverinfo": "skip"},
        {"type": "scatter", "mode": "lines", "name": _("P10–P90 of the cost"), "x": x,
         "y": [p[3] for p in curve], "line": {"width": 0}, "fill": "tonexty",
         "fillcolor": COLOURS["band"]},
        {"type": "scatter", "mode": "lines", "name": _("Expected cost"), "x": x,
         "y": [p[1] for p in curve], "line": {"color": COLOURS["remaining"]}},
    ]
    marks = [("recommended", _("Recommended"), "#2e9e5b"), ("current", _("Current"), "#c53030"),
             ("rule_of_thumb", _("Rule of thumb"), "#8a94a6")]
    for key, name, colour in marks:
        c = rec.evidence.get(key)
        if c is not None and c in costs:
            data.append({"type": "scatter", "mode": "markers", "name": name, "x": [c],
                         "y": [costs[c]], "marker": {"color": colour, "size": 11},
                         "cliponaxis": False})
    # The whole band and every mark inside the axes, with a margin: autorange put the
    # optimum on the bottom edge and ran the curve out of the top corner.
    values = [v for p in curve for v in p[1:]]
    low, high = min(values), max(values)
    pad = (high - low) * 0.08 or max(high, 1.0) * 0.05
    layout = _layout(_("Expected cost per period by commitment"), rec.currency,
                     hovermode="closest", height=320,
                     xaxis={"title": {"text": _("Committed GPU-hours")},
                            "range": [0, x[-1] * 1.02]},
                     yaxis={"title": {"text": rec.currency}, "zeroline": False,
                            "range": [max(0.0, low - pad), high + pad]},
                     legend={"orientation": "h", "y": -0.35},
                     margin={"l": 60, "r": 20, "t": 40, "b": 80})
    return {"data": data, "layout": layout}


def pool_figure(model: str, series: dict) -> dict:
    """A GPU pool over the coming days: guaranteed base quotas, granted bursts and free GPUs,
    stacked up to the physical GPUs."""
    zone = ZoneInfo(settings.TIME_ZONE)
    x = [wall(h, zone) for h in series["hours"]]
    stack = [("guaranteed", _("Guaranteed"), COLOURS["base"]),
             ("granted", _("Granted bursts"), COLOURS["forecast"]),
             ("free", _("Free"), COLOURS["busy"])]
    data = [{"type": "scatter", "mode": "lines", "name": name, "x": x, "y": series[key],
             "stackgroup": "pool", "line": {"color": colour, "shape": "hv", "width": 1}}
            for key, name, colour in stack]
    data.append({"type": "scatter", "mode": "lines", "name": _("Physical GPUs"),
                 "x": [x[0], x[-1]] if x else [], "y": [series["physical"]] * (2 if x else 0),
                 "line": {"color": COLOURS["max"], "dash": "dash"}})
    return {"data": data, "layout": _layout(
        _("Pool: %(model)s, next 7 days") % {"model": plain(model) if model else _("any model")},
        _("GPUs"),
        height=300)}


def buy_figure(result, currency: str) -> dict:
    """Cumulative cost over the horizon, as the verdict counts it: buying (the value the GPUs
    lose, overhead and maintenance) against the loan (its fee, then each month's bill)."""
    data = [
        {"type": "scatter", "mode": "lines", "name": _("Buy"), "x": result.month,
         "y": [float(v) for v in result.buy_cumulative], "line": {"color": COLOURS["max"]}},
        {"type": "scatter", "mode": "lines", "name": _("Loan"), "x": result.month,
         "y": [float(v) for v in result.loan_cumulative],
         "line": {"color": COLOURS["allocated"]}},
    ]
    return {"data": data, "layout": _layout(
        _("Cumulative cost"), currency, xaxis={"title": {"text": _("Months")}},
        hovermode="x unified")}
