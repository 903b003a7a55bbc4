// Turns every <div class="mechbook-chart"> (see mechbook/viz.py) into a live Vega-Lite view.
// The inline SVG stays as the fallback if vega-embed is missing or the spec fails.
(function () {
  "use strict";

  function render(container) {
    var specNode = container.querySelector("script.mechbook-spec");
    var fallback = container.querySelector(".mechbook-fallback");
    if (!specNode) {
      return;
    }
    var target = document.createElement("div");
    target.className = "mechbook-live";
    container.appendChild(target);
    window
      .vegaEmbed(target, JSON.parse(specNode.textContent), { actions: false, renderer: "svg" })
      .then(function () {
        if (fallback) {
          fallback.remove();
        }
        container.dataset.rendered = "live";
      })
      .catch(function (err) {
        target.remove();
        container.dataset.rendered = "fallback";
        console.error("mechbook: chart kept as a static image:", err);
      });
  }

  function renderAll() {
    if (typeof window.vegaEmbed !== "function") {
      console.error("mechbook: vega-embed did not load; charts stay static images");
      return;
    }
    document.querySelectorAll("div.mechbook-chart").forEach(render);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", renderAll);
  } else {
    renderAll();
  }
})();
