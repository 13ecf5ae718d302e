// The order form's price curve, drawn with the vendored uPlot: max price per hour (incl. fees) against the typical wait; clicking a point picks its price.

let uPlotLoading = null;
/** uPlot, imported the first time a chart is drawn (the other views never load it). */
const loadUPlot = () => (uPlotLoading ??= import("./vendor/uplot/uPlot.esm.js").then((m) => m.default));

const PICK_PX = 30; // a click this close (horizontally) to a point chooses it
const hoursOf = (s) => (s === null || s === undefined ? null : Math.round((s / 3600) * 100) / 100);

/**
 * Draws points [{price: "3.25", median_seconds, median_more_than_seconds, mine}] (sorted by
 * price, at least one) into el, replacing what was there; onPick(price) when one is clicked.
 * Draws nothing if wanted() says no once uPlot has loaded (a newer curve is on its way).
 */
export async function drawPriceCurve(el, points, onPick, wanted = () => true) {
  const uPlot = await loadUPlot();
  if (!wanted()) return null;
  el._uplot?.destroy();
  const xs = points.map((p) => Number(p.price));
  const data = [
    xs,
    points.map((p) => hoursOf(p.median_seconds)),
    points.map((p) => hoursOf(p.median_more_than_seconds)),
    points.map((p) => (p.mine ? hoursOf(p.median_seconds ?? p.median_more_than_seconds) : null)),
  ];
  const dollars = (v) => `$${v.toFixed(2)}`;
  const opts = {
    width: Math.max(260, el.clientWidth || 0),
    height: 170,
    legend: { show: false },
    cursor: { drag: { x: false, y: false }, points: { size: 10 } },
    scales: {
      x: { time: false, range: (u, min, max) => (min === max ? [min - 1, max + 1] : [min - (max - min) * 0.08, max + (max - min) * 0.08]) },
      y: { range: (u, min, max) => [0, Math.max(1, (max ?? 0) * 1.15)] },
    },
    axes: [
      { label: "Max price per hour (incl. fees)", labelSize: 22, size: 36, values: (u, vals) => vals.map(dollars), font: "12px system-ui", labelFont: "12px system-ui" },
      { label: "Typical wait (h)", labelSize: 22, size: 44, values: (u, vals) => vals.map((v) => `${v}`), font: "12px system-ui", labelFont: "12px system-ui" },
    ],
    series: [
      {},
      { label: "Typical wait", stroke: "#2f5bd3", width: 2, points: { show: true, size: 8, fill: "#2f5bd3" } },
      { label: "More than", stroke: "#8a94a3", width: 1.5, dash: [4, 4], points: { show: true, size: 8, fill: "#ffffff" } },
      { label: "Your max", stroke: "#b42318", width: 0, paths: () => null, points: { show: true, size: 13, width: 2, fill: "transparent" } },
    ],
  };
  const u = new uPlot(opts, data, el);
  el._uplot = u;
  u.over.addEventListener("click", (event) => {
    const x = event.clientX - u.over.getBoundingClientRect().left;
    let best = null;
    xs.forEach((value, i) => {
      const dx = Math.abs(u.valToPos(value, "x") - x);
      if (dx <= PICK_PX && (best === null || dx < best.dx)) best = { dx, i };
    });
    if (best) onPick(points[best.i].price);
  });
  return u;
}
