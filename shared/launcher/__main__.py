"""`python -m shared.launcher [run|exec NAME|command NAME|names]` (the Makefile's entry point)."""

from __future__ import annotations

import argparse
import sys

from ..config import get_settings
from .app import exec_process, launch
from .plan import extra_names, lookup, names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.launcher", description=__doc__)
    sub = parser.add_subparsers(dest="cmd")
    run = sub.add_parser("run", help="the whole fleet, supervised (default)")
    run.add_argument(
        "--only",
        action="append",
        default=[],
        choices=(*names(), *extra_names()),
        help="run only these processes",
    )
    run.add_argument(
        "--var-dir", default=None, help="local state directory (default: $VAR_DIR or var)"
    )
    run.add_argument(
        "--demo", action="store_true", help="run `fleet demo` once every process is ready"
    )
    for name in ("exec", "command"):
        p = sub.add_parser(name, help=f"{name} one process of the table")
        p.add_argument("process", choices=names())
    sub.add_parser("names", help="the processes of the table")
    args = parser.parse_args(argv)
    if args.cmd in (None, "run"):
        return launch(
            only=getattr(args, "only", ()),
            var_dir=getattr(args, "var_dir", None),
            demo=getattr(args, "demo", False),
        )
    if args.cmd == "exec":
        exec_process(args.process)
    if args.cmd == "command":
        print(lookup(get_settings(), args.process).shell())
    if args.cmd == "names":
        print("\n".join(names()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
