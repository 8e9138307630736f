// Draws the page's Plotly figures: inline ones from their JSON script tags, and those with a
// data-src (the heatmap) fetched after the page, so the page itself stays fast.
(function () {
  "use strict";
  // Plotly's toolbar sits top right, beside titles that start on the left (the figures'
  // layout, loans.web.charts); a phone (no pointer to hover with) gets no toolbar at all.
  var phone = window.matchMedia("(max-width: 600px)").matches;
  // No address on the internet: no Chart Studio link, no map outlines (static/vendor has none).
  var config = { displaylogo: false, responsive: true, displayModeBar: phone ? false : "hover",
                 showEditInChartStudio: false, plotlyServerURL: "", topojsonURL: "" };

  function draw(element, figure) {
    if (!window.Plotly) { return; }  // not (yet) loaded: the box keeps saying so
    element.innerHTML = "";  // the "loading" note the page shows until the chart is drawn
    window.Plotly.newPlot(element, figure.data, figure.layout, config);
  }

  document.querySelectorAll("[data-plot]").forEach(function (element) {
    draw(element, JSON.parse(document.getElementById(element.dataset.plot).textContent));
  });

  document.querySelectorAll(".chart[data-src]").forEach(function (element) {
    fetch(element.dataset.src, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (!response.ok) { throw new Error(response.status); }
        return response.json();
      })
      .then(function (figure) {
        element.innerHTML = "";
        var empty = !figure.data.length || !figure.data[0].y.length;
        if (empty) {
          element.innerHTML = '<p class="empty"></p>';
          element.firstChild.textContent = element.dataset.empty;
          return;
        }
        draw(element, figure);
      })
      .catch(function () {
        element.innerHTML = '<p class="error"></p>';
        element.firstChild.textContent = element.dataset.failed;
      });
  });
})();
