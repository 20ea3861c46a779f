"""``python -m exporter``: export, verify, generate, assemble, redact, verify-release."""

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from exporter.errors import SourceError


def _export(args: argparse.Namespace) -> int:
    from exporter.shard import export_shard
    from exporter.task_table import read_tasks

    tasks = read_tasks(args.tasks) if args.tasks else None
    study = None
    if args.study_json:
        try:
            study = json.loads(args.study_json.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SourceError(f"unreadable study JSON: {exc}", path=str(args.study_json)) from None
    result = export_shard(
        args.source,
        args.out_dir,
        episode_index=args.episode_index,
        from_index=args.from_index,
        tasks=tasks,
        study=study,
    )
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(result.summary())
    return 0


def _verify(args: argparse.Namespace) -> int:
    from exporter.receipt import verify_shards

    found = verify_shards(args.shard_dir)
    for shard, problems in found.items():
        for problem in problems:
            print(problem if len(found) == 1 else f"{shard}: {problem}")
    return 1 if any(found.values()) else 0


def _verify_release(args: argparse.Namespace) -> int:
    from exporter.release import ReleaseProblem, load_public_key, summary, verify_release

    try:
        public_key = load_public_key(args.public_key)
    except (OSError, ValueError) as exc:
        print(f"error: --public-key: {exc}", file=sys.stderr)
        return 2
    try:
        manifest = verify_release(args.folder, public_key)
    except ReleaseProblem as exc:
        print(f"problem: {exc}")
        return 1
    print("\n".join(summary(manifest, public_key)))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m exporter", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    export = commands.add_parser("export", help="capture source (folder or ZIP) -> episode shard")
    export.add_argument("source", type=Path)
    export.add_argument("out_dir", type=Path)
    export.add_argument("--episode-index", type=int, default=0)
    export.add_argument("--from-index", type=int, default=0, help="global index of the episode's first frame")
    export.add_argument("--tasks", type=Path, help="the study dataset's current meta/tasks.parquet")
    export.add_argument("--study-json", type=Path, help="study block from the portal's registry")
    export.set_defaults(run=_export)

    verify = commands.add_parser("verify", help="check shards against their receipts")
    verify.add_argument("shard_dir", type=Path, nargs="+", metavar="SHARD_DIR",
                        help="episode shards; their files are hashed side by side")
    verify.set_defaults(run=_verify)

    verify_release = commands.add_parser(
        "verify-release", help="check a downloaded release or dataset against its signed manifest",
        description="Check the Ed25519 signature of FOLDER/release-manifest.json (or dataset-manifest.json) and "
                    "every file it lists. Exit 0 when all is intact, 1 naming the first problem, 2 for a bad key.")
    verify_release.add_argument("folder", type=Path,
                                help="the release or dataset folder (holding release-manifest.json or "
                                     "dataset-manifest.json)")
    verify_release.add_argument("--public-key", required=True,
                                help="the portal's release key: a PEM file, or base64 of the raw 32 bytes")
    verify_release.set_defaults(run=_verify_release)

    # parsed by their own modules (see main); listed here for --help
    commands.add_parser("generate", help="write a synthetic capture source", add_help=False)
    commands.add_parser("assemble", help="assemble shards into one study dataset", add_help=False)
    commands.add_parser("redact", help="derived shard with boxes (faces) filled in its video", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # pyarrow's default pool (mimalloc) keeps freed row-group buffers; the system allocator hands them
    # back, which lowers an hour's export peak by about 40 MB and a three-hour one by about 50 MB. Read
    # when pyarrow first allocates, so it is set before any command imports pyarrow.
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    if argv and argv[0] == "assemble":
        # assembly multiplies no matrices: without this, importing numpy starts OpenBLAS's thread pool, about
        # 30-50 ms of a two-core machine's start-up (the helper process's too, which inherits it)
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if argv and argv[0] in ("generate", "assemble", "redact"):
        # these subcommands live in modules of their own, imported only when used
        module = importlib.import_module(f"exporter.{argv[0]}")
        sub = argparse.ArgumentParser(prog=f"python -m exporter {argv[0]}")
        module.add_arguments(sub)
        args = sub.parse_args(argv[1:])
        run = module.run
    else:
        args = parser.parse_args(argv)
        run = args.run
    try:
        return int(run(args) or 0)
    except SourceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
