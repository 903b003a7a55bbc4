// Turns every <div class="mechbook-chart"> (see mechbook/viz/render.py) into a live Vega-Lite view.
// The page's theme picks the Vega theme (pydata-sphinx-theme sets <html data-theme="dark">), and
// a change of theme redraws the charts. The chart's description (its title) is its aria-label.
// If vega-embed is missing or the spec fails, the <noscript> fallback image is all there is.
(function () {
  "use strict";

  function dark() {
    return document.documentElement.dataset.theme === "dark";
  }

  function label(spec) {
    if (spec.description) {
      return spec.description;
    }
    var title = spec.title && (spec.title.text || spec.title);
    return Array.isArray(title) ? title.join(" ") : title || "chart";
  }

  function render(container) {
    var specNode = container.querySelector("script.mechbook-spec");
    if (!specNode) {
      return;
    }
    var spec = JSON.parse(specNode.textContent);
    var old = container.querySelector(".mechbook-live");
    if (old) {
      if (container.mechbookView) {
        container.mechbookView.finalize();
      }
      old.remove();
    }
    var target = document.createElement("div");
    target.className = "mechbook-live";
    target.setAttribute("role", "figure");
    target.setAttribute("aria-label", label(spec));
    container.appendChild(target);
    var options = { actions: false, renderer: "svg" };
    if (dark()) {
      options.theme = "dark";
      options.config = { background: null };
    }
    window
      .vegaEmbed(target, spec, options)
      .then(function (result) {
        container.mechbookView = result.view;
        var svg = target.querySelector("svg");
        if (svg) {
          svg.setAttribute("aria-label", label(spec));
        }
        container.dataset.rendered = "live";
        container.dataset.theme = dark() ? "dark" : "light";
      })
      .catch(function (err) {
        target.remove();
        container.dataset.rendered = "fallback";
        console.error("mechbook: chart not drawn:", err);
      });
  }

  function renderAll() {
    if (typeof window.vegaEmbed !== "function") {
      console.error("mechbook: vega-embed did not load; charts are not drawn");
      return;
    }
    document.querySelectorAll("div.mechbook-chart").forEach(render);
  }

  function start() {
    renderAll();
    var shown = dark();
    new MutationObserver(function () {
      if (dark() !== shown) {
        shown = dark();
        renderAll();
      }
    }).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
