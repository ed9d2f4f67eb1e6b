"""Run in vLLM's environment (tests/vllm/test_server.py): hand a ``trl vllm-serve ...`` command line to
TRL's own parser, then the ``vllm serve`` command TRL turns it into to vLLM's own parser and engine
arguments; print the engine settings they resolve to as JSON. Nothing is started."""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> None:
    from trl.scripts.vllm_serve import build_command, make_parser
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    assert argv[:2] == ["trl", "vllm-serve"], argv
    script_args, extra = make_parser().parse_args_and_config(args=argv[2:], return_remaining_strings=True)
    command = build_command(script_args, extra)
    serve = command[command.index("serve") :]
    # vLLM's CLI as `vllm serve` builds it (vllm/entrypoints/cli/main.py): the subcommand's parser, its checks
    parser = FlexibleArgumentParser()
    subcommand = ServeSubcommand()
    subcommand.subparser_init(parser.add_subparsers(dest="subparser"))
    args = parser.parse_args(serve)
    subcommand.validate(args)
    args.model = args.model_tag or args.model  # as ServeSubcommand.cmd does
    engine = AsyncEngineArgs.from_cli_args(args)
    print(json.dumps({
        "model": engine.model,
        "port": args.port,
        "max_model_len": engine.max_model_len,
        "gpu_memory_utilization": engine.gpu_memory_utilization,
        "enforce_eager": engine.enforce_eager,
        "vllm_serve": serve[1:],
    }))  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
