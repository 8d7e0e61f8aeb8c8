"""The audit log contract suite against the ``audit`` worker this package ships (a SQLite file
whose ``records`` table holds each record's canonical JSON)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from typing import Any

from tackroom.testing.contracts.audit import AuditContract


class TestAuditWorker(AuditContract):
    worker_name = "audit"

    def tamper(self, config: dict[str, Any], seq: int) -> None:
        with closing(sqlite3.connect(config["path"])) as db, db:
            (body,) = db.execute("SELECT body FROM records WHERE seq = ?", (seq,)).fetchone()
            record = json.loads(body)
            record["fact"] = {**record["fact"], "n": -1}
            db.execute("UPDATE records SET body = ? WHERE seq = ?", (json.dumps(record), seq))
