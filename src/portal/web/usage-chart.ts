/**
 * CHART_JS: the usage page's chart, served at /portal/assets/usage-chart.js (the CSP runs no
 * inline script). It reads the numbers from the chart element's `data-chart` attribute
 * ({ days: ["YYYY-MM-DD", …], series: [{ label, values: [calls per day] }] }) and draws them
 * with uPlot, in UTC days as the tables give them. Without scripts the element keeps its note
 * and its accessible name; the tables are the same numbers in any case.
 */
export const CHART_JS = `"use strict";
document.addEventListener("DOMContentLoaded", function () {
  var box = document.getElementById("usage-chart");
  if (!box || typeof uPlot !== "function") return;
  var data;
  try { data = JSON.parse(box.getAttribute("data-chart")); } catch (e) { return; }
  var colours = ["#0b4f9c", "#a4161a", "#1e6b2e"];
  var xs = data.days.map(function (day) { return Date.parse(day + "T00:00:00Z") / 1000; });
  var series = [{ label: "Day", value: function (u, ts) { return ts == null ? "" : new Date(ts * 1000).toISOString().slice(0, 10); } }]
    .concat(data.series.map(function (s, i) {
      return { label: s.label + " calls", stroke: colours[i % colours.length], width: 2, points: { show: xs.length <= 31 } };
    }));
  var width = function () { return Math.max(280, box.clientWidth); };
  box.textContent = "";
  var plot = new uPlot({
    width: width(),
    height: 280,
    tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"); },
    scales: { y: { range: function (u, min, max) { return [0, Math.max(1, max)]; } } },
    series: series,
    axes: [{}, { size: 70 }]
  }, [xs].concat(data.series.map(function (s) { return s.values; })), box);
  window.addEventListener("resize", function () { plot.setSize({ width: width(), height: 280 }); });
});
`
