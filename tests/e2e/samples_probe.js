// Reads the sample browser (`cwgrpo samples`) as a reader would: it clicks each filter of the page in turn
// and records, after each, the samples the browser lays out (not merely those without `hidden`), their flags
// and verdict badges, the page's own count, and the overview rows left. Appended to a copy of the page by
// tests/e2e/test_samples_page.py; writes its record as JSON into a new `pre` (id cwgrpo-samples-probe),
// which `chromium --dump-dom` prints.
(() => {
  const seen = { steps: [], errors: [], done: false };
  const laidOut = (el) => el.offsetParent !== null;
  function snap(name) {
    const shown = [...document.querySelectorAll("article.sample")].filter(laidOut);
    seen.steps.push({
      name,
      count: document.getElementById("count").textContent,
      rows: [...document.querySelectorAll("#cells tbody tr")].filter(laidOut).length,
      samples: shown.map((a) => ({
        ...a.dataset,
        verdicts: [...a.querySelectorAll(".verdict")].map((v) => v.textContent),
      })),
    });
  }
  try {
    const form = document.getElementById("filters");
    const change = (el) => el.dispatchEvent(new Event("change", { bubbles: true }));
    snap("all");
    for (const box of form.querySelectorAll("input[type=checkbox]")) {
      if (box.disabled) continue;
      box.click();
      snap(box.name);
      box.click();
    }
    for (const select of form.querySelectorAll("select")) {
      for (const option of [...select.options].slice(1)) {
        select.value = option.value;
        change(select);
        snap(`${select.name}=${option.value}`);
      }
      select.value = "";
      change(select);
    }
    const wrong = form.querySelector("input[name=wrong]");
    const truncated = form.querySelector("input[name=truncated]");
    wrong.click();
    truncated.click();
    snap("wrong+truncated");
    wrong.click();
    truncated.click();
    snap("cleared");
    seen.title = document.title;
    seen.completions = [...document.querySelectorAll("pre.completion")].map((p) => p.textContent);
    seen.issues = [...document.querySelectorAll("#issues li")].map((li) => li.textContent);
    seen.done = true;
  } catch (err) {
    seen.errors.push(String(err && err.stack ? err.stack : err));
  }
  const out = document.createElement("pre");
  out.id = "cwgrpo-samples-probe";
  out.textContent = JSON.stringify(seen);
  document.body.appendChild(out);
})();
