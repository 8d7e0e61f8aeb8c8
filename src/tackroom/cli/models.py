"""``tackroom models list``: the model catalog, with context windows, capabilities and prices.

Runs the ``catalog`` worker on the config's engine (so reconciled lists show), or goes through a
running ``tackroom serve``'s endpoint when it holds that engine.
"""

from __future__ import annotations

import argparse
import asyncio
import json

from tackroom.cli._bus import bus
from tackroom.cli._options import add_config
from tackroom.contracts.catalog import CAPABILITIES, MODELS_LIST, ListResponse
from tackroom.runtime.config import load_config
from tackroom.runtime.typed import request_for

__all__ = ["add_parsers", "format_table"]

_FLAGS = {
    "tools": "T",
    "vision": "V",
    "thinking": "R",
    "cache": "C",
    "streaming": "S",
    "structured_output": "J",
}


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    models = commands.add_parser("models", help="the model catalog")
    actions = models.add_subparsers(dest="models_command", required=True, metavar="CMD")
    listing = actions.add_parser("list", help="models with context, capabilities and prices")
    listing.add_argument("--provider", help="one provider, e.g. openai")
    listing.add_argument("--capability", choices=CAPABILITIES, help="only models with it")
    add_config(listing, json="print the raw reply as JSON")
    listing.set_defaults(run=lambda args: asyncio.run(_list(args)))


async def _list(args: argparse.Namespace) -> int:
    request = request_for(
        MODELS_LIST, provider=args.provider or None, capability=args.capability or None
    )
    async with bus(load_config(args.config), ("engine", "catalog")) as caller:
        reply = await MODELS_LIST.call(caller, request)
    if args.json:
        print(json.dumps(MODELS_LIST.dump_response(reply), indent=2))
        return 0
    print(format_table(reply))
    return 0


def _tokens(count: int) -> str:
    if count >= 1_000_000 and count % 1_000_000 == 0:
        return f"{count // 1_000_000}M"
    if count >= 1000:
        return f"{round(count / 1000)}K"
    return str(count)


def _price(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".") if value else "0"


def format_table(reply: ListResponse) -> str:
    """One line per model; prices in USD per million tokens."""
    header = ("PROVIDER", "MODEL", "CONTEXT", "OUTPUT", "CAPS", "IN", "OUT", "CACHE R/W")
    rows = [header]
    for model in reply.models:
        caps = model.capabilities.model_dump()
        prices = model.prices
        rows.append(
            (
                model.provider,
                model.model,
                _tokens(model.context_window),
                _tokens(model.max_output_tokens),
                "".join(flag if caps[name] else "-" for name, flag in _FLAGS.items()),
                _price(prices.input),
                _price(prices.output),
                f"{_price(prices.cache_read)}/{_price(prices.cache_write)}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines.append("")
    lines.append(
        "CAPS: T tools, V vision, R thinking, C cache, S streaming, J JSON-schema answers."
        " Prices: USD per million "
        f"tokens, as of {reply.prices_as_of}."
    )
    return "\n".join(lines)
