"""``tackroom approve|deny`` name who decides: ``--as``/``--role``/``--tenant``, else
``--approver``, else the config's principal, else ``local:<OS user>``."""

from __future__ import annotations

import argparse
import getpass

from tackroom.cli.approvals import _principal
from tackroom.cli.main import build_parser
from tackroom.contracts.principal import Principal


def parsed(*argv: str) -> argparse.Namespace:
    return build_parser(["approve", "s1", "c1", *argv]).parse_args(["approve", "s1", "c1", *argv])


def test_who_decides() -> None:
    configured = Principal(id="ops", roles=("admin",))
    as_bob = _principal(parsed("--as", "bob", "--role", "admin", "--tenant", "acme"), configured)
    assert (as_bob.id, as_bob.roles, as_bob.tenant) == ("bob", ("admin",), "acme")
    assert _principal(parsed("--approver", "carol"), configured).id == "carol"
    assert _principal(parsed(), configured) == configured
    assert _principal(parsed(), None).id == f"local:{getpass.getuser()}"
