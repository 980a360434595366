// The console's only script besides htmx: "select all" boxes of the bulk-action tables.
document.addEventListener("change", function (event) {
  var box = event.target;
  if (!box.matches || !box.matches("input[data-select-all]")) return;
  var table = box.closest("table");
  table.querySelectorAll("input[type=checkbox][name]").forEach(function (item) {
    item.checked = box.checked;
  });
});
