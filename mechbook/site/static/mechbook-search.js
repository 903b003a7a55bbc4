// Search snippets show prose only: Sphinx's Search.htmlToText (searchtools.js) reads a result
// page's text; before it does, drop code cells, cell outputs' charts, TeX and notes added for
// the page (downloads, version).
(function () {
  "use strict";
  var DROP = [".cell_input", "div.math", "span.math", ".mechbook-chart", ".mechbook-downloads", "noscript",
              "div.highlight", ".cell_output .output.stderr"];

  function patch() {
    if (typeof Search === "undefined" || !Search.htmlToText || Search.mechbookPatched) {
      return;
    }
    var original = Search.htmlToText;
    Search.htmlToText = function (htmlString, anchor) {
      var doc = new DOMParser().parseFromString(htmlString, "text/html");
      DROP.forEach(function (query) {
        doc.querySelectorAll(query).forEach(function (el) {
          el.remove();
        });
      });
      return original(doc.documentElement.outerHTML, anchor);
    };
    Search.mechbookPatched = true;
  }

  patch();
  document.addEventListener("DOMContentLoaded", patch);
})();
