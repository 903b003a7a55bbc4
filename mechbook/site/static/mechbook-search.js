// Search snippets show prose only: Sphinx's Search.htmlToText (searchtools.js) reads a result
// page's text; before it does, drop code cells, charts and the page's download note, and show
// TeX as an ellipsis.
(function () {
  "use strict";
  var DROP = [".cell_input", ".mechbook-chart", ".mechbook-downloads", "noscript", "div.highlight",
              ".cell_output .output.stderr"];
  var MATH = ["div.math", "span.math"];  // TeX source: shown as an ellipsis

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
      MATH.forEach(function (query) {
        doc.querySelectorAll(query).forEach(function (el) {
          el.replaceWith(doc.createTextNode(" … "));
        });
      });
      return original(doc.documentElement.outerHTML, anchor);
    };
    Search.mechbookPatched = true;
  }

  patch();
  document.addEventListener("DOMContentLoaded", patch);
})();
