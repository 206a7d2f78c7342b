// Render the server-built plotly figures: <div data-plotly="ID"> + <script type="application/json" id="ID">.
(function () {
  "use strict";
  var config = {
    responsive: true,
    displaylogo: false,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "zoomIn2d", "zoomOut2d", "autoScale2d"],
  };
  function render() {
    document.querySelectorAll("[data-plotly]").forEach(function (el) {
      var source = document.getElementById(el.getAttribute("data-plotly"));
      if (!source || !window.Plotly) return;
      var fig = JSON.parse(source.textContent);
      if (!fig.data || fig.data.length === 0 || fig.data.every(function (t) { return (t.y || t.values || t.x || []).length === 0; })) {
        el.classList.add("chart-empty");
        el.textContent = "No data for this year yet.";
        return;
      }
      if (window.innerWidth < 640) {
        // Phones: shorter charts, smaller type, category labels kept readable.
        fig.layout.height = Math.min(fig.layout.height || 300, 300);
        fig.layout.font = Object.assign({}, fig.layout.font, { size: 10 });
        fig.layout.margin = Object.assign({}, fig.layout.margin, { l: Math.min(fig.layout.margin.l, 84), r: Math.min(fig.layout.margin.r, 40) });
      }
      window.Plotly.newPlot(el, fig.data, fig.layout, config);
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", render);
  } else {
    render();
  }
})();
