// Behaviour every page shares, kept out of the HTML so that the Content-Security-Policy can
// forbid inline scripts: a picker with data-autosubmit submits its form when changed (after
// emptying the field data-clear names, as a new contract starts at its current period).
(function () {
  "use strict";
  document.querySelectorAll("select[data-autosubmit]").forEach(function (select) {
    select.addEventListener("change", function () {
      var clear = select.dataset.clear && select.form.elements[select.dataset.clear];
      if (clear) { clear.value = ""; }
      select.form.submit();
    });
  });
})();

// Tables that hold money become stacked rows on a phone (site.css, under 600 px): each cell
// is labelled with its column's heading, counted from the right, so a row that starts with a
// heading spanning several rows (a statement's) still finds its columns; a cell spanning
// several columns (a statement's "Total") takes the heading of the first it spans.
(function () {
  "use strict";
  document.querySelectorAll("table.stack").forEach(function (table) {
    var head = table.querySelector("thead tr");
    if (!head) { return; }
    var labels = [];
    Array.prototype.forEach.call(head.cells, function (cell) {
      for (var k = 0; k < (cell.colSpan || 1); k += 1) { labels.push(cell.textContent.trim()); }
    });
    table.querySelectorAll("tbody tr, tfoot tr").forEach(function (row) {
      var column = labels.length;
      for (var i = row.cells.length - 1; i >= 0; i -= 1) {
        var cell = row.cells[i];
        column -= cell.colSpan || 1;
        if (column >= 0 && cell.tagName === "TD" && !cell.dataset.label) {
          cell.dataset.label = labels[column];
        }
      }
    });
  });
})();

// The language menu switches as it is changed; its Switch button is for pages without scripts.
(function () {
  "use strict";
  document.documentElement.classList.add("scripted");
  var menu = document.getElementById("language-switch");
  if (menu) {
    menu.addEventListener("change", function () { menu.form.submit(); });
  }
})();
