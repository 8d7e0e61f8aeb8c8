"""A lone surrogate in a path of ``tackroom.yaml`` is one line (``ConfigError``), not a traceback.

Found by the long mode of the input fuzzing (``test_fuzz_inputs.py::test_tackroom_yaml`` under
``TACKROOM_SOAK=1``): YAML's ``"\\uD800"`` escape gives a string no file name can hold, and
``load_config`` resolves the paths of the config (``HarnessConfig.resolved``, ``Path.resolve``),
which raises ``UnicodeEncodeError: 'utf-8' codec can't encode character '\\ud800' ...:
surrogates not allowed`` — a traceback where a NUL in the same place is refused in one line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tackroom.runtime import ConfigError, load_config


@pytest.mark.parametrize(
    "text",
    [
        'endpoint:\n  socket: "lone \\uD800 surrogate"\nschema_version: 1\n',
        'engine: "embedded:a\\uD800b.db"\nschema_version: 1\n',
    ],
    ids=["endpoint.socket", "engine"],
)
def test_a_lone_surrogate_in_a_config_path_is_one_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "tackroom.yaml"
    path.write_text(text, encoding="ascii")
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    message = str(refused.value)
    assert message
    assert "\n" not in message.strip()
