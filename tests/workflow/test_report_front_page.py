"""`snakemake --report`'s front page names the preset, says where Table 1 is and what † means; each
preset's report command writes into that preset's own figures folder.

The report needs its report() files to exist, not to hold anything: empty stand-ins of every output the
preset plans (from `snakemake --summary`) let the front page render without a run.
"""

from __future__ import annotations

import html
import json
import re

from tests.workflow.test_workflow import REPO, run_snakemake


def test_front_page_names_the_preset_table_1_and_the_dagger(tmp_path):
    configfile = REPO / "config" / "smoke.yaml"
    proc, out = run_snakemake(tmp_path, "--summary", configfile=configfile)
    assert proc.returncode == 0, out[-3000:]
    for line in proc.stdout.splitlines()[1:]:
        path = tmp_path / line.split("\t")[0]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    report = tmp_path / "figures" / "smoke" / "report.html"
    proc, out = run_snakemake(tmp_path, "--report", str(report), configfile=configfile)
    assert proc.returncode == 0, out[-3000:]
    found = re.search(r'var workflow_desc = "(.*?)";\s*</script>', report.read_text(encoding="utf-8"), re.S)
    assert found, "the report has no front page"
    page = json.loads(f'"{found.group(1)}"', strict=False)  # a JavaScript string literal of HTML
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", "", page)).split())
    assert "CW-GRPO replication: preset smoke" in text
    assert "Table 1 is under Table 1 (figures/smoke/table1.pdf, at step 2;" in text
    assert "† after a method in Table 1 marks a method whose training run had no learning signal" in text
