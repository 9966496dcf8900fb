// The app bridge: hands session tokens to the framed app page or extension.
// The frame posts {type: "ledgerport:session-token", id} to its parent; the answer is
// {type: "ledgerport:session-token", id, sessionToken, expiresAt, context} or {..., error},
// posted only to the app's own origin. Once the frame has asked, a fresh token follows every
// RENEW_MS (id null) while the page is open, before the last one expires (they live 50 s).
// context: {businessId, target, recordId} (target and recordId empty on an app's own page).
// The script is loaded before the frame it serves (so the frame cannot ask before anyone
// listens); it finds the frame, #app-frame, when the first message comes.
(function () {
  "use strict";
  var RENEW_MS = 40000;
  var frame = null;
  var origin = null;
  var context = null;
  var query = null;
  var renewing = null;

  function bind() {
    frame = document.getElementById("app-frame");
    if (frame === null) return false;
    origin = frame.dataset.origin;
    context = {
      businessId: frame.dataset.businessId,
      target: frame.dataset.target || "",
      recordId: frame.dataset.recordId || "",
    };
    query = "app_id=" + encodeURIComponent(frame.dataset.appId) +
      "&business_id=" + encodeURIComponent(frame.dataset.businessId);
    return true;
  }

  function token() {
    return fetch("/bridge/session-token?" + query, {
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    })
      .then(function (response) {
        return response.json().then(function (body) {
          return response.ok
            ? { sessionToken: body.sessionToken, expiresAt: body.expiresAt }
            : { error: body.message || "session token refused" };
        });
      })
      .catch(function () {
        return { error: "session token request failed" };
      });
  }

  function send(id) {
    return token().then(function (answer) {
      answer.type = "ledgerport:session-token";
      answer.id = id;
      answer.context = context;
      frame.contentWindow.postMessage(answer, origin);
    });
  }

  window.addEventListener("message", function (event) {
    if (frame === null && !bind()) return;
    if (event.source !== frame.contentWindow || event.origin !== origin) return;
    var message = event.data;
    if (!message || message.type !== "ledgerport:session-token") return;
    send(message.id);
    if (renewing === null) {
      renewing = window.setInterval(function () { send(null); }, RENEW_MS);
    }
  });
})();
