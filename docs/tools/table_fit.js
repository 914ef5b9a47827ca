// Loaded into a built page by tests/test_docs_site.py (headless Chromium, --dump-dom): for every
// table of the article, whether any of it is cut off at this window width. A table is clipped when
// it reaches past the window, when an ancestor that hides or scrolls its overflow is narrower than
// what it holds (the reader would have to scroll sideways to see the table's last columns), or when
// a cell hides part of its own content. The answer is written into the DOM as JSON.
(function () {
  const viewport = document.documentElement.clientWidth;
  const report = [];
  document.querySelectorAll("article table").forEach(function (table, index) {
    const box = table.getBoundingClientRect();
    const reasons = [];
    if (box.right > viewport + 1 || box.left < -1) reasons.push("past the window");
    for (let el = table.parentElement; el && el !== document.body; el = el.parentElement) {
      const style = getComputedStyle(el);
      if (style.overflowX !== "visible" && el.scrollWidth > el.clientWidth + 1) {
        reasons.push("scrolls inside " + (el.className || el.tagName).toString().split(" ")[0]
                     + " (" + el.scrollWidth + " px in " + el.clientWidth + " px)");
      }
    }
    table.querySelectorAll("th, td").forEach(function (cell) {
      if (getComputedStyle(cell).overflowX !== "visible" && cell.scrollWidth > cell.clientWidth + 1) {
        reasons.push("a cell hides its text");
      }
    });
    const section = table.closest("section");
    report.push({index: index, section: section ? section.id : "", width: Math.round(box.width),
                 right: Math.round(box.right), clipped: reasons});
  });
  const out = document.createElement("pre");
  out.id = "varorder-table-fit";
  out.textContent = JSON.stringify({viewport: viewport, tables: report});
  document.body.appendChild(out);
})();
