// The copy buttons: a button with data-copy="<id>" copies the value of the field with that id to
// the clipboard, and says so in the element named by data-copy-status. The buttons are hidden
// until this script shows them: without it, the field's text is selected and copied by hand.
(function () {
  "use strict";

  function say(status, words) {
    if (status !== null) status.textContent = words;
  }

  function copied(field) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(field.value);
    }
    field.select();
    return document.execCommand("copy") ? Promise.resolve() : Promise.reject(new Error("copy"));
  }

  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    var field = document.getElementById(button.dataset.copy);
    if (field === null) return;
    var status = document.getElementById(button.dataset.copyStatus || "");
    button.hidden = false;
    button.addEventListener("click", function () {
      copied(field).then(
        function () {
          say(status, "Copied to the clipboard.");
        },
        function () {
          field.focus();
          field.select();
          say(status, "The clipboard cannot be reached here: the text is selected: copy it with your keyboard.");
        }
      );
    });
  });
})();
