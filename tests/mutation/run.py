"""A small mutation check: break one line of the code under test, run the tests that should notice, put it back.

Each mutant in ``mutants.py`` names a file, an exact piece of it (found exactly once), its replacement, the
claim it breaks and the test files that should catch it. The runner copies the working tree (tracked and new
files, uncommitted changes included) into a scratch folder, applies one mutant at a time there (the clone
you work in is never modified), runs ``pytest -x`` on the mutant's tests and reports it caught (a test
failed) or survived (every test passed). A survivor is either a test to add or an equivalent mutant to
explain; ``docs/testing.md`` says how to read the report.

    .venv/bin/python tests/mutation/run.py                 # every mutant, on the embedded defaults
    .venv/bin/python tests/mutation/run.py --only audit    # those whose id contains "audit"
    .venv/bin/python tests/mutation/run.py --list
    .venv/bin/python tests/mutation/run.py --with-services # keep DATABASE_URL etc. (PostgreSQL-only tests run)

Exit status 1 when a mutant survived (or the unmutated tests fail), 0 otherwise.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutants import MUTANTS, Mutant  # noqa: E402

# Without these the suite runs on the embedded defaults: SQLite, the filesystem broker, local storage.
SERVICE_VARIABLES = ("DATABASE_URL", "CELERY_BROKER_URL", "CERES_STORAGE", "CERES_S3_ENDPOINT_URL", "CERES_TEST_OUTPUT")


def copy_tree(target: Path) -> None:
    """The working tree as it is now (tracked and untracked files, ignored ones left out)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def environment(scratch: Path, with_services: bool) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if with_services or key not in SERVICE_VARIABLES}
    env.update(PYTHONPATH=str(scratch), CERES_DATA_DIR=str(scratch / "var"), CERES_TEST_OUTPUT=str(scratch / "out"),
               PYTHONDONTWRITEBYTECODE="1")
    return env


def run_tests(scratch: Path, tests: tuple[str, ...], env: dict[str, str], timeout: float) -> tuple[str, str, float]:
    """('passed' | 'failed' | 'timeout', the first failing test or the tail of the output, seconds)."""
    started = time.monotonic()
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", "not s3", "-rf", *tests]
    try:
        result = subprocess.run(command, cwd=scratch, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", f"no answer within {timeout:.0f} s", time.monotonic() - started
    elapsed = time.monotonic() - started
    if result.returncode == 0:
        return "passed", "", elapsed
    failed = re.findall(r"^(?:FAILED|ERROR) (\S.*?)(?: - .*)?$", result.stdout, re.MULTILINE)
    return "failed", failed[0] if failed else result.stdout.strip().splitlines()[-1], elapsed


def apply(scratch: Path, mutant: Mutant) -> str:
    """Write the mutated file into the scratch copy; returns the original text to put back."""
    path = scratch / mutant.path
    text = path.read_text(encoding="utf-8")
    count = text.count(mutant.original)
    if count != 1:
        raise SystemExit(f"mutant {mutant.id}: the original text occurs {count} times in {mutant.path}, not once")
    path.write_text(text.replace(mutant.original, mutant.mutated), encoding="utf-8")
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run the mutants whose id contains this text")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--with-services", action="store_true",
                        help="keep DATABASE_URL, CELERY_BROKER_URL and the storage settings of this shell")
    parser.add_argument("--timeout", type=float, default=600, help="seconds one mutant's tests may take")
    args = parser.parse_args()
    chosen = [m for m in MUTANTS if args.only in m.id]
    if args.list:
        for mutant in chosen:
            print(f"{mutant.id:40} {mutant.path}: {mutant.claim}")
        return 0
    with tempfile.TemporaryDirectory(prefix="ceres-mutation-") as folder:
        scratch = Path(folder)
        copy_tree(scratch)
        env = environment(scratch, args.with_services)
        probe = "import exporter.source; print(exporter.source.__file__)"
        where = subprocess.run([sys.executable, "-c", probe], cwd=scratch, env=env, capture_output=True, text=True,
                               check=True).stdout.strip()
        if not Path(where).is_relative_to(scratch):
            raise SystemExit(f"the copy is not what Python imports ({where}): mutants would not be seen")
        for mutant in chosen:  # every original must be found before the long run starts
            (scratch / mutant.path).write_text(apply(scratch, mutant), encoding="utf-8")
        tests = tuple(sorted({test for mutant in chosen for test in mutant.tests}))
        outcome, detail, seconds = run_tests(scratch, tests, env, args.timeout * 2)
        print(f"unmutated: {outcome} in {seconds:.0f} s ({len(tests)} test files) {detail}", flush=True)
        if outcome != "passed":
            return 1
        survivors = []
        for number, mutant in enumerate(chosen, start=1):
            original = apply(scratch, mutant)
            try:
                outcome, detail, seconds = run_tests(scratch, mutant.tests, env, args.timeout)
            finally:
                (scratch / mutant.path).write_text(original, encoding="utf-8")
            verdict = "SURVIVED" if outcome == "passed" else "caught"
            if outcome == "passed":
                survivors.append(mutant)
            print(f"[{number:2}/{len(chosen)}] {verdict:8} {mutant.id:40} {seconds:5.0f} s  {detail}", flush=True)
        print(f"\n{len(chosen) - len(survivors)} of {len(chosen)} mutants caught, {len(survivors)} survived")
        for mutant in survivors:
            print(f"  survived: {mutant.id}: {mutant.claim} ({mutant.path})")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
