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

  // Break a container-width chart's title into lines that fit the column, and on a narrow
  // screen give its legends one column of labels that fit it (Vega neither wraps nor shrinks them).
  var CHAR_PX = 8.6;
  function fitToColumn(spec, width) {
    if (spec.width !== "container" || !width) {
      return spec;
    }
    var perLine = Math.max(20, Math.floor((width - 10) / CHAR_PX));
    var title = spec.title;
    var text = title && typeof title === "object" && !Array.isArray(title) ? title.text : title;
    if (text) {
      var lines = [];
      (Array.isArray(text) ? text : [text]).forEach(function (line) {
        var current = "";
        String(line).split(/\s+/).forEach(function (word) {
          if (current && (current + " " + word).length > perLine) {
            lines.push(current);
            current = word;
          } else {
            current = current ? current + " " + word : word;
          }
        });
        if (current) {
          lines.push(current);
        }
      });
      spec.title = title && typeof title === "object" && !Array.isArray(title)
        ? Object.assign({}, title, { text: lines }) : lines;
    }
    if (width < 520) {
      spec.config = spec.config || {};
      spec.config.legend = Object.assign({}, spec.config.legend, { columns: 1, labelLimit: width - 80 });
      narrowLegends(spec, width - 80);
    }
    return spec;
  }

  // Legends that a chart sets itself (columns, label and title limits) override the config.
  function narrowLegends(node, limit) {
    if (!node || typeof node !== "object") {
      return;
    }
    Object.keys(node).forEach(function (key) {
      var value = node[key];
      if (key === "legend" && value && typeof value === "object") {
        value.columns = 1;
        value.labelLimit = Math.min(value.labelLimit || limit, limit);
        value.titleLimit = Math.min(value.titleLimit || limit, limit);
      } else if (key !== "datasets" && key !== "data") {
        narrowLegends(value, limit);
      }
    });
  }

  function render(container) {
    var specNode = container.querySelector("script.mechbook-spec");
    if (!specNode) {
      return;
    }
    var spec = fitToColumn(JSON.parse(specNode.textContent), container.clientWidth);
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
