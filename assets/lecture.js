() => {
  // The explorer's lecture view (ui/lecture.py): numbered views, one screen each; keys for rounds,
  // stages, play and views; each view's figures fitted to the screen; the share link's address.
  const VIEWS = __VIEWS__, STAGES = __STAGES__, TREE_VIEW = __TREE_VIEW__, N = VIEWS.length;
  const LAST = STAGES.length - 1;
  const SETTLE_MS = 600;                          // the other views follow the round this long after the last step
  const HIDDEN_BEFORE_COMMIT = ["accepted path", "bonus edge", "bonus token"];
  const st = {on: false, view: TREE_VIEW, stage: LAST, want: 0};
  const body = document.body;
  const $ = (s) => document.querySelector(s);
  const Plotly = () => window.Plotly;

  // --- where the page is: round, run inspected, colouring ----------------------------------------
  const roundBox = () => $("#round input[type=number]");
  const round = () => parseInt(roundBox()?.value || "1", 10) || 1;
  const rounds = () => parseInt(roundBox()?.max || "1", 10) || 1;
  const focus = () => $("#focus input:checked")?.value || "";
  const colour = () => $("#colour-by input:checked")?.value || "";
  const hasRun = () => !!$("#tree .js-plotly-plot");

  let settle = null;
  function setRound(k) {                          // a round step: its cards and tree now, the rest once steps pause
    const box = $("#lecture-round input");
    if (!box || !hasRun()) return false;
    k = Math.max(1, Math.min(k, rounds()));
    if (k === round()) return false;
    st.want = k;
    const r = roundBox();
    if (r) r.value = String(k);                   // the next step counts from here, before the server answers
    box.value = String(k);
    box.dispatchEvent(new Event("input", {bubbles: true}));
    clearTimeout(settle);
    settle = setTimeout(() => {                  // as if the slider had moved: every view follows the round
      const rg = $("#round input[type=range]");
      if (!rg) return;
      rg.value = String(round());
      rg.dispatchEvent(new Event("input", {bubbles: true}));
    }, SETTLE_MS);
    return true;
  }

  // --- figures: lecture sizes, the stage's tree, heights fitted to the screen ---------------------
  const clone = (x) => JSON.parse(JSON.stringify(x));
  const inTree = (gd) => !!gd.closest("#tree");
  const shown = (gd) => gd.offsetParent !== null;

  function lectureStyle(gd, data, layout) {     // what a figure looks like in the lecture view
    const font = layout.font || (layout.font = {});
    font.size = Math.round((font.size || 12) * 1.3);
    for (const t of data) if (t.textfont) t.textfont = {...t.textfont, size: Math.round((t.textfont.size || 11) * 1.3)};
    if (gd._dtFit) layout.height = gd._dtFit;
    if (inTree(gd) && st.stage < LAST) {         // before the commit the class has not seen the walk
      for (const t of data) {
        if (HIDDEN_BEFORE_COMMIT.includes(t.name)) t.visible = false;
        if (t.name === "nodes" && t.marker && t.marker.line) t.marker.line = {color: "#444444", width: 0.6};
      }
    }
  }
  const modeOf = (gd) => st.on ? `on|${gd._dtFit || 0}|${inTree(gd) ? st.stage === LAST : 1}` : "off";

  function hook() {                               // Gradio draws with Plotly.react: keep our changes on
    const P = Plotly();
    if (!P || P._dtHooked) return;
    const react = P.react;
    P._dtReact = react;
    P.react = function (gd, data, layout, config) {
      if (gd && gd.classList && Array.isArray(data) && layout && typeof layout === "object") {
        gd._dtSrc = {data: clone(data), layout: clone(layout), config};
        gd._dtMode = "off";
        if (st.on && shown(gd)) { lectureStyle(gd, data, layout); gd._dtMode = modeOf(gd); }
        else if (st.on) gd._dtMode = "stale";
      }
      const out = react.apply(this, arguments);
      if (st.on && gd && gd.classList) Promise.resolve(out).then(() => schedule());
      return out;
    };
    P._dtHooked = true;
  }

  function redraw(gd) {                           // the figure the server sent, styled for the mode now
    const P = Plotly();
    if (!P || !P._dtReact || !gd.data || !gd.layout) return null;
    // a figure drawn before the hook (Plotly loads with the first one): what the page holds
    const src = gd._dtSrc || (gd._dtSrc = {data: clone(gd.data), layout: clone(gd.layout), config: {responsive: true}});
    const data = clone(src.data), layout = clone(src.layout);
    if (st.on) lectureStyle(gd, data, layout);
    gd._dtMode = modeOf(gd);
    // Plotly refuses to resize a hidden figure (a closed accordion, a view switched away meanwhile)
    return P._dtReact.call(P, gd, data, layout, src.config)
      .then(() => (shown(gd) ? P.Plots.resize(gd) : null))
      .catch(() => null);
  }

  const viewPlots = () => [...document.querySelectorAll(".dt-lv .js-plotly-plot")].filter(shown);
  const MARGIN = 14;                              // px left free under the view

  function belowOf(el) {                          // what follows el down the page in its own column
    let below = 0;
    for (let e = el; e && e !== document.body; e = e.parentElement) {
      const r = e.getBoundingClientRect();
      let bottom = r.bottom;
      for (let s = e.nextElementSibling; s; s = s.nextElementSibling) {
        const q = s.getBoundingClientRect();
        if (s.offsetParent === null || q.height === 0) continue;
        if (q.top >= r.bottom - 1 && q.left < r.right - 1 && q.right > r.left + 1) bottom = Math.max(bottom, q.bottom);
      }
      below += bottom - r.bottom;
    }
    return below;
  }

  async function fit() {                          // the view's figures share the height the rest leaves
    const gds = viewPlots();
    for (const gd of gds) if (gd._dtMode !== modeOf(gd)) await redraw(gd);
    for (let pass = 0; pass < 3 && gds.length; pass++) {
      const rows = new Map();                     // figures side by side share one height
      for (const gd of gds) {
        const top = Math.round(gd.getBoundingClientRect().top / 8);
        rows.set(top, [...(rows.get(top) || []), gd]);
      }
      const groups = [...rows.entries()].sort((a, b) => a[0] - b[0]).map((e) => e[1]);
      const heightOf = (g) => Math.max(...g.map((gd) => gd.getBoundingClientRect().height));
      const natural = (g) => Math.max(...g.map((gd) => gd._dtSrc?.layout?.height || 400));
      const lowest = groups[groups.length - 1][0].closest(".block") || groups[groups.length - 1][0];
      const spare = window.innerHeight - MARGIN - lowest.getBoundingClientRect().bottom - belowOf(lowest);
      if (Math.abs(spare) < 6) break;
      const avail = groups.reduce((a, g) => a + heightOf(g), 0) + spare;
      const total = groups.reduce((a, g) => a + natural(g), 0);
      let changed = false;
      for (const g of groups) {
        const h = Math.max(240, Math.floor(avail * natural(g) / total));
        for (const gd of g) if (Math.abs((gd._dtFit || 0) - h) > 4) { gd._dtFit = h; changed = true; }
      }
      if (!changed) break;
      await Promise.all(gds.map(redraw));
    }
  }
  let fitting = false, again = false;
  function schedule() {                           // one fit at a time; a request meanwhile runs after
    if (!st.on) return;
    if (fitting) { again = true; return; }
    fitting = true;
    requestAnimationFrame(async () => {
      try { await fit(); } finally {
        fitting = false;
        body.dataset.fitted = String(Date.now());
        if (again) { again = false; schedule(); }
      }
    });
  }

  // --- the views, stages and the switch -------------------------------------------------------
  function show() {
    body.classList.toggle("dt-lecture", st.on);
    body.dataset.view = String(st.view);
    body.dataset.stage = STAGES[st.stage];
    $("#lecture-toggle")?.setAttribute("aria-pressed", String(st.on));
    document.querySelectorAll("#lecture-bar .dt-tab").forEach((b) =>
      b.setAttribute("aria-current", String(b.dataset.view === String(st.view))));
    if (st.on && st.view === 5) {                 // the what-if accordion opens with its view
      const acc = $("#whatif");
      const head = acc && acc.querySelector(".label-wrap");
      if (head && !head.classList.contains("open")) head.click();
    }
    where();
    share();
  }
  function setView(v) { st.view = ((v - 1 + N) % N) + 1; show(); schedule(); }
  function setStage(s) { st.stage = s; show(); schedule(); }
  function toggle(on) {
    st.on = on === undefined ? !st.on : on;
    if (st.on) st.view = hasRun() ? TREE_VIEW : 1;
    show();
    if (st.on) schedule();
    else for (const gd of document.querySelectorAll(".js-plotly-plot")) if (gd._dtMode && gd._dtMode !== "off") redraw(gd);
    if (st.on) window.scrollTo(0, 0);
  }
  function stepStage(d) {                         // past the commit: the next round's draft, and back
    const s = st.stage + d;
    if (s > LAST) { if (setRound(round() + 1)) setStage(0); }
    else if (s < 0) { if (setRound(round() - 1)) setStage(LAST); }
    else setStage(s);
  }

  function where() {
    const w = $("#lecture-where");
    if (!w) return;
    const txt = hasRun() ? `Round ${round()} of ${rounds()} · ${focus()} · ${STAGES[st.stage]}` : "";
    if (w.textContent !== txt) w.textContent = txt;
  }
  function share() {                              // the link's address: this round, run, colouring, view
    const a = $("#share-link a.dt-share-url");
    if (!a || !a.dataset.share) return;
    const u = new URL(window.location.href);
    u.search = "";
    u.hash = "";
    u.searchParams.set("share", a.dataset.share);
    u.searchParams.set("round", String(round()));
    if (focus()) u.searchParams.set("focus", focus());
    if (colour()) u.searchParams.set("show", colour());
    if (st.on) { u.searchParams.set("view", String(st.view)); u.searchParams.set("stage", STAGES[st.stage]); }
    const href = u.toString();
    if (a.getAttribute("href") !== href) a.setAttribute("href", href);
    if (a.textContent !== href) a.textContent = href;
  }

  // --- keys: only in the lecture view, only with the focus outside a text field -------------------
  const TEXT = new Set(["text", "number", "search", "email", "url", "password", "tel"]);
  function typing(t) {
    if (!t || !t.closest) return false;
    if (t.closest("textarea, select, [contenteditable=''], [contenteditable='true']")) return true;
    return t.tagName === "INPUT" && TEXT.has((t.type || "text").toLowerCase());
  }
  document.addEventListener("keydown", (e) => {
    if (!st.on || e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return;
    const k = e.key;
    if (k === "ArrowRight") setRound(round() + 1);
    else if (k === "ArrowLeft") setRound(round() - 1);
    else if (k === "Home") setRound(1);
    else if (k === "End") setRound(rounds());
    else if (k === "ArrowDown") stepStage(1);
    else if (k === "ArrowUp") stepStage(-1);
    else if (k === " " || k === "Spacebar") { st.want = 0; $("#play")?.click(); }
    else if (k === "PageDown") setView(st.view + 1);
    else if (k === "PageUp") setView(st.view - 1);
    else if (/^[0-9]$/.test(k)) setView(k === "0" ? 10 : parseInt(k, 10));
    else if (k === "Escape") toggle(false);
    else return;
    e.preventDefault();
    e.stopPropagation();
  }, true);

  document.addEventListener("click", (e) => {
    const t = e.target.closest ? e.target : null;
    if (!t) return;
    if (t.closest("#lecture-toggle")) toggle();
    const tab = t.closest("#lecture-bar .dt-tab");
    if (tab) setView(parseInt(tab.dataset.view, 10));
  });
  window.addEventListener("resize", () => schedule());
  document.addEventListener("change", () => { where(); share(); });   // the run inspected, the colouring

  // --- the page as it draws: the bar, the captions (round and run) and the share link -------------
  const watched = new WeakSet();
  function watch() {
    hook();
    for (const sel of ["#captions", "#share-link"]) {
      const el = $(sel);
      if (el && !watched.has(el)) {
        watched.add(el);
        new MutationObserver(() => {
          // a slower redraw of an earlier step can land after a later one: ask again for the round wanted
          if (st.on && st.want && sel === "#captions") {
            const shownRound = parseInt(($("#captions b")?.textContent || "").replace(/\D+/g, ""), 10);
            if (shownRound === st.want) st.want = 0;
            else if (shownRound && round() !== st.want) { const w = st.want; st.want = 0; setRound(w); }
          }
          where(); share();
        }).observe(el, {childList: true, subtree: true, characterData: true});
      }
    }
    const bar = $("#lecture-toggle");
    if (bar && !watched.has(bar)) { watched.add(bar); show(); }
    setTimeout(watch, Plotly() && Plotly()._dtHooked && bar && $("#captions") && $("#share-link") ? 2000 : 200);
  }
  watch();

  // a shared address opens in the view (and stage) it was shared from
  const q = new URLSearchParams(window.location.search);
  const v = parseInt(q.get("view") || "", 10);
  if (q.get("share") && v >= 1 && v <= N) {
    st.on = true;
    st.view = v;
    const s = STAGES.indexOf(q.get("stage") || "");
    if (s >= 0) st.stage = s;
  }
  show();
  if (st.on) schedule();
  window.dtLecture = {state: st, toggle, setView, setStage, fit: schedule};
}
