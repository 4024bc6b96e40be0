() => {
  // The explorer's lecture view (ui/lecture.py): numbered views, one screen each; keys for rounds,
  // stages, play and views; each view's figures fitted to the screen; the share link's address.
  // Round steps draw from the run's rounds sent once (#lecture-cache: every round's tree figure and
  // stage cards); the server follows the round once the steps pause.
  const VIEWS = __VIEWS__, STAGES = __STAGES__, TREE_VIEW = __TREE_VIEW__, N = VIEWS.length;
  const LAST = STAGES.length - 1;
  const SETTLE_MS = 600;                          // the other views follow the round this long after the last step
  const HIDDEN_BEFORE_COMMIT = ["accepted path", "bonus edge", "bonus token"];
  // want: a round asked of the server, not yet drawn (no cache); cur, pending: the round drawn from
  // the cache, which the page keeps until the next round change that is not a key (play, slider, run)
  const st = {on: false, view: TREE_VIEW, stage: LAST, want: 0, cache: null, text: "null", verified: null,
              cur: 0, pending: false};
  const body = document.body;
  const $ = (s) => document.querySelector(s);
  const Plotly = () => window.Plotly;

  // --- where the page is: round, run inspected, colouring ----------------------------------------
  const roundBox = () => $("#round input[type=number]");
  const boxRound = () => parseInt(roundBox()?.value || "1", 10) || 1;
  const round = () => (st.pending && cached() ? st.cur : boxRound());
  const rounds = () => parseInt(roundBox()?.max || "1", 10) || 1;
  const focus = () => $("#focus input:checked")?.value || "";
  const colour = () => $("#colour-by input:checked")?.value || "";
  const hasRun = () => !!$("#tree .js-plotly-plot");

  // --- the run's rounds in the page: the cache, and whether it is of the run on screen -------------
  function readCache() {
    const text = $("#lecture-cache textarea.dt-round-cache")?.textContent || "null";
    if (text === st.text) return;
    let c = null;
    try { c = JSON.parse(text); } catch (e) { c = null; }
    st.text = text;
    st.cache = c && Array.isArray(c.rounds) && c.rounds.length ? c : null;
    st.pending = false;
    st.verified = null;
  }
  const capText = (html) => { const t = document.createElement("template"); t.innerHTML = html; return t.content.textContent; };
  const capRound = () => parseInt(($("#captions b")?.textContent || "").replace(/\D+/g, ""), 10) || 0;
  function cached() {                             // the cache is of the run, colouring and rounds on screen
    const c = st.cache;
    if (!c || c.focus !== focus() || c.show !== colour() || Math.max(c.n, 2) !== rounds() || !hasRun()) return false;
    if (st.verified === null) {                   // its cards for the round shown are the server's (same run)
      const k = capRound(), el = $("#captions .dt-captions");
      st.verified = !!(el && k >= 1 && k <= c.n && el.textContent === capText(c.rounds[k - 1].cap));
    }
    return st.verified;
  }
  function treeFig(k, gd) {                       // round k's tree as Gradio's plot draws the server's figure
    const fig = structuredClone(st.cache.rounds[k - 1].fig);
    const layout = fig.layout || {};
    if (st.cache.template) layout.template = structuredClone(st.cache.template);
    layout.autosize = true;
    layout.margin = layout.margin || {};
    const top = gd._dtSrc?.layout?.margin?.t;     // Gradio's room for the plot's label, as last drawn
    if (top !== undefined) layout.margin.t = Math.max(layout.margin.t || 0, top);
    layout.margin.autoexpand = true;
    return {data: fig.data || [], layout, config: {...(gd._dtSrc?.config || {}), responsive: true}};
  }
  function writeCards(k) {                        // the stage cards of round k (Gradio morphs the next value in)
    const host = $("#captions .dt-captions")?.parentElement, cap = st.cache.rounds[k - 1].cap;
    if (host && host.innerHTML !== cap) host.innerHTML = cap;
  }
  function putBox(k) {
    const r = roundBox(), g = $("#round input[type=range]");
    if (r && r.value !== String(k)) r.value = String(k);
    if (g && g.value !== String(k)) g.value = String(k);
  }
  function drawRound(k) {                         // round k from the cache: cards and tree now
    const gd = $("#tree .js-plotly-plot"), P = Plotly();
    if (!gd || !P) return false;
    st.cur = k;
    st.pending = true;
    st.want = 0;
    putBox(k);
    writeCards(k);
    const f = treeFig(k, gd);
    P.react(gd, f.data, f.layout, f.config);      // through the hook: the lecture's styling and fit
    return true;
  }

  let settle = null;
  function follow() {                             // as if the slider had moved: every view follows the round
    settle = null;
    const rg = $("#round input[type=range]");
    if (!rg) return;
    rg.value = String(round());
    rg.dispatchEvent(new Event("input", {bubbles: true}));
  }
  function resettle(ms) { clearTimeout(settle); settle = setTimeout(follow, ms); }
  function setRound(k) {                          // a round step: its cards and tree now, the rest once steps pause
    const box = $("#lecture-round input");
    if (!hasRun()) return false;
    k = Math.max(1, Math.min(k, rounds()));
    if (k === round()) return false;
    if (!(cached() && drawRound(k))) {            // no cache yet: the cards and tree from the server
      if (!box) return false;
      st.want = k;
      const r = roundBox();
      if (r) r.value = String(k);                 // the next step counts from here, before the server answers
      box.value = String(k);
      box.dispatchEvent(new Event("input", {bubbles: true}));
    }
    resettle(SETTLE_MS);
    where(); share();
    return true;
  }

  // --- figures: lecture sizes, the stage's tree, heights fitted to the screen ---------------------
  const clone = (x) => JSON.parse(JSON.stringify(x));
  const inTree = (gd) => !!gd.closest("#tree");
  const shown = (gd) => gd.offsetParent !== null;

  const textWidth = (text, font) => {          // px of a line of text in the page's canvas
    const ctx = (textWidth.ctx ||= document.createElement("canvas").getContext("2d"));
    ctx.font = font;
    return ctx.measureText(text).width;
  };
  function legendRows(gd, data, layout, size) {  // rows a horizontal legend wraps into at this width
    const font = `${size}px ${layout.font?.family || "sans-serif"}`, m = layout.margin || {};
    const room = (gd.clientWidth || 600) - (m.l ?? 80);
    let rows = 1, x = 0;
    for (const t of data) {
      if (t.showlegend === false || !t.name) continue;
      const w = textWidth(capText(t.name), font) + 50;   // the symbol, its gap and the item's gap
      if (x && x + w > room) { rows++; x = 0; }
      x += w;
    }
    return rows;
  }

  function lectureStyle(gd, data, layout) {     // what a figure looks like in the lecture view
    const font = layout.font || (layout.font = {});
    font.size = Math.round((font.size || 12) * 1.3);
    for (const t of data) if (t.textfont) t.textfont = {...t.textfont, size: Math.round((t.textfont.size || 11) * 1.3)};
    if (gd._dtFit) layout.height = gd._dtFit;
    const lg = layout.legend, m = layout.margin || (layout.margin = {});
    if (gd._dtFit && lg && lg.orientation === "h" && lg.y < 0 && lg.yref !== "container") {
      // a legend under the plot sits a share of the plot's height below it: on a fitted (shorter)
      // plot, at lecture sizes, it would cover the axis title; keep it 70 px down (under the tick
      // labels and the axis title), with a bottom margin that holds it (else autoexpand grows the
      // margin, the plot shrinks and the legend, a share of it, climbs back onto the title)
      const size = lg.font?.size || font.size;
      m.b = Math.max(m.b ?? 80, 70 + legendRows(gd, data, layout, size) * Math.round(size * 1.5) + 12);
      layout.legend = {...lg, y: -70 / Math.max(60, gd._dtFit - (m.t ?? 80) - m.b)};
    }
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
        const tree = inTree(gd);
        const k = tree ? parseInt((/^Round (\d+) /.exec(layout.title?.text || "") || [])[1], 10) : 0;
        if (tree && k && st.pending && k !== st.cur && cached()) {
          // the server's answer to an earlier step (Gradio draws it): keep the round stepped to
          ({data, layout, config} = treeFig(st.cur, gd));
          putBox(st.cur);
          resettle(SETTLE_MS);
        }
        const sig = tree ? `${layout.title?.text}|${JSON.stringify(data)}` : "";
        if (tree && sig === gd._dtSig && gd._fullLayout) return Promise.resolve(gd);   // on screen already
        gd._dtSrc = {data: clone(data), layout: clone(layout), config, sig};
        gd._dtMode = "off";
        if (st.on && !shown(gd) && gd._fullLayout) {   // drawn when its view shows (fit): no work while hidden
          gd._dtMode = "stale";
          gd._dtSig = "";
          return Promise.resolve(gd);
        }
        if (st.on) { lectureStyle(gd, data, layout); gd._dtMode = modeOf(gd); }
        gd._dtSig = sig;
        const out = react.call(this, gd, data, layout, config);
        if (st.on) Promise.resolve(out).then(() => schedule());
        return out;
      }
      return react.apply(this, arguments);
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
    gd._dtSig = src.sig || "";
    // autosized: react sizes a figure on screen to its box (Plots.resize would relayout it again,
    // after a 100 ms debounce); a hidden one is drawn again when its view shows
    return P._dtReact.call(P, gd, data, layout, src.config).catch(() => null);
  }

  const viewPlots = () => [...document.querySelectorAll(".dt-lv .js-plotly-plot")].filter(shown);
  const MARGIN = 14;                              // px left free under the view

  function belowOf(el) {                          // what follows el down the page in its own column
    let below = 0;
    for (let e = el; e && e !== document.body; e = e.parentElement) {
      const r = e.getBoundingClientRect();
      let bottom = r.bottom;
      for (const s of e.parentElement ? e.parentElement.children : []) {   // a grid may place earlier ones below
        const q = s.getBoundingClientRect();
        if (s === e || s.offsetParent === null || q.height === 0) continue;
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
  // a view shows the round at once; stage steps (the tree view's own) let the other views wait
  function setView(v) { if (settle) { clearTimeout(settle); follow(); } st.view = ((v - 1 + N) % N) + 1; show(); schedule(); }
  function setStage(s) { if (settle) resettle(SETTLE_MS); st.stage = s; show(); schedule(); }
  function toggle(on) {
    st.on = on === undefined ? !st.on : on;
    if (st.on) st.view = hasRun() ? TREE_VIEW : 1;
    show();
    if (st.on) schedule();
    else for (const gd of document.querySelectorAll(".js-plotly-plot")) if (gd._dtMode && gd._dtMode !== "off") redraw(gd);
    if (st.on) window.scrollTo(0, 0);
  }
  function stepStage(d) {                         // past the commit: the next round's draft, and back
    if (!hasRun()) return;                        // no run: no rounds, no stages
    const s = st.stage + d, k = round() + (s > LAST ? 1 : s < 0 ? -1 : 0);
    if (k === round()) return setStage(s);
    if (k < 1 || k > rounds()) return;
    st.stage = s > LAST ? 0 : LAST;               // first: the round's tree is drawn for its stage once
    setRound(k);
    show();
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
    else if (k === " " || k === "Spacebar") {
      if (st.pending) { clearTimeout(settle); follow(); }   // play counts from the round on screen
      st.want = 0; st.pending = false; $("#play")?.click();
    }
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
    if (t.closest("#play, #run, #lecture-toggle")) { st.want = 0; st.pending = false; }
    if (t.closest("#lecture-toggle")) toggle();
    const tab = t.closest("#lecture-bar .dt-tab");
    if (tab) setView(parseInt(tab.dataset.view, 10));
  });
  window.addEventListener("resize", () => schedule());
  // a part of a view that settles after its fit (a table laying out its columns, a card) changes
  // the height its figures can have: fit again (a fit that changes nothing redraws nothing)
  const resized = typeof ResizeObserver === "function" ? new ResizeObserver(() => schedule()) : null;
  // the run inspected, the colouring, the slider moved by hand: the server's round is the page's again
  const leave = (e) => { if (e.isTrusted && e.target.closest?.("#focus, #colour-by, #round")) { st.want = 0; st.pending = false; } };
  document.addEventListener("input", leave, true);
  document.addEventListener("change", (e) => { leave(e); where(); share(); });

  // --- the page as it draws: the bar, the captions (round and run) and the share link -------------
  const watched = new WeakSet();
  function watch() {
    hook();
    for (const sel of ["#captions", "#share-link", "#lecture-cache"]) {
      const el = $(sel);
      if (el && !watched.has(el)) {
        watched.add(el);
        new MutationObserver(() => {
          if (sel === "#lecture-cache") return readCache();
          if (sel === "#captions" && st.pending && cached()) {   // an earlier step's cards: the round on screen's
            if (capRound() !== st.cur) writeCards(st.cur);
          } else if (sel === "#captions") st.verified = null;
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
    readCache();
    if (resized) for (const el of document.querySelectorAll(".dt-lv")) if (!watched.has(el)) { watched.add(el); resized.observe(el); }
    const bar = $("#lecture-toggle");
    if (bar && !watched.has(bar)) { watched.add(bar); show(); }
    setTimeout(watch, Plotly() && Plotly()._dtHooked && bar && $("#captions") && $("#share-link") &&
               $("#lecture-cache") ? 2000 : 200);
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
  window.dtLecture = {state: st, toggle, setView, setStage, fit: schedule, cached};
}
