"""Taking the S3 gateway's proxy away and bringing it back, for the outage tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

SWIFT = Path(__file__).resolve().parents[2] / "infra" / "swift"


def gateway(script: str) -> None:
    """Run ``infra/swift/<script> --proxy-only`` (``stop.sh`` or ``start.sh``); a failure shows the script's words."""
    done = subprocess.run(["bash", str(SWIFT / script), "--proxy-only"], capture_output=True, text=True, check=False)
    if done.returncode:
        raise AssertionError(f"{script} --proxy-only exited {done.returncode}: {done.stderr.strip()}")
