"""Secrets never reach the report: a seeded password and key line are in no produced file.

The run's records are made to carry the vCenter password and a line of the SSH key (as a
careless fact or task message might), then the real CLI builds every format, verifies, diffs
and serves it. Every byte that comes out is searched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request
import uuid

import pytest

from tests.support.plugins.report import SPEC, start_serve, stop, write_run

KEY_LINE = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"


def _plant(run, secret: str) -> None:
    """Put the secrets where stage records could plausibly carry them."""
    facts = json.loads((run.path / "facts.json").read_text())
    facts["nodes"]["mn-node1"]["kernel"] = f"5.4.0-135-generic PASSWORD={secret}"
    facts["nodes"]["mn-node2"]["os"]["name"] = f"Ubuntu {KEY_LINE}"
    (run.path / "facts.json").write_text(json.dumps(facts))
    validate = json.loads((run.path / "validate.json").read_text())
    result = validate["data"]["results"][0]
    result.update(status="fail", observed=f"login with {secret} refused", reason=KEY_LINE)
    (run.path / "validate.json").write_text(json.dumps(validate))
    bench = json.loads((run.path / "bench.json").read_text())
    bench["data"]["environment"]["platform"] = f"Linux {secret}"
    bench["data"]["storage"]["path"] = f"/mnt/{secret}"
    (run.path / "bench.json").write_text(json.dumps(bench))
    configure = json.loads((run.path / "configure.json").read_text())
    configure["data"]["hosts"]["mn-node3"]["failures"] = [
        {"task": "ssh_trust", "role": "ssh_trust", "message": f"key {KEY_LINE} pass {secret}"}
    ]
    (run.path / "configure.json").write_text(json.dumps(configure))


def test_seeded_secrets_appear_in_no_output(tmp_path):
    secret = f"Vc-{uuid.uuid4().hex[:12]}-pw!"
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    key = (
        "-----BEGIN OPENSSH PRIVATE KEY-----\n" + KEY_LINE + "\n-----END OPENSSH PRIVATE KEY-----\n"
    )
    (home / ".ssh" / "rackcert_ed25519").write_text(key)
    root = tmp_path / "runs"
    run_a, run_b = write_run(root), write_run(root, resnet_scale=0.9)
    _plant(run_a, secret)
    _plant(run_b, secret)
    env = {**os.environ, "RACKCERT_VCENTER_PASSWORD": secret, "HOME": str(home), "COLUMNS": "200"}
    cli = [sys.executable, "-m", "rackcert.cli"]
    outputs: list[str] = []
    for args in (
        ["report", str(run_a.path), "--format", "json,html,pdf"],
        ["report", str(run_b.path), "--format", "json,html", "--json"],
        ["report", "verify", str(run_a.path)],
        ["report", "diff", str(run_a.path), str(run_b.path)],
        ["runs", "list", "--runs-dir", str(root), "--json"],
    ):
        done = subprocess.run(cli + args, capture_output=True, text=True, env=env, timeout=300)
        assert "Traceback" not in done.stderr, done.stderr
        outputs += [done.stdout, done.stderr]
    assert "********" in (run_a.path / "run.json").read_text()  # it was there, and masked

    produced = [
        run_a.path / n
        for n in ("run.json", "report.html", "report.pdf", "report.json", "MANIFEST.sha256")
    ]
    produced += [run_b.path / n for n in ("run.json", "report.html", "report.json")]
    pdf_text = subprocess.run(
        ["pdftotext", str(run_a.path / "report.pdf"), "-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "Checks by node" in pdf_text
    outputs.append(pdf_text)

    os.environ["RACKCERT_VCENTER_PASSWORD"] = secret  # the server process inherits it
    old_home = os.environ.get("HOME")
    os.environ["HOME"] = str(home)
    try:
        proc, base = start_serve(root)
    finally:
        if old_home is not None:
            os.environ["HOME"] = old_home
        del os.environ["RACKCERT_VCENTER_PASSWORD"]
    try:
        listing = json.loads(urllib.request.urlopen(base + "api/runs", timeout=60).read())
        pages = [base, base + "api/runs"]
        for item in listing:
            # serve resolves no secrets (a planted spec must not make it open files): what it
            # shows was masked when written. The planted facts.json and the live view rendered
            # from it are raw by construction here, so only the built report is searched.
            pages += [base + item["report"].lstrip("/"), base + item["files"].lstrip("/")]
            pages += [base + link.lstrip("/") for link in item["links"].values()]
        for url in pages:
            outputs.append(
                urllib.request.urlopen(url, timeout=120).read().decode("utf-8", "replace")
            )
    finally:
        stop(proc)

    for path in produced:
        data = path.read_bytes()
        for needle in (secret, KEY_LINE):
            assert needle.encode() not in data, f"{needle[:8]}... in {path.name}"
    for text in outputs:
        assert secret not in text and KEY_LINE not in text


HOSTILE = "Vc&<b>\"q'-{}"  # every character HTML escaping changes


def _page_text(html_text: str) -> str:
    """What a browser shows: the text and attribute values, entities decoded."""
    from html.parser import HTMLParser

    parts: list[str] = []

    class Text(HTMLParser):
        def handle_data(self, data: str) -> None:
            parts.append(data)

        def handle_starttag(self, tag, attrs) -> None:
            parts.extend(v or "" for _k, v in attrs)

    Text(convert_charrefs=True).feed(html_text)
    return "\n".join(parts)


def test_secret_with_html_characters_is_masked_in_report_and_pdf(tmp_path):
    """Scrubbing after escaping missed `&amp;`-forms: the password showed in clear."""
    secret = HOSTILE.format(uuid.uuid4().hex[:8])
    run = write_run(tmp_path / "runs")
    _plant(run, secret)
    env = {
        **os.environ,
        "RACKCERT_VCENTER_PASSWORD": secret,
        "HOME": str(tmp_path),
        "COLUMNS": "200",
    }
    done = subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "report", str(run.path), "--format", "html,pdf"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    page = (run.path / "report.html").read_text()
    shown = _page_text(page)
    assert "Checks by node" in shown
    assert secret not in shown, "the password is visible in report.html"
    assert "login with ******** refused" in shown
    pdf_text = subprocess.run(
        ["pdftotext", str(run.path / "report.pdf"), "-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "Checks by node" in pdf_text and secret not in pdf_text


def test_live_render_masks_the_escaped_form(tmp_path):
    """/live renders in memory: the record is scrubbed before the template escapes it."""
    from rackcert.core.secrets import Redactor
    from rackcert.report.assemble import assemble
    from rackcert.report.html import render_html

    secret = HOSTILE.format(uuid.uuid4().hex[:8])
    run = write_run(tmp_path / "runs")
    _plant(run, secret)
    redactor = Redactor()
    redactor.add(secret)
    shown = _page_text(render_html(assemble(run), redactor))
    assert "Linux ********" in shown and secret not in shown


@pytest.mark.parametrize("value", ["abc", "x"])
def test_secret_too_short_to_mask_is_refused(tmp_path, value):
    """A 3-character password could never be masked: one error line, exit 2, no traceback."""
    env = {**os.environ, "RACKCERT_VCENTER_PASSWORD": value, "RACKCERT_RUNS_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "rackcert.cli", "plan", str(SPEC)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode != 0
    assert "shorter than 4 characters" in done.stderr + done.stdout
    assert "Traceback" not in done.stderr
    assert len((done.stderr + done.stdout).strip().splitlines()) == 1


def test_password_file_must_be_a_small_regular_file(tmp_path):
    """A FIFO as password_file hung the reader; a huge file is no password."""
    from rackcert.core.errors import InputError
    from rackcert.core.secrets import resolve_secret

    fifo = tmp_path / "pw.fifo"
    os.mkfifo(fifo)
    outcome: list[BaseException | str] = []

    def read_fifo() -> None:
        try:
            outcome.append(resolve_secret(None, str(fifo), "vCenter password"))
        except BaseException as exc:  # noqa: BLE001 - the thread reports what it got
            outcome.append(exc)

    reader = threading.Thread(target=read_fifo, daemon=True)
    reader.start()
    reader.join(10)
    assert outcome, "reading a FIFO as password_file hangs"
    assert isinstance(outcome[0], InputError) and "not a regular file" in str(outcome[0])
    big = tmp_path / "big"
    big.write_bytes(b"x" * (1 << 20))
    with pytest.raises(InputError, match="larger than"):
        resolve_secret(None, str(big), "vCenter password")
    good = tmp_path / "pw"
    good.write_text("long-enough-pw\n")
    assert resolve_secret(None, str(good), "vCenter password") == "long-enough-pw"
