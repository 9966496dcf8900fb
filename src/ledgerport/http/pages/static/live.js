// Live rows: a table marked data-live-stream="<stream URL>" follows the app's live stream
// (EventSource, which resumes with Last-Event-ID after a dropped connection): each delivery
// attempt or run of this page's webhook or function (data-live-webhook, data-live-function) that
// ends comes to the top of the table, replacing its row if shown. The page is whole without this
// script: reloading it shows the same rows. The note data-live-note names is shown while live.
// Under Node (module.exports) it only exports the row's words, for the tests to compare with
// the server's.
(function () {
  "use strict";

  // What a delivery's row says of its last answer, word for word as the server-rendered rows
  // (console/webhook_words.py: response_or_error, tested against it case by case).
  var ERROR_CHARS_SHOWN = 120;

  function shortened(text) {
    var chars = Array.from(text);
    if (chars.length <= ERROR_CHARS_SHOWN) return text;
    return chars.slice(0, ERROR_CHARS_SHOWN - 1).join("").replace(/\s+$/, "") + "\u2026";
  }

  function after(text, prefix) {
    return text.slice(prefix.length).trim();
  }

  function whatHappened(code, error) {
    if (error === null || error === undefined) {
      return code !== null && code !== undefined && !(code >= 200 && code < 300)
        ? "Answered HTTP " + code
        : "";
    }
    var text = error.trim();
    var words = text;
    if (text.startsWith("timeout:")) {
      words = "Timed out: " + after(text, "timeout:");
    } else if (text.startsWith("HTTP ")) {
      words = "Answered " + text;
    } else if (text.startsWith("connection error:")) {
      var cause = after(text, "connection error:");
      var lowered = cause.toLowerCase();
      if (lowered.indexOf("refused") >= 0 || lowered.indexOf("all attempts to connect") >= 0) {
        words = "Connection refused";
      } else if (lowered.indexOf("resolve") >= 0) {
        words = "Name not resolved: " + cause;
      } else {
        words = "Connection failed: " + cause;
      }
    } else if (text.startsWith("not sent:")) {
      words = "Not sent: " + after(text, "not sent:");
    }
    return shortened(words);
  }

  function responseOrError(code, error) {
    var words = whatHappened(code, error);
    if (words) return words;
    return code === null || code === undefined ? "" : String(code);
  }

  if (typeof module === "object" && module.exports) {
    module.exports = { responseOrError: responseOrError };
    return;
  }

  var UNITS = [
    ["day", 86400],
    ["hour", 3600],
    ["minute", 60],
  ];

  function words(iso) {
    if (!iso) return "";
    var seconds = (Date.now() - Date.parse(iso)) / 1000;
    var span = Math.abs(seconds);
    if (span < 45) return "just now";
    for (var i = 0; i < UNITS.length; i++) {
      if (span >= UNITS[i][1] * 0.75 || i === UNITS.length - 1) {
        var count = Math.max(1, Math.round(span / UNITS[i][1]));
        var text = count + " " + UNITS[i][0] + (count === 1 ? "" : "s");
        return seconds > 0 ? text + " ago" : "in " + text;
      }
    }
    return "";
  }

  function element(name, attributes, children) {
    var node = document.createElement(name);
    Object.keys(attributes || {}).forEach(function (key) {
      node.setAttribute(key, attributes[key]);
    });
    (children || []).forEach(function (child) {
      node.append(child);
    });
    return node;
  }

  function cell(label, className, children) {
    var attributes = { "data-label": label };
    if (className) attributes["class"] = className;
    return element("td", attributes, children);
  }

  function time(iso) {
    if (!iso) return "";
    return element("time", { datetime: iso.replace(/\.\d+Z$/, "Z"), title: iso }, [words(iso)]);
  }

  function eventType(type) {
    var parts = [];
    type.split(".").forEach(function (part, index, all) {
      parts.push(part);
      if (index < all.length - 1) parts.push(".", element("wbr"));
    });
    return parts;
  }

  function badge(kind, text) {
    return element("span", { class: "badge badge-" + kind }, [text]);
  }

  function idLink(href, id) {
    return element("a", { href: href }, [element("code", {}, [id])]);
  }

  function deliveryRow(table, d) {
    var kind = d.test
      ? [" ", badge("test", "Test")]
      : [" ", element("code", { class: "event-id" }, [d.eventId || ""])];
    var next = d.status === "queued" || d.status === "retrying" ? time(d.nextAttemptAt) : "";
    return element("tr", { id: d.id }, [
      cell("Delivery", "id", [idLink(table.dataset.liveBase + "/deliveries/" + d.id, d.id)]),
      cell("Event", "", [element("div", { class: "stacked" }, eventType(d.type).concat(kind))]),
      cell("Status", "nowrap", [badge(d.status, d.status)]),
      cell("Attempts", "num", [String(d.attempts)]),
      cell("Response or error", "wh-error", [responseOrError(d.responseCode, d.lastError)]),
      cell("Next attempt", "nowrap", [next]),
      cell("Created", "nowrap", [time(d.createdAt)]),
    ]);
  }

  function runRow(table, r) {
    var marks = [];
    if (r.eventId === null) marks.push(" ", badge("test", "Test"));
    if (r.replayOf) marks.push(" ", badge("plain", "Replay"));
    var error = r.outputDroppedAt
      ? [element("span", { class: "muted" }, ["Output dropped for the storage quota"])]
      : [r.error || ""];
    return element("tr", { id: r.id }, [
      cell("Run", "id", [idLink(table.dataset.liveBase + "/runs/" + r.id, r.id)]),
      cell("Event", "", [element("div", { class: "stacked" }, eventType(r.type).concat(marks))]),
      cell("Status", "nowrap", [badge(r.status, r.status)]),
      cell("Version", "num", [r.version ? String(r.version) : ""]),
      cell("Duration", "num", [r.durationMs === null ? "" : r.durationMs.toFixed(1) + " ms"]),
      cell("Error", "wide", error),
      cell("Created", "nowrap", [time(r.createdAt)]),
    ]);
  }

  function follow(table) {
    var body = table.tBodies[0];
    var webhook = table.dataset.liveWebhook;
    var fn = table.dataset.liveFunction;
    var note = document.getElementById(table.dataset.liveNote || "");
    var source = new EventSource(table.dataset.liveStream);

    function show(item, row) {
      var shown = document.getElementById(item.id);
      if (shown !== null && shown.parentNode === body) body.removeChild(shown);
      body.querySelectorAll("td.empty").forEach(function (empty) {
        body.removeChild(empty.parentNode);
      });
      body.insertBefore(row, body.firstChild);
      while (body.rows.length > Number(table.dataset.liveRows || 100)) {
        body.removeChild(body.lastChild);
      }
    }

    source.addEventListener("open", function () {
      if (note !== null) note.hidden = false;
    });
    source.addEventListener("delivery", function (message) {
      var d = JSON.parse(message.data);
      if (webhook && d.webhookId === webhook) show(d, deliveryRow(table, d));
    });
    source.addEventListener("run", function (message) {
      var r = JSON.parse(message.data);
      if (fn && r.functionId === fn) show(r, runRow(table, r));
    });
    window.addEventListener("pagehide", function () {
      source.close();
    });
  }

  if (!("EventSource" in window)) return;
  document.querySelectorAll("table[data-live-stream]").forEach(follow);
})();
