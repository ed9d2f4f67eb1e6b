// Reads a Snakemake report as a reader would: through the page the browser rendered, never through the
// data embedded in it. Appended to a copy of the report by tests/e2e/test_report.py. It opens each
// category of the menu, and for each result row shows the result (a figure: the <img> the app renders,
// once decoded; a PDF: the <iframe>; any other file: the row's download link) and its information
// panel (the caption), then writes what it saw as JSON into a new `pre` element at the end of the body
// (id cwgrpo-report-probe), which `chromium --dump-dom` prints.
(async () => {
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const seen = { categories: [], entries: [], errors: [], done: false };
  const root = () => document.querySelector("#app");
  const nav = () => root().querySelector("nav");
  const content = () => root().firstElementChild.lastElementChild; // the content pane beside the navbar
  const menuLinks = () => [...nav().querySelectorAll("ul li a")];
  const rows = () => [...nav().querySelectorAll("table tbody tr")];
  const GENERAL = ["Workflow", "Statistics", "About"];

  async function until(test, what) {
    for (let i = 0; i < 100; i++) {
      const value = test();
      if (value) return value;
      await sleep(50);
    }
    throw new Error(`timed out waiting for ${what}`);
  }

  async function openCategory(name) {
    nav().querySelector("ol li a").click(); // the breadcrumb home: back to the menu
    await until(() => menuLinks().some((a) => a.textContent.trim() === "Workflow"), "the menu");
    menuLinks().find((a) => a.textContent.trim() === name).click();
    return until(() => rows().length > 0 && rows(), `the rows of ${name}`);
  }

  try {
    await until(() => root() && nav() && menuLinks().length > 0, "the menu to render");
    seen.categories = menuLinks()
      .map((a) => a.textContent.trim())
      .filter((name) => !GENERAL.includes(name));
    for (const category of seen.categories) {
      const count = (await openCategory(category)).length;
      for (let i = 0; i < count; i++) {
        let row = (await openCategory(category))[i];
        const cells = [...row.querySelectorAll("td")];
        const view = cells[cells.length - 1].querySelector("a"); // the eye; the second link: the info panel
        const entry = { category, label: cells.slice(0, -1).map((td) => td.textContent.trim()).join(" ") };
        if (view.hasAttribute("download")) {
          entry.kind = "download";
          entry.name = view.getAttribute("download");
          entry.src = view.getAttribute("href");
        } else {
          view.click();
          const shown = await until(() => content().querySelector("img, iframe"), `the view of ${entry.label}`);
          entry.kind = shown.tagName.toLowerCase();
          entry.src = shown.getAttribute("src");
          if (entry.kind === "img") {
            // decoded: an image the browser cannot decode stays at natural size 0
            await until(() => shown.complete && shown.naturalWidth > 0, `${entry.label} to decode`);
            entry.width = shown.naturalWidth;
            entry.height = shown.naturalHeight;
          }
        }
        row = (await openCategory(category))[i];
        const cellsAgain = row.querySelectorAll("td");
        cellsAgain[cellsAgain.length - 1].querySelectorAll("a")[1].click(); // the information panel
        await until(() => nav().textContent.includes("Snakemake rule"), `the information on ${entry.label}`);
        entry.info = nav().innerText; // path, size, rule
        const items = [...nav().querySelectorAll("li")];
        const heading = items.findIndex((li) => li.textContent.trim().toLowerCase() === "path");
        entry.path = heading >= 0 ? items[heading + 1].textContent.trim() : null;
        const caption = nav().querySelector("li.prose"); // the caption, rendered from its .rst
        entry.caption = caption ? caption.innerText : null;
        seen.entries.push(entry);
      }
    }
    seen.done = true;
  } catch (err) {
    seen.errors.push(String(err && err.stack ? err.stack : err));
  }
  const out = document.createElement("pre");
  out.id = "cwgrpo-report-probe";
  out.textContent = JSON.stringify(seen);
  document.body.appendChild(out);
})();
