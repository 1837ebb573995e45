// Draws each page's plotly figures as they scroll into view and applies the index's filters.
// The figures themselves are plotly specs written by the site generator; nothing here draws.
(function () {
  "use strict";
  var figures = JSON.parse(document.getElementById("figures").textContent);
  var config = {displaylogo: false, responsive: true};
  var pending = 0;

  function draw(node) {
    var spec = figures[node.dataset.figure];
    var small = !node.classList.contains("case-chart");
    pending += 1;
    Plotly.newPlot(node, spec.data, spec.layout, small ? {staticPlot: true, responsive: true} : config)
      .then(function () { node.dataset.drawn = "1"; pending -= 1; });
  }

  var observer = new IntersectionObserver(function (entries) {
    entries.forEach(function (entry) {
      if (entry.isIntersecting && !entry.target.dataset.drawn && !entry.target.dataset.queued) {
        entry.target.dataset.queued = "1";
        observer.unobserve(entry.target);
        draw(entry.target);
      }
    });
  });
  document.querySelectorAll(".chart[data-figure]").forEach(function (node) { observer.observe(node); });

  // True once every chart now in the viewport is drawn (the browser test and a screenshot wait on it).
  window.trendScreenDrawn = function () {
    var height = window.innerHeight;
    return pending === 0 && Array.prototype.every.call(document.querySelectorAll(".chart[data-figure]"),
      function (node) {
        var box = node.getBoundingClientRect();
        var visible = box.height > 0 && box.bottom > 0 && box.top < height;
        return !visible || node.dataset.drawn === "1";
      });
  };

  var selects = document.querySelectorAll("#filters select");
  function applyFilters() {
    var wanted = {};
    var hash = [];
    selects.forEach(function (select) {
      if (select.value) { wanted[select.dataset.key] = select.value; hash.push(select.dataset.key + "=" + encodeURIComponent(select.value)); }
    });
    var shown = 0, total = 0;
    document.querySelectorAll(".filterable").forEach(function (node) {
      var keep = Object.keys(wanted).every(function (key) {
        var have = node.dataset[key] || "";
        return key === "hosts" ? have.split(" ").indexOf(wanted[key]) >= 0 : have === wanted[key];
      });
      node.hidden = !keep;
      if (node.classList.contains("card")) { total += 1; shown += keep ? 1 : 0; }
    });
    document.querySelectorAll("section.family").forEach(function (section) {
      section.hidden = section.querySelector(".card:not([hidden])") === null;
    });
    var counter = document.getElementById("shown");
    if (counter) { counter.textContent = shown + " of " + total + " series shown"; }
    location.replace("#" + hash.join("&"));
  }
  if (selects.length) {
    location.hash.replace(/^#/, "").split("&").forEach(function (pair) {
      var parts = pair.split("="), key = parts[0], value = decodeURIComponent(parts[1] || "");
      selects.forEach(function (select) { if (select.dataset.key === key) { select.value = value; } });
    });
    selects.forEach(function (select) { select.addEventListener("change", applyFilters); });
    applyFilters();
  }
}());
