"""A capture: what a vCenter holds, as one versioned JSON file, for replay in the twin.

`rackcert capture SPEC -o FILE` writes it (provision/capture.py reads vCenter);
`rackcert lab up --capture FILE` serves it (rackcert/lab/replay.py); `rackcert
rehearse SPEC` does both and provisions the twin first. The models live in the
spine because both sides (the vSphere reader and the twin) read them.
"""

from rackcert.core.capture.model import CAPTURE_FORMAT, CAPTURE_VERSION, Capture, load_capture

__all__ = ["CAPTURE_FORMAT", "CAPTURE_VERSION", "Capture", "load_capture"]
