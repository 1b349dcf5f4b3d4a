// The dashboard's only script (no dependencies, served by the crate):
// - live refresh: fetches the page and swaps its data regions ([data-live]) in place; pauses, and says
//   so, while the user is typing, has rows selected or a details block open, or the tab
//   is hidden; a toggle turns it off (remembered per browser);
// - relative times ("3 min ago"), the exact time staying in the tooltip (not for
//   time.exact: the job's timeline);
// - dark mode: follows the system until toggled (remembered);
// - keyboard shortcuts: "/" search, "j"/"k" move through rows, Enter opens, "?" help;
// - select-all, confirmation prompts, "go back" links.
(function () {
  "use strict";
  var store = {
    get: function (k) { try { return localStorage.getItem(k); } catch (e) { return null; } },
    set: function (k, v) { try { localStorage.setItem(k, v); } catch (e) { /* private mode */ } }
  };

  // --- theme ---
  var root = document.documentElement;
  function applyTheme() {
    var chosen = store.get("jobs-dashboard-theme");
    if (chosen === "dark" || chosen === "light") root.setAttribute("data-theme", chosen);
    else root.removeAttribute("data-theme");
  }
  applyTheme();
  function isDark() {
    var t = root.getAttribute("data-theme");
    if (t) return t === "dark";
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  }

  // --- relative times ---
  function relative(date) {
    var s = Math.round((date.getTime() - Date.now()) / 1000), a = Math.abs(s), text;
    if (a < 5) return "just now";
    if (a < 60) text = a + " s";
    else if (a < 3600) text = Math.round(a / 60) + " min";
    else if (a < 86400) text = Math.round(a / 3600) + " h";
    else text = Math.round(a / 86400) + " d";
    return s < 0 ? text + " ago" : "in " + text;
  }
  function relativeTimes(scope) {
    scope.querySelectorAll("time[datetime]:not(.exact)").forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      if (!isNaN(d.getTime())) el.textContent = relative(d);
    });
  }

  // --- per-content behaviour (run again after each live swap) ---
  function wire(scope) {
    relativeTimes(scope);
    var all = scope.querySelector("#select-all");
    if (all) {
      all.addEventListener("change", function () {
        scope.querySelectorAll("input.select").forEach(function (box) { box.checked = all.checked; });
        status();
      });
    }
    scope.querySelectorAll("input.select").forEach(function (box) { box.addEventListener("change", status); });
    scope.querySelectorAll("form[data-confirm]").forEach(function (form) {
      form.addEventListener("submit", function (event) {
        if (!window.confirm(form.getAttribute("data-confirm"))) event.preventDefault();
      });
    });
    scope.querySelectorAll("a[data-back]").forEach(function (a) {
      a.addEventListener("click", function (event) {
        if (history.length > 1) { event.preventDefault(); history.back(); }
      });
    });
  }

  // --- live refresh ---
  var key = "jobs-dashboard-live";
  var button = document.getElementById("live-toggle");
  var period = parseInt(document.body.getAttribute("data-refresh") || "5", 10) * 1000;
  var offHere = document.body.getAttribute("data-live-off");
  function enabled() { return !offHere && store.get(key) !== "off"; }
  // Why refreshing would lose what the user is doing, or null.
  function holdReason() {
    var el = document.activeElement;
    if (el && (el.tagName === "TEXTAREA" || el.tagName === "SELECT" ||
        (el.tagName === "INPUT" && el.type !== "checkbox" && el.type !== "radio" && el.type !== "submit" && el.type !== "button"))) {
      return "paused while you type";
    }
    var selected = document.querySelectorAll("input.select:checked").length;
    if (selected > 0) return "paused: " + selected + " selected";
    if (document.querySelector("main details[open]")) return "paused while details are open";
    var text = window.getSelection && String(window.getSelection());
    if (text) return "paused while text is selected";
    return null;
  }
  function status() {
    if (!button) return;
    var reason = enabled() ? holdReason() : null;
    button.textContent = offHere ? "Live: " + offHere : !enabled() ? "Live: off" : reason ? "Live: " + reason : "Live: on";
    button.setAttribute("data-state", !enabled() ? "off" : reason ? "held" : "on");
    button.setAttribute("aria-pressed", enabled() ? "true" : "false");
  }
  if (button) {
    button.addEventListener("click", function () {
      store.set(key, enabled() ? "off" : "on");
      status();
    });
  }
  document.addEventListener("focusin", status);
  document.addEventListener("focusout", function () { setTimeout(status, 0); });
  document.addEventListener("selectionchange", status);
  document.addEventListener("toggle", status, true);
  var inFlight = false;
  function refresh() {
    status();
    if (inFlight || !enabled() || holdReason() || document.visibilityState !== "visible") return;
    var main = document.getElementById("main");
    if (!main || !window.fetch || !window.DOMParser) return;
    inFlight = true;
    fetch(location.href, { credentials: "same-origin", headers: { "x-live-refresh": "1" } })
      .then(function (r) { if (!r.ok) throw new Error(String(r.status)); return r.text(); })
      .then(function (html) {
        if (holdReason()) return; // the user started something meanwhile
        var doc = new DOMParser().parseFromString(html, "text/html");
        // Only the data regions change: forms, focus and scroll stay as the user left them.
        document.querySelectorAll("[data-live][id]").forEach(function (old) {
          var fresh = doc.getElementById(old.id);
          if (!fresh) return;
          old.replaceWith(fresh);
          wire(fresh);
        });
        main.setAttribute("data-refreshed", new Date().toISOString());
        if (button) button.removeAttribute("title");
      })
      .catch(function (e) {
        if (button) { button.textContent = "Live: retrying"; button.title = "the last refresh failed: " + e.message; }
      })
      .then(function () { inFlight = false; });
  }
  setInterval(refresh, period);

  // --- dark mode toggle ---
  var theme = document.getElementById("theme-toggle");
  function themeLabel() { if (theme) theme.textContent = isDark() ? "Light" : "Dark"; }
  if (theme) {
    theme.addEventListener("click", function () {
      store.set("jobs-dashboard-theme", isDark() ? "light" : "dark");
      applyTheme();
      themeLabel();
    });
  }
  themeLabel();

  // --- keyboard shortcuts ---
  var help = document.getElementById("shortcuts");
  var cursor = -1;
  function rows() { return Array.prototype.slice.call(document.querySelectorAll("main table tbody tr")).filter(function (r) { return r.querySelector("a"); }); }
  function move(by) {
    var list = rows();
    if (!list.length) return;
    if (cursor >= 0 && list[cursor]) list[cursor].classList.remove("cursor");
    cursor = Math.max(0, Math.min(list.length - 1, cursor + by));
    list[cursor].classList.add("cursor");
    list[cursor].scrollIntoView({ block: "nearest" });
  }
  document.addEventListener("keydown", function (event) {
    var el = event.target;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (el && (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT")) {
      if (event.key === "Escape") el.blur();
      return;
    }
    if (event.key === "/") {
      var search = document.getElementById("search") || document.querySelector("#filters input[name=q]");
      if (search) { event.preventDefault(); search.focus(); }
      else location.href = document.body.getAttribute("data-base") + "/jobs#search";
    } else if (event.key === "j") { move(1); }
    else if (event.key === "k") { move(-1); }
    else if (event.key === "Enter" && cursor >= 0) {
      var row = rows()[cursor], link = row && row.querySelector("a");
      if (link) link.click();
    } else if (event.key === "?") {
      if (help) help.hidden = !help.hidden;
    } else if (event.key === "Escape") {
      if (help) help.hidden = true;
    }
  });

  wire(document);
  status();
})();
