"""An SSH signature over a run's MANIFEST.sha256, bound to the run: who vouched for which run.

The manifest alone proves only that files match it, and anyone who can write the
run directory can recompute it. A signature by a key the auditor trusts closes
that gap. What is signed is a short statement, MANIFEST.sha256.signed:

    rackcert signed run 1
    rack: r750xa-4node
    run: 20260101T000000.000000Z
    manifest-sha256: <hex of MANIFEST.sha256>

(`ssh-keygen -Y sign -n rackcert` over it, kept in MANIFEST.sha256.sig). Signing the
manifest alone let a signed run copied to a later timestamp still verify, and be listed
as the newest; verify now compares the rack and run id signed with the directory's own
(`<runs>/<rack>/<run id>`), and the manifest digest with the manifest, and prints what
was signed. Neither file is in the manifest; the manifest covers every other file.

Example:
    sign(run.path, Path("~/.ssh/rackcert_signing"))
    signed = verify_signature(run.path, Path("auditor/rackcert_signing.pub"))
    signed.rack, signed.run, signed.signer
"""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rackcert.core.childenv import child_env
from rackcert.core.errors import InputError, RecordError
from rackcert.core.runs import atomic_write_bytes, read_capped_bytes
from rackcert.core.untrusted import visible
from rackcert.report.manifest import MANIFEST_NAME, SIGNATURE_NAME, STATEMENT_NAME

NAMESPACE = "rackcert"  # ssh-keygen -n: a signature for rackcert runs and nothing else
_IDENTITY = "rackcert-signer"
_FORM = "rackcert signed run 1"
_MAX_STATEMENT = 4096
_MAX_SIGNATURE = 64 * 1024


@dataclass(frozen=True)
class Signed:
    """What a verified signature vouches for, and the key's own words (ssh-keygen's line)."""

    rack: str
    run: str
    manifest_sha256: str
    signer: str

    def describe(self) -> str:
        return f"rack {self.rack}, run {self.run}, MANIFEST.sha256 sha256 {self.manifest_sha256}"


def _keygen(argv: list[str], **kwargs) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["ssh-keygen", *argv], env=child_env(), check=False, **kwargs)
    except FileNotFoundError:
        raise InputError("ssh-keygen not found: install the OpenSSH client") from None


def _manifest(run_path: Path) -> Path:
    path = run_path / MANIFEST_NAME
    if not path.is_file():
        raise RecordError(f"{run_path}: no {MANIFEST_NAME}; run `rackcert report {run_path}` first")
    return path


def statement(rack: str, run: str, manifest_sha256: str) -> bytes:
    """The signed text: the run's rack and id, the manifest's digest."""
    return f"{_FORM}\nrack: {rack}\nrun: {run}\nmanifest-sha256: {manifest_sha256}\n".encode()


def _parse(data: bytes, where: Path) -> tuple[str, str, str]:
    lines = data.decode("utf-8", errors="replace").split("\n")
    fields = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    if lines[0] != _FORM or not {"rack", "run", "manifest-sha256"} <= fields.keys():
        raise RecordError(f"{where}: not a rackcert signed statement; sign the run again")
    return fields["rack"], fields["run"], fields["manifest-sha256"]


def _digest(path: Path) -> str:
    return hashlib.sha256(read_capped_bytes(path)).hexdigest()


def sign(run_path: Path, key: Path) -> Path:
    """Sign the run's statement (rack, run id, manifest digest) with the SSH private key `key`."""
    manifest = _manifest(run_path)
    key = key.expanduser()
    if not key.is_file():
        raise InputError(f"--key {key}: no such private key file")
    text = statement(run_path.parent.name, run_path.name, _digest(manifest))
    done = _keygen(["-Y", "sign", "-f", str(key), "-n", NAMESPACE], input=text, capture_output=True)
    if done.returncode != 0 or not done.stdout.startswith(b"-----BEGIN SSH SIGNATURE-----"):
        reason = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()
        raise InputError(f"cannot sign with {key}: {reason[-1] if reason else 'ssh-keygen failed'}")
    atomic_write_bytes(run_path / STATEMENT_NAME, text)
    target = run_path / SIGNATURE_NAME
    atomic_write_bytes(target, done.stdout)
    return target


def verify_signature(run_path: Path, public_key: Path) -> Signed:
    """Check the signature against `public_key`, and that it was made for this very run."""
    manifest = _manifest(run_path)
    signature, signed = run_path / SIGNATURE_NAME, run_path / STATEMENT_NAME
    if not signature.is_file():
        raise RecordError(f"{run_path}: not signed (no {SIGNATURE_NAME}); `rackcert report sign`")
    if not signed.is_file():
        raise RecordError(
            f"{run_path}: {SIGNATURE_NAME} has no {STATEMENT_NAME} (signed by an older rackcert,"
            " which did not bind the signature to the run): sign the run again"
        )
    public_key = public_key.expanduser()
    try:
        parts = public_key.read_text().split()
    except OSError as exc:
        raise InputError(f"--key {public_key}: cannot read: {exc.strerror}") from None
    if len(parts) < 2 or not parts[0].startswith(("ssh-", "ecdsa-", "sk-")):
        raise InputError(f"--key {public_key}: not an OpenSSH public key (ssh-ed25519 AAAA...)")
    text = read_capped_bytes(signed, _MAX_STATEMENT)
    read_capped_bytes(signature, _MAX_SIGNATURE)  # a regular file of a signature's size
    with tempfile.TemporaryDirectory(prefix="rackcert-verify-") as tmp:
        signers = Path(tmp) / "allowed_signers"
        signers.write_text(f'{_IDENTITY} namespaces="{NAMESPACE}" {parts[0]} {parts[1]}\n')
        done = _keygen(
            ["-Y", "verify", "-f", str(signers), "-I", _IDENTITY]
            + ["-n", NAMESPACE, "-s", str(signature)],
            input=text,
            capture_output=True,
        )
    if done.returncode != 0:
        raise RecordError(
            f"{run_path}: {SIGNATURE_NAME} does not verify with {public_key}: the statement was"
            " changed after signing, or another key signed it"
        )
    rack, run, digest = _parse(text, signed)
    shown = f"rack {visible(rack)}, run {visible(run)}"
    if (rack, run) != (run_path.parent.name, run_path.name):
        raise RecordError(
            f"{run_path}: the signature does not verify for this run: it was made for {shown},"
            f" and this directory is rack {visible(run_path.parent.name)}, run"
            f" {visible(run_path.name)} (a signed run copied or renamed)"
        )
    actual = _digest(manifest)
    if digest != actual:
        raise RecordError(
            f"{run_path}: the signature does not verify for this manifest: {shown} was signed"
            f" with MANIFEST.sha256 sha256 {visible(digest)}, the manifest now has {actual}"
            " (changed after signing)"
        )
    return Signed(rack, run, digest, done.stdout.decode(errors="replace").strip())
