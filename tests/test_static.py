"""The pages' Plotly is plotly.js's cartesian partial bundle: the version the plotly package
builds figures for, holding every trace type the server's figures use."""

import re
from pathlib import Path

import plotly

from loans.web import charts

BUNDLE = Path(__file__).resolve().parent.parent / "static" / "vendor" / "plotly-cartesian.min.js"


def _version(text: str) -> str:
    return re.search(r"plotly\.js[^\n]*? v(\d+\.\d+\.\d+)", text[:400]).group(1)


def test_the_bundle_is_the_plotly_js_the_python_package_builds_for():
    whole = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text()
    bundle = BUNDLE.read_text()
    assert "(cartesian - minified)" in bundle[:200]
    assert _version(bundle) == _version(whole)


def test_every_trace_type_the_charts_draw_is_in_the_bundle():
    registered = set(re.findall(r'moduleType:"trace",name:"(\w+)"', BUNDLE.read_text()))
    # Every figure the pages draw is built in loans/web as plain dicts: trace types, and axis
    # and shape types beside them.
    source = "".join(path.read_text() for path in Path(charts.__file__).parent.glob("*.py"))
    drawn = set(re.findall(r'"type": "(\w+)"', source)) - {"category", "date", "rect", "linear",
                                                            "log", "line"}
    assert {"scatter", "bar", "heatmap"} <= drawn <= registered, drawn - registered


def test_the_bundle_names_no_address_it_would_load_from():
    """The pages load nothing from the internet: the bundle's two defaults that name one (map
    outlines from a CDN, Chart Studio) are emptied by scripts/vendor-plotly, and no other
    address is one a chart loads (the rest are licences, namespaces and help links in
    messages; the one link, to plotly.com on the toolbar's logo, is a link, and the pages
    turn the logo off)."""
    bundle = BUNDLE.read_text()
    assert "cdn." not in bundle and "cloud.plotly.com" not in bundle
    assert 'topojsonURL:{valType:"string",noBlank:!1,dflt:""}' in bundle
    assert 'plotlyServerURL:{valType:"string",dflt:""}' in bundle
    loaded = set(re.findall(r'(?:src|url|URL)\s*[:=]\s*"(https?://[^"]+)"', bundle))
    assert loaded == set(), loaded
    charts = (BUNDLE.parent.parent / "js" / "charts.js").read_text()
    assert "displaylogo: false" in charts and 'plotlyServerURL: ""' in charts
