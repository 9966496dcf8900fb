// The app bridge: hands session tokens to the framed app page or extension.
// The frame posts {type: "ledgerport:session-token", id} to its parent; the answer is
// {type: "ledgerport:session-token", id, sessionToken, expiresAt, context} or {..., error},
// posted only to the app's own origin. Once the frame has asked, a fresh token follows every
// RENEW_MS (id null) while the page is open, before the last one expires (they live 50 s).
// context: {businessId, target, recordId} (target and recordId empty on an app's own page).
(function () {
  "use strict";
  var RENEW_MS = 40000;
  var frame = document.getElementById("app-frame");
  var origin = frame.dataset.origin;
  var context = {
    businessId: frame.dataset.businessId,
    target: frame.dataset.target || "",
    recordId: frame.dataset.recordId || "",
  };
  var query = "app_id=" + encodeURIComponent(frame.dataset.appId) +
    "&business_id=" + encodeURIComponent(frame.dataset.businessId);
  var renewing = null;

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
    if (event.source !== frame.contentWindow || event.origin !== origin) return;
    var message = event.data;
    if (!message || message.type !== "ledgerport:session-token") return;
    send(message.id);
    if (renewing === null) {
      renewing = window.setInterval(function () { send(null); }, RENEW_MS);
    }
  });
})();
