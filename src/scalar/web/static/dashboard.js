// Scalar dashboard: keeps a server-rendered page live.
// Every few seconds it asks the server for the same URL with "X-Scalar-Fragment: 1" and swaps the
// returned live part into #live. Forms marked data-live-form re-query on change (no reload), and
// "last updated" / expiry countdowns tick every second. No libraries.
(function () {
  "use strict";

  var body = document.body;
  var live = document.getElementById("live");
  var state = document.getElementById("update-state");
  var pollMs = parseInt(body.getAttribute("data-poll-ms"), 10) || 2000;
  var sequence = 0;
  var inFlight = false;
  var lastOk = Date.now();

  function formatSeconds(total) {
    var sign = total < 0 ? "-" : "";
    total = Math.floor(Math.abs(total));
    var d = Math.floor(total / 86400), h = Math.floor((total % 86400) / 3600);
    var m = Math.floor((total % 3600) / 60), s = total % 60;
    function pad(n) { return n < 10 ? "0" + n : "" + n; }
    if (d) return sign + d + "d" + pad(h) + "h";
    if (h) return sign + h + "h" + pad(m) + "m";
    if (m) return sign + m + "m" + pad(s) + "s";
    return sign + s + "s";
  }

  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-expires]").forEach(function (el) {
      var at = Date.parse(el.getAttribute("data-expires"));
      if (!isNaN(at)) {
        var left = (at - now) / 1000;
        el.textContent = left > 0 ? formatSeconds(left) : "expired";
        el.classList.toggle("soon", left < 900);
      }
    });
    var stamp = document.querySelector("[data-updated]");
    if (stamp && state) {
      var ago = (now - Date.parse(stamp.getAttribute("data-updated"))) / 1000;
      if (!isNaN(ago) && state.getAttribute("data-error") !== "1") {
        state.textContent = "(" + formatSeconds(Math.max(0, ago)) + " ago)";
      }
    }
  }

  function setUpdated(iso) {
    var stamp = document.querySelector("[data-updated]");
    if (!stamp || !iso) return;
    stamp.setAttribute("data-updated", iso);
    var d = new Date(iso);
    if (!isNaN(d.getTime())) stamp.textContent = d.toISOString().substring(11, 19);
  }

  function showError(message) {
    if (!state) return;
    state.setAttribute("data-error", "1");
    state.textContent = message;
    body.classList.add("offline");
  }

  function clearError() {
    if (!state) return;
    state.removeAttribute("data-error");
    body.classList.remove("offline");
  }

  function refresh() {
    if (!live || inFlight) return;
    inFlight = true;
    var mine = ++sequence;
    fetch(window.location.pathname + window.location.search, {
      headers: { "X-Scalar-Fragment": "1", "Accept": "text/html" },
      credentials: "same-origin",
      cache: "no-store"
    }).then(function (response) {
      if (response.status >= 500) throw new Error("the server answered " + response.status);
      return response.text();
    }).then(function (html) {
      if (mine !== sequence) return;
      var holder = document.createElement("div");
      holder.innerHTML = html;
      var fragment = holder.querySelector("#live-fragment");
      if (!fragment) throw new Error("unexpected answer");
      live.innerHTML = fragment.innerHTML;
      live.setAttribute("data-rendered-at", fragment.getAttribute("data-rendered-at") || "");
      setUpdated(fragment.getAttribute("data-rendered-at"));
      lastOk = Date.now();
      clearError();
      tick();
      document.dispatchEvent(new CustomEvent("scalar:updated"));
    }).catch(function (error) {
      var since = formatSeconds((Date.now() - lastOk) / 1000);
      showError("(not updating for " + since + ": " + error.message + "; retrying)");
    }).then(function () {
      inFlight = false;
    });
  }

  function queryOf(form) {
    var params = new URLSearchParams();
    new FormData(form).forEach(function (value, key) {
      if (String(value).trim() !== "") params.set(key, String(value).trim());
    });
    var text = params.toString();
    return text ? "?" + text : "";
  }

  document.querySelectorAll("form[data-live-form]").forEach(function (form) {
    var timer = null;
    function apply() {
      var next = window.location.pathname + queryOf(form);
      window.history.replaceState(null, "", next);
      inFlight = false;
      sequence++;
      refresh();
    }
    function soon() {
      clearTimeout(timer);
      timer = setTimeout(apply, 250);
    }
    form.addEventListener("input", soon);
    form.addEventListener("change", soon);
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      apply();
    });
  });

  setInterval(tick, 1000);
  setInterval(function () {
    if (!document.hidden) refresh();
  }, pollMs);
  tick();
})();
