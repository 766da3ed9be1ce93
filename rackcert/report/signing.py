"""An SSH signature over a run's MANIFEST.sha256: proof of who vouched for the run.

The manifest alone proves only that files match it, and anyone who can write the
run directory can recompute it. A signature by a key the auditor trusts closes
that gap: `ssh-keygen -Y sign -n rackcert` over the manifest, kept beside it in
MANIFEST.sha256.sig (outside the manifest: the manifest lists neither itself nor
its signature), checked with `ssh-keygen -Y verify` against the public key the
auditor holds. The manifest covers every other file, so one signature covers all.

Example:
    sign(run.path, Path("~/.ssh/rackcert_signing"))
    signer = verify_signature(run.path, Path("auditor/rackcert_signing.pub"))
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from rackcert.childenv import child_env
from rackcert.errors import InputError, RecordError
from rackcert.report.manifest import MANIFEST_NAME, SIGNATURE_NAME

NAMESPACE = "rackcert"  # ssh-keygen -n: a signature for rackcert runs and nothing else
_IDENTITY = "rackcert-signer"


def _keygen(argv: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["ssh-keygen", *argv], text=True, env=child_env(), check=False, **kwargs
        )
    except FileNotFoundError:
        raise InputError("ssh-keygen not found: install the OpenSSH client") from None


def _manifest(run_path: Path) -> Path:
    path = run_path / MANIFEST_NAME
    if not path.is_file():
        raise RecordError(f"{run_path}: no {MANIFEST_NAME}; run `rackcert report {run_path}` first")
    return path


def sign(run_path: Path, key: Path) -> Path:
    """Sign the run's manifest with the SSH private key `key`; returns the signature file."""
    manifest = _manifest(run_path)
    key = key.expanduser()
    if not key.is_file():
        raise InputError(f"--key {key}: no such private key file")
    target = run_path / SIGNATURE_NAME
    target.unlink(missing_ok=True)  # ssh-keygen refuses to overwrite; a re-sign replaces it
    done = _keygen(
        ["-Y", "sign", "-f", str(key), "-n", NAMESPACE, str(manifest)], capture_output=True
    )
    if done.returncode != 0 or not target.is_file():
        reason = (done.stderr or done.stdout).strip().splitlines()
        raise InputError(f"cannot sign with {key}: {reason[-1] if reason else 'ssh-keygen failed'}")
    return target


def verify_signature(run_path: Path, public_key: Path) -> str:
    """Check MANIFEST.sha256.sig against `public_key`; returns the key's fingerprint line."""
    manifest = _manifest(run_path)
    signature = run_path / SIGNATURE_NAME
    if not signature.is_file():
        raise RecordError(f"{run_path}: not signed (no {SIGNATURE_NAME}); `rackcert report sign`")
    public_key = public_key.expanduser()
    try:
        parts = public_key.read_text().split()
    except OSError as exc:
        raise InputError(f"--key {public_key}: cannot read: {exc.strerror}") from None
    if len(parts) < 2 or not parts[0].startswith(("ssh-", "ecdsa-", "sk-")):
        raise InputError(f"--key {public_key}: not an OpenSSH public key (ssh-ed25519 AAAA...)")
    with tempfile.TemporaryDirectory(prefix="rackcert-verify-") as tmp:
        signers = Path(tmp) / "allowed_signers"
        signers.write_text(f'{_IDENTITY} namespaces="{NAMESPACE}" {parts[0]} {parts[1]}\n')
        with manifest.open("rb") as stdin:
            done = subprocess.run(
                ["ssh-keygen", "-Y", "verify", "-f", str(signers), "-I", _IDENTITY]
                + ["-n", NAMESPACE, "-s", str(signature)],
                stdin=stdin,
                capture_output=True,
                env=child_env(),
                check=False,
            )
    if done.returncode != 0:
        raise RecordError(
            f"{run_path}: {SIGNATURE_NAME} does not verify with {public_key}: the manifest was"
            " changed after signing, or another key signed it"
        )
    return done.stdout.decode(errors="replace").strip()
