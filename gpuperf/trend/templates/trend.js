// Draws a case page's plotly figure and applies the index's filters. The figure is a plotly spec written by
// the site generator, and the index's small multiples are pictures drawn at build time: nothing here draws.
(function () {
  "use strict";
  var holder = document.getElementById("figures");
  var figures = holder ? JSON.parse(holder.textContent) : {};
  var pending = 0;

  function draw(node) {
    pending += 1;
    var spec = figures[node.dataset.figure];
    Plotly.newPlot(node, spec.data, spec.layout, {displaylogo: false, responsive: true})
      .then(function () { node.dataset.drawn = "1"; pending -= 1; });
  }
  document.querySelectorAll("div.chart[data-figure]").forEach(draw);

  // A picture counts as drawn once it is loaded and decoded (ready to paint, not only its size known).
  function decoded(img) {
    img.decode().then(function () { img.dataset.drawn = "1"; }, function () { img.dataset.broken = "1"; });
  }
  document.querySelectorAll("img.chart").forEach(function (img) {
    if (img.complete && img.naturalWidth > 0) { decoded(img); }
    else { img.addEventListener("load", function () { decoded(img); }); }
  });

  // True once every chart now in the viewport is drawn: a plotly figure has resolved its newPlot, a picture
  // is decoded. The browser test and a screenshot wait on it.
  window.trendScreenDrawn = function () {
    var height = window.innerHeight;
    return pending === 0 && Array.prototype.every.call(document.querySelectorAll(".chart"), function (node) {
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
