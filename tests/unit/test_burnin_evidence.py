"""burnin.json, the report's burn-in section and `rackcert_burnin_*` from one judged run whose
node record was made under the FAKE NVML (a DBE planted on GPU 1 at minute 12)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from rackcert.core.runs import RunDir
from rackcert.core.ssh_target import SshTarget
from rackcert.core.stage_records import BurninRecord
from rackcert.metrics.burnin import burnin_families
from rackcert.report.assemble import assemble
from rackcert.report.html import render_html
from tests.support.fake_burnin_run import simulated_run
from tests.support.fake_nvml import Plant
from validation.bench.burnin.stage import BurninOptions
from validation.bench.burnin.stage import assemble as judge_run
from validation.bench.transport import Answer, Node


def a_run(tmp_path: Path) -> RunDir:
    import json

    rec = simulated_run(tmp_path, Plant("dbe", 12, gpu=1))
    node = Node("gpu-node1", SshTarget(host="10.0.0.1"))
    answer = Answer(0, {"gpu-node1": "burnin: started\n" + json.dumps(rec)})
    opts = BurninOptions(duration_s=1200, mix=("gpu",))
    data = judge_run([node], opts, {"gpu": answer}, [])
    spec = "metadata: {name: lab}\n"
    run = RunDir.create(tmp_path / "runs", "lab", hashlib.sha256(spec.encode()).hexdigest(), spec)
    run.write_stage("burnin", data)
    return run


def test_the_record_the_report_and_the_metrics_name_the_same_part(tmp_path: Path) -> None:
    run = a_run(tmp_path)
    rec = run.read_record("burnin")
    assert isinstance(rec, BurninRecord)
    (f,) = rec.data.findings
    assert (f.rule, f.serial, f.pci) == ("ecc_dbe", "1652322000001", "0000:37:00.0")
    # the whole series is kept, compressed: 1,200 samples a GPU
    assert len(rec.data.series()["gpu-node1"]["series"]["t"]) == 1200

    html = render_html(assemble(run))
    section = html[html.index('<section id="burnin">') : html.index('<section id="bench">')]
    assert "1652322000001" in section and "0000:37:00.0" in section and "ecc_dbe" in section
    assert section.count("<svg") == 1  # one node, one figure of three axes
    assert "sw_power_cap" in section and "not a finding" in section

    fams = {f.name: f for f in burnin_families(rec)}
    assert fams["rackcert_burnin_pass"].samples == {("lab",): 0.0}
    assert list(fams["rackcert_burnin_finding"].samples) == [
        ("lab", "ecc_dbe", "gpu-node1", "1652322000001")
    ]
    power = fams["rackcert_burnin_gpu_power_max_watts"].samples
    assert sorted(power.values()) == [699.4, 699.4]


def test_a_record_srun_forwarded_in_pieces_is_judged_whole(tmp_path: Path) -> None:
    """Slurm 22.05's srun --label forwards a task's long line in 1024-byte pieces, each on a
    line of its own (seen: every node of a 10-s burn-in under srun "did not run"); the
    pieces of the node's record, read back, are the record, and judged as it is."""
    import json

    rec = simulated_run(tmp_path, Plant("dbe", 12, gpu=1))
    line = json.dumps(rec, separators=(",", ":"))

    def cut(text: str) -> list[str]:
        return [text[i : i + 1024] for i in range(0, len(text), 1024)]

    inner = line.index('{"', len(line) // 2)  # one piece opens an inner object: passed over
    pieces = "\n".join(cut(line[:inner]) + cut(line[inner:]))
    assert pieces.count("\n") > 100, len(line)
    node = Node("gpu-node1", SshTarget(host="10.0.0.1"))
    opts = BurninOptions(duration_s=1200, mix=("gpu",))
    data = {}
    for text in (line, pieces):
        answer = Answer(0, {"gpu-node1": f"burnin: started\n{text}\nwarning: at exit\n"})
        data[text is line] = judge_run([node], opts, {"gpu": answer}, [])
    assert [f["rule"] for f in data[False]["findings"]] == ["ecc_dbe"], data[False]["findings"]
    assert data[False] == data[True]
