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
