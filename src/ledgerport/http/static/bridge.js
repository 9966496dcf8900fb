// The app bridge: hands session tokens to the embedded app's frame on request.
// The frame posts {type: "ledgerport:session-token", id} to its parent; the answer is
// {type: "ledgerport:session-token", id, sessionToken, expiresAt} or {..., error}, posted only
// to the app's own origin.
(function () {
  "use strict";
  var frame = document.getElementById("app-frame");
  var origin = frame.dataset.origin;
  var query = "app_id=" + encodeURIComponent(frame.dataset.appId) +
    "&business_id=" + encodeURIComponent(frame.dataset.businessId);
  window.addEventListener("message", function (event) {
    if (event.source !== frame.contentWindow || event.origin !== origin) return;
    var message = event.data;
    if (!message || message.type !== "ledgerport:session-token") return;
    fetch("/bridge/session-token?" + query, {
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
      })
      .then(function (answer) {
        answer.type = "ledgerport:session-token";
        answer.id = message.id;
        frame.contentWindow.postMessage(answer, origin);
      });
  });
})();
