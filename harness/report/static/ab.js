"use strict";
// ab.html's table: sort by a column, filter by verdict, operator, dtype and any text, and a
// row's details on a click. Data: the JSON in #data (harness/report/abhtml.py writes it).
const D = JSON.parse(document.getElementById("data").textContent);
const LIMIT = 1000;  // rows drawn at once; "show all" draws the rest
const COLS = [["op", "operator"], ["opv", "operator verdict"], ["dtype", "dtype"],
  ["shape", "shape"], ["a", "A ms"], ["b", "B ms"], ["sp", "speedup %"], ["lo", "interval %"],
  ["floor", "floor %"], ["v", "verdict"], ["flags", "flags"]];
const NUMERIC = new Set(["a", "b", "sp", "lo", "floor"]);
const $ = (id) => document.getElementById(id);
// A word for a POSIX shell, as Python's shlex.quote spells it.
const shq = (s) => /^[\w@%+=:,./-]+$/.test(s) ? s : "'" + String(s).replace(/'/g, "'\"'\"'") + "'";
const esc = (s) => String(s ?? "").replace(/[&<>"]/g,
  (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;"}[c]));
const pct = (v) => v === null || v === undefined ? "-" : (v >= 0 ? "+" : "") + v.toFixed(1);

const items = [];
const withRows = new Set();
for (const r of D.rows) {
  const o = D.ops[r[0]];
  withRows.add(r[0]);
  items.push({oi: r[0], op: o[0], opv: o[1], dtype: r[1], shape: r[2], a: r[3], b: r[4],
    sp: r[5], lo: r[6], hi: r[7], floor: r[8], v: r[9], flags: r[10], rounds: r[11], p: r[12],
    gA: r[13], gB: r[14]});
}
D.ops.forEach((o, i) => {
  if (!withRows.has(i)) {
    items.push({oi: i, op: o[0], opv: o[1], dtype: "", shape: "", a: null, b: null, sp: null,
      lo: null, hi: null, floor: null, v: o[1], flags: o[3], rounds: [], p: null});
  }
});
items.forEach((it, i) => {
  it.id = i;
  it.text = [it.op, it.opv, it.dtype, it.shape, it.v, it.flags, D.ops[it.oi][3],
    D.ops[it.oi][4]].join(" ").toLowerCase();
});

let sortKey = null, sortDir = 1, showAll = false, shown = items;

function fill(select, values) {
  for (const v of [...new Set(values)].filter((x) => x).sort()) {
    select.insertAdjacentHTML("beforeend", `<option value="${esc(v)}">${esc(v)}</option>`);
  }
}

function cells(it) {
  const cls = (k, v) => NUMERIC.has(k) ? ' class="n"' : (k === "v" || k === "opv") ? ` class="${esc(v)}"` : "";
  const shown = {op: it.op, opv: it.opv, dtype: it.dtype, shape: it.shape,
    a: it.a ?? "-", b: it.b ?? "-", sp: pct(it.sp),
    lo: it.lo === null ? "-" : `[${pct(it.lo)}, ${pct(it.hi)}]`, floor: it.floor ?? "-",
    v: it.v, flags: it.flags || "-"};
  return COLS.map(([k]) => `<td${cls(k, shown[k])}>${esc(shown[k])}</td>`).join("");
}

function draw() {
  const body = document.querySelector("#rows tbody");
  const drawn = showAll ? shown : shown.slice(0, LIMIT);
  body.innerHTML = drawn.map((it) => `<tr class="row" data-id="${it.id}">${cells(it)}</tr>`).join("");
  $("count").textContent = `${shown.length} of ${items.length} rows`;
  $("more").innerHTML = shown.length > drawn.length ?
    `${drawn.length} drawn: <button id="all">show all ${shown.length}</button>` : "";
  if ($("all")) $("all").onclick = () => { showAll = true; draw(); };
}

function filter() {
  const verdict = $("verdict").value, dtype = $("dtype").value;
  const op = $("op").value.trim().toLowerCase(), q = $("q").value.trim().toLowerCase();
  const exact = D.ops.some((o) => o[0].toLowerCase() === op);
  shown = items.filter((it) => (!verdict || it.v === verdict || it.opv === verdict)
    && (!dtype || it.dtype === dtype)
    && (!op || (exact ? it.op.toLowerCase() === op : it.op.toLowerCase().includes(op)))
    && (!q || it.text.includes(q)));
  sort();
}

function sort() {
  if (sortKey) {
    const k = sortKey;
    shown = [...shown].sort((x, y) => {
      const a = x[k], b = y[k];
      if (a === null || a === "" || a === undefined) return 1;
      if (b === null || b === "" || b === undefined) return -1;
      return (NUMERIC.has(k) ? a - b : String(a).localeCompare(String(b))) * sortDir;
    });
  }
  draw();
}

function detail(it) {
  const o = D.ops[it.oi];
  const runs = (side, list) => list.length ? list.map((r) =>
    `<code>${esc(D.base && !r.startsWith("/") ? D.base + "/" + r : r)}</code>`).join(" ") : "none";
  const rounds = it.rounds.length ? it.rounds.map(pct).join(", ") : "-";
  const gb = (v) => v === null || v === undefined ? "-" : v;
  return `<td colspan="${COLS.length}"><div class="rounds">per-round speedups %: ${esc(rounds)}</div>
<div>interval %: ${it.lo === null ? "-" : `[${pct(it.lo)}, ${pct(it.hi)}]`}; adjusted p: ${esc(it.p ?? "-")};
noise floor %: ${esc(it.floor ?? "-")}</div>
<div>flags: ${esc(it.flags || "-")}</div>
<div>GB/s: A ${esc(gb(it.gA))}, B ${esc(gb(it.gB))}</div>
<div>operator: ${esc(o[1])}; rounds ${esc(o[2] ?? "-")}; units ended badly: ${esc(o[4] || "none")}; reason: ${esc(o[3] || "-")}</div>
<div>runs A: ${runs("A", o[5])}</div><div>runs B: ${runs("B", o[6])}</div>
<div>rerun: <code class="rerun">${esc(D.rerun + " --op " + shq(o[0]))}</code></div></td>`;
}

function toggle(tr) {
  const next = tr.nextElementSibling;
  if (next && next.classList.contains("detail")) { next.remove(); return; }
  const row = document.createElement("tr");
  row.className = "detail";
  row.innerHTML = detail(items[Number(tr.dataset.id)]);
  tr.after(row);
}

function start() {
  for (const k of ["title", "counts", "geomean", "said"]) $(k).textContent = D[k];
  document.title = D.title;
  const head = document.querySelector("#rows thead tr");
  head.innerHTML = COLS.map(([k, label]) => `<th data-col="${k}">${esc(label)}</th>`).join("");
  head.onclick = (e) => {
    const th = e.target.closest("th");
    if (!th) return;
    sortDir = sortKey === th.dataset.col ? -sortDir : 1;
    sortKey = th.dataset.col;
    head.querySelectorAll("th").forEach((h) => h.classList.remove("asc", "desc"));
    th.classList.add(sortDir > 0 ? "asc" : "desc");
    sort();
  };
  fill($("verdict"), items.flatMap((it) => [it.v, it.opv]));
  fill($("dtype"), items.map((it) => it.dtype));
  $("op-names").innerHTML = D.ops.map((o) => `<option value="${esc(o[0])}">`).join("");
  for (const id of ["verdict", "dtype"]) $(id).onchange = filter;
  for (const id of ["op", "q"]) $(id).oninput = filter;
  document.querySelector("#rows tbody").onclick = (e) => {
    const tr = e.target.closest("tr.row");
    if (tr) toggle(tr);
  };
  filter();
}

start();
