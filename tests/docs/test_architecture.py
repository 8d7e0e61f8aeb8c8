"""docs/architecture.md has one entry for every worker the package ships."""

from __future__ import annotations

from pathlib import Path

from tackroom.runtime.registry import BUILTIN_WORKERS

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
WORKERS = ROOT / "src" / "tackroom" / "workers"


def worker_rows(text: str) -> dict[str, list[str]]:
    """The rows of the doc's worker table, by worker name: the cells after the name."""
    assert "\n## The workers\n" in text, "docs/architecture.md has no '## The workers' section"
    section = text.split("\n## The workers\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 5:
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def package_of(target: str) -> str:
    """``tackroom.workers.policy_cedar.worker:WORKER`` -> ``workers/policy_cedar/``."""
    module = target.partition(":")[0].removeprefix("tackroom.")
    return "/".join(module.split(".")[:-1]) + "/"


def test_every_built_in_worker_has_a_complete_entry() -> None:
    rows = worker_rows(DOC.read_text(encoding="utf-8"))
    missing = sorted(set(BUILTIN_WORKERS) - set(rows))
    assert not missing, f"docs/architecture.md's worker table has no row for {missing}"
    for name, target in BUILTIN_WORKERS.items():
        package, does, serves, uses = rows[name]
        assert package == f"`{package_of(target)}`", f"{name}: package {package}"
        assert all((does, serves, uses)), f"{name}: an empty cell in {rows[name]}"
    unknown = sorted(set(rows) - set(BUILTIN_WORKERS))
    assert not unknown, f"docs/architecture.md names workers that do not exist: {unknown}"


def test_every_worker_package_is_a_built_in_worker() -> None:
    """A new folder under src/tackroom/workers/ is registered, so the test above covers it."""
    packages = {package_of(target) for target in BUILTIN_WORKERS.values()}
    folders = {
        f"workers/{path.name}/"
        for path in WORKERS.iterdir()
        if path.is_dir() and (path / "__init__.py").exists()
    }
    assert not folders - packages, f"worker packages not in BUILTIN_WORKERS: {folders - packages}"
