// Live refresh (with a pause control remembered per browser), select-all, and
// confirmation prompts. No dependencies.
(function () {
  "use strict";
  var key = "jobs-dashboard-live";
  var button = document.getElementById("live-toggle");
  var period = parseInt(document.body.getAttribute("data-refresh") || "5", 10) * 1000;
  function live() { return localStorage.getItem(key) !== "off"; }
  function label() { if (button) button.textContent = live() ? "Live: on" : "Live: paused"; }
  if (button) {
    button.addEventListener("click", function () {
      localStorage.setItem(key, live() ? "off" : "on");
      label();
    });
  }
  label();
  function busy() {
    var el = document.activeElement;
    if (el && (el.tagName === "INPUT" || el.tagName === "SELECT" || el.tagName === "TEXTAREA")) return true;
    return document.querySelector("input.select:checked, details[open]") !== null;
  }
  setInterval(function () {
    if (live() && !busy() && document.visibilityState === "visible") location.reload();
  }, period);
  var all = document.getElementById("select-all");
  if (all) {
    all.addEventListener("change", function () {
      document.querySelectorAll("input.select").forEach(function (box) { box.checked = all.checked; });
    });
  }
  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (!confirm(form.getAttribute("data-confirm"))) event.preventDefault();
    });
  });
})();
