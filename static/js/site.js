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
